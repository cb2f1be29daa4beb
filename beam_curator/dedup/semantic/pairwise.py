"""The within-cluster SemDeDup pass.

Documents of one cluster, in rank order, are each scored by their highest cosine
similarity to any document ranked before them (``max_id`` names that document;
the first-ranked gets score 0 and itself). A score >= 1 - eps marks a duplicate,
and since every duplicate group keeps its first-ranked member, the rank order
decides which copy survives.

The similarity matrix is never held whole: rows go through in blocks of
``batch_size`` and columns in chunks, so a giant cluster costs
O(batch_size x chunk) memory. Blocks are plain float32 matmuls into one reused
buffer, followed by a max; only the squares on the diagonal need masking, and
they go by tiles of rows so that little of the unused triangle is computed.
On a CPU a cluster whose whole square fits the same memory budget (all but
giant ones) is one BLAS ``syrk``, which computes one triangle for half the
products of a matmul.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, ContextManager, Sequence

import numpy as np
import pandas as pd
import torch

from beam_curator.dedup.semantic.device import resolve_device
from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.ranking import as_id_array, is_descending, order_by_keys, rank_keys

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

ID, MAX_ID, SCORE, MAX_RANK_KEY = "id", "max_id", "cosine_sim_score", "max_rank_key"
"""Score rows: NeMo Curator's three columns, plus the rank key of ``max_id`` so that
partial results from several passes can be combined without looking it up."""

# Elements in one similarity block (128 MiB of float32): large enough that the
# matmul dominates, small enough for any device.
_BLOCK_ELEMENTS = 1 << 25
# Rows per tile where a row block meets the diagonal (see ``_Scan.row_block``):
# the wasted tile x tile squares shrink with the tile, but each tile costs a few
# extra tensor operations. On a CPU an operation costs microseconds, as much as
# a few hundred thousand FLOPs, so tiles can be small; on a GPU each costs a
# kernel launch, worth far more than the waste of squares up to ~2048 rows.
_CPU_DIAGONAL_TILE = 128
_GPU_DIAGONAL_TILE = 2048
# Devices where a cluster whose square fits the block budget goes to scipy's
# BLAS syrk (torch has none), if scipy is there: the GPU check runs where only
# torch may be. Only small enough clusters: alternating between torch's and
# BLAS's thread pools within a scan makes each pool's idle threads spin
# against the other's (2x slower measured with 2 threads), so a multi-block
# scan stays in torch.
_SYRK_DEVICES = ("cpu",) if all(importlib.util.find_spec(m) for m in ("scipy", "threadpoolctl")) else ()
# Clusters of at most this many documents are scored many per call (see
# ``max_similarity_to_earlier_many``): below it, the fixed cost of a call
# (allocation, masking, argmax: ~0.5 ms measured) outweighs the products;
# above it, the padded full squares cost more than one triangle per call.
_SMALL_CLUSTER = 64
# Similarities one batched call may hold (64 MiB of float32).
_BATCH_ELEMENTS = 1 << 24


@dataclass
class EarlierMax:
    """Best earlier match for each query (and, if symmetric, for each key).

    Scores are -inf and indices -1 where nothing was ranked earlier.
    """

    query_score: np.ndarray
    query_index: np.ndarray
    key_score: np.ndarray | None = None
    key_index: np.ndarray | None = None


def earlier_max_similarity(
    queries: np.ndarray,
    keys: np.ndarray,
    query_rank: np.ndarray,
    key_rank: np.ndarray,
    batch_size: int,
    device: str | torch.device | None = None,
    symmetric: bool = False,
) -> EarlierMax:
    """For each query row, the highest dot product with a key ranked before it.

    ``queries`` and ``keys`` are unit rows sorted by their (strictly increasing)
    ranks in one shared order; a row never matches a key of equal rank, which is
    how a cluster is compared with itself. With ``symmetric`` each key also gets
    its best earlier query, from the same matmuls. Ties go to the earliest-ranked
    match: chunks are visited in rank order and only a strictly larger value
    replaces the best so far.
    """
    _check_batch_size(batch_size)
    scan = _Scan(queries, keys, query_rank, key_rank, batch_size, resolve_device(device), symmetric)
    for start in range(0, len(scan.q_rank), batch_size):
        scan.row_block(start, min(start + batch_size, len(scan.q_rank)))
    result = EarlierMax(scan.q_best.cpu().numpy(), scan.q_arg.cpu().numpy())
    if symmetric:
        result.key_score, result.key_index = scan.k_best.cpu().numpy(), scan.k_arg.cpu().numpy()
    return result


class _Scan:
    """The running maxima of one :func:`earlier_max_similarity` call, and the one
    similarity buffer all its matmuls write into (a fresh 128 MiB block per
    matmul would cost page faults that a reused one pays once)."""

    def __init__(
        self, queries: np.ndarray, keys: np.ndarray, query_rank: np.ndarray, key_rank: np.ndarray,
        batch_size: int, dev: torch.device, symmetric: bool,
    ) -> None:
        self.q = _unit_rows(queries, dev)
        self.k = self.q if keys is queries else _unit_rows(keys, dev)
        self.q_rank = np.asarray(query_rank, dtype=np.int64)
        self.k_rank = np.asarray(key_rank, dtype=np.int64)
        self.q_rank_t = torch.from_numpy(self.q_rank).to(dev)
        self.k_rank_t = torch.from_numpy(self.k_rank).to(dev)
        self.q_best, self.q_arg = _no_match(len(self.q_rank), dev)
        self.k_best, self.k_arg = _no_match(len(self.k_rank) if symmetric else 0, dev)
        self.batch, self.symmetric = batch_size, symmetric
        self.chunk = max(batch_size, _BLOCK_ELEMENTS // batch_size)
        rows, cols = min(batch_size, len(self.q_rank)), min(self.chunk, len(self.k_rank))
        self.buffer = torch.empty(rows * cols, dtype=torch.float32, device=dev)

    def row_block(self, start: int, stop: int) -> None:
        # Keys before the block's first query are before all of its queries, keys
        # after its last query before none: only the span between needs a mask.
        before_all = self._keys_before(start)
        before_some = self._keys_before(stop - 1)
        self._query_side(start, stop, 0, before_all)
        if not self.symmetric:
            # The mixed span goes by tiles of rows, so that of the products
            # computed only the tile x tile squares on the diagonal are unused
            # (by whole row blocks, half of a batch x batch square would be).
            tile = min(self.batch, _CPU_DIAGONAL_TILE if self.q.device.type == "cpu" else _GPU_DIAGONAL_TILE)
            for t0 in range(start, stop, tile):
                t1 = min(t0 + tile, stop)
                self._query_side(t0, t1, before_all, self._keys_before(t1 - 1))
            return
        # Symmetric: every product of the mixed span serves one side or the other.
        for c0, c1 in self._chunks(before_all, before_some):
            sim = self._block(start, stop, c0, c1)
            later = self.k_rank_t[None, c0:c1] >= self.q_rank_t[start:stop, None]
            earlier_query = sim.masked_fill(~later, -torch.inf).max(dim=0)
            _keep_larger(self.k_best[c0:c1], self.k_arg[c0:c1], earlier_query, start)
            earlier_key = _row_max(sim.masked_fill_(later, -torch.inf))
            _keep_larger(self.q_best[start:stop], self.q_arg[start:stop], earlier_key, c0)
        for c0, c1 in self._chunks(before_some, len(self.k_rank)):
            _keep_larger(self.k_best[c0:c1], self.k_arg[c0:c1], self._block(start, stop, c0, c1).max(dim=0), start)

    def _query_side(self, r0: int, r1: int, lo: int, hi: int) -> None:
        """Fold keys ``lo:hi`` into the best matches of queries ``r0:r1``; only keys
        not ranked before the first of these queries need masking."""
        mask_from = self._keys_before(r0)
        for c0, c1 in self._chunks(lo, hi):
            sim = self._block(r0, r1, c0, c1)
            if c1 > mask_from:
                m0 = max(c0, mask_from)
                not_earlier = self.k_rank_t[None, m0:c1] >= self.q_rank_t[r0:r1, None]
                sim[:, m0 - c0 :].masked_fill_(not_earlier, -torch.inf)
            _keep_larger(self.q_best[r0:r1], self.q_arg[r0:r1], _row_max(sim), c0)

    def _keys_before(self, query: int) -> int:
        return int(np.searchsorted(self.k_rank, self.q_rank[query]))

    def _chunks(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return [(c0, min(c0 + self.chunk, hi)) for c0 in range(lo, hi, self.chunk)]

    def _block(self, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        """Similarities of queries ``r0:r1`` with keys ``c0:c1``, in the shared buffer."""
        out = self.buffer[: (r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0)
        return torch.mm(self.q[r0:r1], self.k[c0:c1].T, out=out)


def max_similarity_to_earlier(
    ranked_embeddings: np.ndarray, batch_size: int, device: str | torch.device | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The SemDeDup kernel for one cluster already in rank order: float32 scores
    and the position of each row's best earlier row; row 0 gets (0, 0)."""
    _check_batch_size(batch_size)
    ranks = np.arange(len(ranked_embeddings), dtype=np.int64)
    fits = len(ranks) ** 2 <= max(_BLOCK_ELEMENTS, batch_size**2)
    if len(ranks) and fits and resolve_device(device).type in _SYRK_DEVICES:
        # One square, one syrk, no scan to set up: that matters for the many small clusters.
        with _blas_threads_like_torch():
            score, index = _earlier_max_by_syrk(np.ascontiguousarray(ranked_embeddings, dtype=np.float32))
    else:
        found = earlier_max_similarity(ranked_embeddings, ranked_embeddings, ranks, ranks, batch_size, device)
        score, index = found.query_score, found.query_index
    return _no_earlier_is_self(score, index)


