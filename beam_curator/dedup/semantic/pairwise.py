"""The within-cluster SemDeDup pass.

Documents of one cluster, in rank order, are each scored by their highest cosine
similarity to any document ranked before them (``max_id`` names that document;
the first-ranked gets score 0 and itself). A score >= 1 - eps marks a duplicate,
and since every duplicate group keeps its first-ranked member, the rank order
decides which copy survives.

The similarity matrix is never held whole: rows go through in blocks of
``batch_size`` and columns in chunks, so a giant cluster costs
O(batch_size x chunk) memory. Blocks are plain float32 matmuls followed by a
masked max; only the block straddling the diagonal needs masking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.ranking import as_id_array, order_by_keys, rank_keys

ID, MAX_ID, SCORE, MAX_RANK_KEY = "id", "max_id", "cosine_sim_score", "max_rank_key"
"""Score rows: NeMo Curator's three columns, plus the rank key of ``max_id`` so that
partial results from several passes can be combined without looking it up."""

# Elements in one similarity block (128 MiB of float32): large enough that the
# matmul dominates, small enough for any device.
_BLOCK_ELEMENTS = 1 << 25
# Column spans of a row block: keys ranked before all of its queries, mixed, after all.
_EARLIER, _MIXED, _LATER = "earlier", "mixed", "later"


@dataclass
class EarlierMax:
    """Best earlier match for each query (and, if symmetric, for each key).

    Scores are -inf and indices -1 where nothing was ranked earlier.
    """

    query_score: np.ndarray
    query_index: np.ndarray
    key_score: np.ndarray | None = None
    key_index: np.ndarray | None = None


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The given device, else CUDA when available, else the CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    dev = resolve_device(device)
    q = _unit_rows(queries, dev)
    k = q if keys is queries else _unit_rows(keys, dev)
    q_rank = np.asarray(query_rank, dtype=np.int64)
    k_rank = np.asarray(key_rank, dtype=np.int64)
    q_rank_t = torch.from_numpy(q_rank).to(dev)
    k_rank_t = torch.from_numpy(k_rank).to(dev)
    q_best, q_arg = _no_match(len(q_rank), dev)
    k_best, k_arg = _no_match(len(k_rank) if symmetric else 0, dev)
    chunk = max(batch_size, _BLOCK_ELEMENTS // batch_size)
    for start in range(0, len(q_rank), batch_size):
        stop = min(start + batch_size, len(q_rank))
        rows, row_rank = q[start:stop], q_rank_t[start:stop, None]
        # Keys before the block's first query are before all of its queries, keys
        # after its last query before none: only the span between needs a mask.
        before_all = int(np.searchsorted(k_rank, q_rank[start]))
        before_some = int(np.searchsorted(k_rank, q_rank[stop - 1]))
        spans = [(0, before_all, _EARLIER), (before_all, before_some, _MIXED)]
        if symmetric:
            spans.append((before_some, len(k_rank), _LATER))
        for lo, hi, kind in spans:
            for c0 in range(lo, hi, chunk):
                c1 = min(c0 + chunk, hi)
                sim = rows @ k[c0:c1].T
                if kind == _MIXED:
                    later = k_rank_t[None, c0:c1] >= row_rank
                    if symmetric:
                        _keep_larger(k_best[c0:c1], k_arg[c0:c1], sim.masked_fill(~later, -torch.inf).max(dim=0), start)
                    sim.masked_fill_(later, -torch.inf)
                if kind == _LATER:
                    _keep_larger(k_best[c0:c1], k_arg[c0:c1], sim.max(dim=0), start)
                else:
                    _keep_larger(q_best[start:stop], q_arg[start:stop], sim.max(dim=1), c0)
    result = EarlierMax(q_best.cpu().numpy(), q_arg.cpu().numpy())
    if symmetric:
        result.key_score, result.key_index = k_best.cpu().numpy(), k_arg.cpu().numpy()
    return result


def max_similarity_to_earlier(
    ranked_embeddings: np.ndarray, batch_size: int, device: str | torch.device | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The SemDeDup kernel for one cluster already in rank order: float32 scores
    and the position of each row's best earlier row; row 0 gets (0, 0)."""
    ranks = np.arange(len(ranked_embeddings), dtype=np.int64)
    found = earlier_max_similarity(ranked_embeddings, ranked_embeddings, ranks, ranks, batch_size, device)
    none = found.query_index < 0
    found.query_score[none] = 0.0
    found.query_index[none] = ranks[none]
    return found.query_score, found.query_index


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


def score_rows(ids: np.ndarray, max_ids: np.ndarray, scores: np.ndarray, max_keys: np.ndarray) -> pd.DataFrame:
    """The score-row frame every pass emits."""
    return pd.DataFrame({ID: ids, MAX_ID: max_ids, SCORE: scores, MAX_RANK_KEY: max_keys})


def identify_duplicates(scores: np.ndarray | pd.Series, eps: float) -> np.ndarray:
    """Boolean mask of duplicates: cosine similarity to an earlier document >= 1 - eps."""
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    return np.asarray(scores) >= 1.0 - eps


def _unit_rows(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(device)


def _no_match(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.full((n,), -torch.inf, dtype=torch.float32, device=device),
        torch.full((n,), -1, dtype=torch.int64, device=device),
    )


def _keep_larger(best: torch.Tensor, arg: torch.Tensor, found: tuple[torch.Tensor, torch.Tensor], offset: int) -> None:
    """Update running maxima in place; equal values keep the earlier match."""
    values, index = found
    better = values > best
    best.copy_(torch.where(better, values, best))
    arg.copy_(torch.where(better, index + offset, arg))