def max_similarity_to_earlier_many(
    vectors: np.ndarray, starts: Sequence[int], batch_size: int, device: str | torch.device | None = None,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`max_similarity_to_earlier` for many clusters laid out one after
    another: ranked row ``j`` is ``vectors[order[j]]`` (``vectors[j]``
    without ``order``), cluster ``i`` is ranked rows ``starts[i]`` up to
    ``starts[i + 1]``, each in rank order; indices are positions within the
    cluster. Rows are gathered a cluster at a time, never all at once. Small
    clusters go many per batched matmul, each padded to the next power of two
    of its size: one call for hundreds of them, where one call each cost more
    than their products."""
    ranked = np.arange(len(vectors)) if order is None else np.asarray(order)
    bounds = np.append(np.asarray(starts, dtype=np.int64), len(ranked))
    sizes = np.diff(bounds)
    scores = np.empty(len(ranked), dtype=np.float32)
    index = np.empty(len(ranked), dtype=np.int64)
    small = (sizes > 0) & (sizes <= _SMALL_CLUSTER)
    for cluster in np.flatnonzero(sizes > _SMALL_CLUSTER):
        low, high = bounds[cluster], bounds[cluster + 1]
        rows = np.ascontiguousarray(vectors[ranked[low:high]], dtype=np.float32)
        scores[low:high], index[low:high] = max_similarity_to_earlier(rows, batch_size, device)
    widths = 1 << np.ceil(np.log2(np.maximum(sizes, 2))).astype(np.int64)
    dev = resolve_device(device)
    for width in np.unique(widths[small]):
        chosen = np.flatnonzero(small & (widths == width))
        per_call = max(1, _BATCH_ELEMENTS // int(width * width))
        for first in range(0, len(chosen), per_call):
            group = chosen[first : first + per_call]
            _earlier_max_padded(vectors, ranked, bounds[group], sizes[group], int(width), dev, scores, index)
    return scores, index


def _earlier_max_padded(
    vectors: np.ndarray, ranked: np.ndarray, starts: np.ndarray, sizes: np.ndarray, width: int, dev: torch.device,
    scores: np.ndarray, index: np.ndarray,
) -> None:
    """Score clusters of at most ``width`` rows with one batched matmul of
    ``width``-row blocks (zero rows pad each block: they come after every
    real row, so the strict lower triangle never reaches them)."""
    offsets = np.arange(width)
    real = offsets[None, :] < sizes[:, None]
    rows = (starts[:, None] + offsets[None, :])[real]
    blocks = np.zeros((len(starts), width, vectors.shape[1]), dtype=np.float32)
    blocks[real] = vectors[ranked[rows]]
    x = torch.from_numpy(blocks).to(dev)
    sim = torch.bmm(x, x.transpose(1, 2))
    sim.masked_fill_(~torch.ones(width, width, dtype=torch.bool, device=dev).tril(-1), -torch.inf)
    best, arg = sim.max(dim=2)
    real_t = torch.from_numpy(real).to(dev)
    found, position = best[real_t].cpu().numpy(), arg[real_t].cpu().numpy()
    scores[rows], index[rows] = _no_earlier_is_self(found, position, np.broadcast_to(offsets, real.shape)[real])


def _no_earlier_is_self(score: np.ndarray, index: np.ndarray, position: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The first-ranked document (no earlier match: -inf) scores 0 against itself."""
    none = score == -np.inf
    score[none] = 0.0
    index[none] = (np.arange(len(score)) if position is None else position)[none]
    return clip_scores(score), index


def clip_scores(scores: np.ndarray) -> np.ndarray:
    """Similarities within [0, 1], as NeMo Curator keeps them: float32
    normalisation makes identical vectors score up to ~1 + 1e-7, and
    anti-correlated ones below 0 count as no similarity."""
    return np.clip(scores, 0.0, 1.0, out=scores)


def semdedup_cluster(
    ids: Sequence,
    embeddings: np.ndarray,
    cosine_dist: np.ndarray | None,
    l2_dist: np.ndarray | None,
    which_to_keep: str,
    distance_metric: str,
    batch_size: int,
    seed: int,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """Score rows (id, max_id, cosine_sim_score, max_rank_key) for one cluster, in rank order."""
    keys = rank_keys(ids, cosine_dist, l2_dist, which_to_keep, distance_metric, seed)
    return semdedup_cluster_by_keys(ids, embeddings, keys, which_to_keep, batch_size, device)


def semdedup_cluster_by_keys(
    ids: Sequence,
    embeddings: np.ndarray,
    keys: np.ndarray,
    which_to_keep: str,
    batch_size: int,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """:func:`semdedup_cluster` with rank keys computed beforehand (see ``ranking.rank_keys``)."""
    id_array = as_id_array(ids)
    key_array = np.asarray(keys, dtype=np.float64)
    unit = l2_normalize(embeddings, id_array)
    order = order_by_keys(id_array, key_array, which_to_keep)
    scores, index = max_similarity_to_earlier(unit[order], batch_size, device)
    ranked_ids, ranked_keys = id_array[order], key_array[order]
    return score_rows(ranked_ids, ranked_ids[index], scores, ranked_keys[index])


def semdedup_clusters(
    ids: Sequence,
    unit: np.ndarray,
    keys: np.ndarray,
    starts: Sequence[int],
    which_to_keep: str,
    batch_size: int,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """:func:`semdedup_cluster_by_keys` for many clusters held in one array:
    cluster ``i`` is rows ``starts[i]`` up to ``starts[i + 1]`` of ``ids``,
    ``unit`` (rows already of unit length) and ``keys``. One sort orders every
    cluster, rows are gathered in rank order a cluster at a time, and one frame holds all
    the score rows, cluster after cluster, each in rank order; small clusters
    are scored many per kernel call. Ids must be unique across the clusters."""
    id_array = as_id_array(ids)
    key_array = np.asarray(keys, dtype=np.float64)
    bounds = np.append(np.asarray(starts, dtype=np.int64), len(id_array))
    order = rank_order_in_clusters(id_array, key_array, bounds, which_to_keep)
    segment = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    scores, index = max_similarity_to_earlier_many(unit, bounds[:-1], batch_size, device, order)
    index += bounds[segment]
    ranked_ids, ranked_keys = id_array[order], key_array[order]
    return score_rows(ranked_ids, ranked_ids[index], scores, ranked_keys[index])


def rank_order_in_clusters(ids: np.ndarray, keys: np.ndarray, bounds: np.ndarray, which_to_keep: str) -> np.ndarray:
    """The rows of clusters laid out one after another (cluster ``i`` is rows
    ``bounds[i]`` up to ``bounds[i + 1]``), each cluster in rank order: one
    sort for all of them."""
    segment = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    order = np.lexsort((ids, keys, segment))
    if is_descending(which_to_keep):  # each cluster's run of the ascending order, reversed in place
        position = np.arange(len(order))
        order = order[bounds[segment] + bounds[segment + 1] - 1 - position]
    return order


def score_rows(ids: np.ndarray, max_ids: np.ndarray, scores: np.ndarray, max_keys: np.ndarray) -> pd.DataFrame:
    """The score-row frame every pass emits."""
    return pd.DataFrame({ID: ids, MAX_ID: max_ids, SCORE: clip_scores(np.array(scores, dtype=np.float32)), MAX_RANK_KEY: max_keys})


def identify_duplicates(scores: np.ndarray | pd.Series, eps: float) -> np.ndarray:
    """Boolean mask of duplicates: cosine similarity to an earlier document >= 1 - eps."""
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    return np.asarray(scores) >= 1.0 - eps


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")


@cache
def _blas_threads() -> ThreadpoolController:
    from scipy.linalg import blas  # noqa: F401  (loaded first, so that the controller sees its BLAS)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _blas_threads_like_torch() -> ContextManager:
    """Run BLAS calls made outside torch (``syrk``) on as many threads as torch
    is set to use, so one setting (``torch.set_num_threads``) governs the kernel."""
    return _blas_threads().limit(limits=torch.get_num_threads(), user_api="blas")


def _unit_rows(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(device)


def _no_match(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.full((n,), -torch.inf, dtype=torch.float32, device=device),
        torch.full((n,), -1, dtype=torch.int64, device=device),
    )


def _earlier_max_by_syrk(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's highest dot product with a row before it, and that row's
    position (-inf and 0 for the first row).

    One syrk computes the upper triangle of the column-major square, which read
    row-major is each row against the rows before it: half the products of a
    matmul. The untouched triangle and the diagonal stay -inf, so a plain
    argmax (the first of equal values) skips them.
    """
    from scipy.linalg import blas

    n = len(rows)
    square = np.full((n, n), -np.inf, dtype=np.float32, order="F")
    blas.ssyrk(1.0, rows.T, beta=0.0, c=square, trans=1, lower=0, overwrite_c=1)
    np.fill_diagonal(square, -np.inf)
    earlier = square.T
    index = np.argmax(earlier, axis=1)
    return earlier[np.arange(n), index], index


def _row_max(sim: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's maximum and its first position, like ``sim.max(dim=1)``; on a
    CPU through numpy, whose vectorised argmax is ~8x faster than torch's."""
    if sim.device.type != "cpu":
        return sim.max(dim=1)
    values = sim.numpy()
    index = np.argmax(values, axis=1)
    return torch.from_numpy(np.take_along_axis(values, index[:, None], axis=1)[:, 0]), torch.from_numpy(index)


def _keep_larger(best: torch.Tensor, arg: torch.Tensor, found: tuple[torch.Tensor, torch.Tensor], offset: int) -> None:
    """Update running maxima in place; equal values keep the earlier match."""
    values, index = found
    better = values > best
    torch.where(better, values, best, out=best)
    torch.where(better, index.add_(offset), arg, out=arg)
