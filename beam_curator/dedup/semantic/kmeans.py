"""K-means for semantic deduplication: fit on a sample, assign every embedding in parallel.

Design trade-off. Semantic dedup only needs k-means to split millions of
embeddings into clusters small enough for an exact pairwise pass; it does not
need the best possible centroids. So the fit runs on one machine over a seeded
uniform sample capped at ``max_sample_bytes``, and the assignment of *all*
embeddings is a separate, stateless, chunked step (:func:`assign`) that Beam
workers run in parallel, each on its own shard.

The alternative, distributed Lloyd (every iteration a map over all shards plus
a reduce of per-cluster sums), would use all the data for every centroid
update, but costs one full pass over the dataset, a shuffle and a barrier per
iteration, and tens to hundreds of iterations; a failed worker stalls them all.
A uniform sample of a few hundred points per cluster already estimates each
centroid to within the noise that matters for grouping near-duplicates, the
sample fits in one GPU's (or host's) memory, and the data is read exactly
twice (sample + assignment), both embarrassingly parallel and resumable.

Backends share one results contract: seeded; k-means++ family of
initialisations; ``n_iter`` counts centroid updates; ``inertia`` is that of
the returned centroids over the fitted rows; the same meaning of ``tol``.

* ``"cuml"``: ``cuml.cluster.KMeans`` with ``init="scalable-k-means++"`` (the
  parallel k-means|| variant) on an NVIDIA GPU.
* ``"torch"``: greedy k-means++ on a subsample, then Lloyd iterations as
  blocked matrix products with Hamerly's bounds (same labels as plain Lloyd,
  far fewer products once clusters settle), on CUDA when available, else on
  the CPU.

``tol``: cuML stops when the summed squared movement of all centroids in one
iteration falls below ``tol``; its C++ core (RAFT) can also stop when the
relative inertia improvement ``(prev - cur) / prev`` falls below ``tol``
(``inertia_check``), which cuML's Python class leaves off. The torch backend
applies both tests and stops at whichever fires first: the inertia test is
scale-free, so one ``tol`` means the same on unit vectors of any dimension.
With ``tol=0`` neither test fires: the torch backend runs ``max_iter``
updates or until no label changes (a fixed point, where further iterations
cannot change anything), which benchmarks use to compare equal work.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

Backend = Literal["auto", "cuml", "torch"]

# k-means++ seeds from at most this many rows per cluster, in at most this
# many principal dimensions (see _kmeans_plus_plus). Measured on normalised
# mixtures of 200-250 gaussians, d=384, k = number of modes, 4 seeds: 32 rows
# per cluster in 64 dimensions gave a converged inertia 1-3% *lower* than 32
# rows in all 384 dimensions (16 rows: ~2% higher), at a third of the
# seeding time; seeding on all rows costs more than the Lloyd iterations.
_INIT_ROWS_PER_CLUSTER = 32
_SEED_DIMS = 64
# Elements of the (rows x k) distance block computed at once during the fit.
# On the CPU every block op is a parallel region, and on a shared host a
# descheduled thread stalls each one for a time slice: 2**22 (16 MiB, still
# within L3) instead of 2**20 cut a 2-thread fit on a busy 2-core machine from
# 5.9 s to 1.8 s, with no change single-threaded. A GPU wants bigger blocks.
_CPU_BLOCK_ELEMS = 1 << 22
_GPU_BLOCK_ELEMS = 1 << 26
_EPS = 1e-12
_THREADS_LOCK = threading.Lock()


@dataclass(frozen=True)
class KMeansModel:
    """A fitted model.

    ``inertia`` is the sum of squared L2 distances from each fitted row to its
    nearest centroid in ``centroids``; with a byte budget it covers only the
    ``n_fit_rows`` sampled rows. A seed gives bitwise the same model on the
    CPU; on a GPU, float atomics in the cluster sums may change the last bits.
    """

    centroids: np.ndarray
    n_iter: int
    inertia: float
    backend: str
    n_fit_rows: int


@dataclass(frozen=True)
class Assignment:
    """Nearest and second-nearest centroid of each row (nearest in squared L2,
    the k-means objective). Distances are float32; ``*_l2_*`` are Euclidean,
    ``*_cosine_*`` are ``1 - cosine similarity``. With one centroid the second
    label is -1 and its distances +inf."""

    labels: np.ndarray
    l2_dist_to_cent: np.ndarray
    cosine_dist_to_cent: np.ndarray
    second_labels: np.ndarray
    second_l2_dist: np.ndarray
    second_cosine_dist: np.ndarray


def fit_kmeans(
    x: np.ndarray,
    n_clusters: int,
    *,
    max_iter: int = 300,
    tol: float = 1e-4,
    seed: int = 42,
    backend: Backend = "auto",
    device: str | torch.device | None = None,
    max_sample_bytes: int | None = None,
) -> KMeansModel:
    """Fit ``n_clusters`` centroids to the rows of ``x`` (n, d).

    ``x`` may be a ``np.memmap``: with ``max_sample_bytes`` only the sampled
    rows are read. The sample is at most ``max_sample_bytes`` of float32 rows,
    drawn uniformly without replacement with ``seed``. ``backend="auto"``
    picks cuML when it is installed and a CUDA GPU is visible, else torch.
    ``device`` (e.g. ``"cuda:1"``, ``"cpu"``) defaults to the first GPU when
    there is one.
    """
    _check_matrix(x, "x")
    n, d = x.shape
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, (int, np.integer)) or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    if n_clusters > n:
        raise ValueError(
            f"n_clusters={n_clusters} is more than the {n} embeddings to cluster; "
            f"pass n_clusters <= {n} (or cluster more embeddings)"
        )
    if max_iter < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    sample = _budgeted_sample(x, int(n_clusters), max_sample_bytes, seed)
    chosen = _resolve_backend(backend)
    if chosen == "cuml":
        return _fit_cuml(sample, int(n_clusters), max_iter, tol, seed, device)
    return _fit_torch(sample, int(n_clusters), max_iter, tol, seed, _torch_device(device))


def assign(
    x: np.ndarray,
    centroids: np.ndarray,
    *,
    device: str | torch.device | None = None,
    chunk_rows: int = 65536,
) -> Assignment:
    """Nearest and second-nearest centroid of every row of ``x``.

    Rows are independent, so a worker can call this on any shard and the
    results concatenate to those of one call over all rows. Peak memory is
    about ``chunk_rows * len(centroids) * 4`` bytes besides the outputs.
    """
    _check_matrix(x, "x")
    _check_matrix(centroids, "centroids")
    if x.shape[1] != centroids.shape[1]:
        raise ValueError(
            f"x has {x.shape[1]} dimensions but the centroids have {centroids.shape[1]}; "
            "assign embeddings from the same model the centroids were fitted on"
        )
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    dev = _torch_device(device)
    cent = _tensor(centroids, dev)
    k = cent.shape[0]
    cent_sq = (cent * cent).sum(1)
    n = x.shape[0]
    out = {
        "labels": np.empty(n, np.int32),
        "l2": np.empty(n, np.float32),
        "cos": np.empty(n, np.float32),
        "labels2": np.full(n, -1, np.int32),
        "l2_2": np.full(n, np.inf, np.float32),
        "cos2": np.full(n, np.inf, np.float32),
    }
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        rows = _tensor(x[start:stop], dev)
        rows_sq = (rows * rows).sum(1)
        partial, labels = _two_nearest(rows, cent, cent_sq)
        chosen_sq = cent_sq[labels]
        # x.c back from ||c||^2 - 2 x.c: exact to float rounding, and no
        # (rows x 2 x d) gather of the chosen centroids.
        cos_sim = (chosen_sq - partial) / 2 / (rows_sq.sqrt()[:, None] * chosen_sq.sqrt()).clamp_(min=_EPS)
        l2 = partial.add_(rows_sq[:, None]).clamp_(min=0).sqrt_()
        labels, l2, cos = (t.cpu().numpy() for t in (labels, l2, 1 - cos_sim))
        out["labels"][start:stop] = labels[:, 0]
        out["l2"][start:stop] = l2[:, 0]
        out["cos"][start:stop] = cos[:, 0]
        if k > 1:
            out["labels2"][start:stop] = labels[:, 1]
            out["l2_2"][start:stop] = l2[:, 1]
            out["cos2"][start:stop] = cos[:, 1]
    return Assignment(
        labels=out["labels"],
        l2_dist_to_cent=out["l2"],
        cosine_dist_to_cent=out["cos"],
        second_labels=out["labels2"],
        second_l2_dist=out["l2_2"],
        second_cosine_dist=out["cos2"],
    )


def _two_nearest(
    rows: torch.Tensor, centroids: torch.Tensor, cent_sq: torch.Tensor, out: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``||c||^2 - 2 x.c`` and index of the nearest and second-nearest
    centroid (one column when there is one centroid). ``||x||^2`` is the same
    for every centroid, so the ranking needs one matrix product; ``out`` is a
    reusable (rows x k) buffer."""
    block = torch.addmm(cent_sq, rows, centroids.T, beta=1, alpha=-2, out=out)
    top = torch.topk(block, min(2, len(centroids)), dim=1, largest=False, sorted=True)
    return top.values, top.indices


def _check_matrix(a: np.ndarray, name: str) -> None:
    if not isinstance(a, np.ndarray) or a.ndim != 2 or 0 in a.shape:
        shape = getattr(a, "shape", type(a).__name__)
        raise ValueError(f"{name} must be a non-empty 2-D numpy array (rows x dims), got {shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} must hold floating-point embeddings, got dtype {a.dtype}")


def _tensor(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """float32 tensor on ``device``, sharing ``a``'s memory when it can
    (torch cannot share a read-only buffer such as a memmap opened "r")."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return (torch.from_numpy(a) if a.flags.writeable else torch.tensor(a)).to(device)


def _budgeted_sample(x: np.ndarray, k: int, max_sample_bytes: int | None, seed: int) -> np.ndarray:
    """The float32 rows to fit on: all of ``x``, or a seeded uniform sample
    within the byte budget (sorted, so a memmap is read front to back)."""
    n, d = x.shape
    row_bytes = 4 * d
    if max_sample_bytes is not None and max_sample_bytes < n * row_bytes:
        budget_rows = max_sample_bytes // row_bytes
        if budget_rows < k:
            raise ValueError(
                f"max_sample_bytes={max_sample_bytes} holds only {budget_rows} rows of {d} float32 "
                f"values, fewer than n_clusters={k}; raise it to at least {k * row_bytes} bytes "
                f"(a few hundred rows per cluster is better)"
            )
        index = np.sort(np.random.default_rng(seed).choice(n, size=budget_rows, replace=False))
        sample = np.ascontiguousarray(x[index], dtype=np.float32)
    else:
        index = np.arange(n)
        sample = np.ascontiguousarray(x, dtype=np.float32)  # no copy when x already is
    # A NaN or inf anywhere in a row makes its squared norm non-finite, so one
    # cheap reduction finds them without a (rows x d) temporary.
    bad = np.flatnonzero(~np.isfinite(np.einsum("ij,ij->i", sample, sample)))
    if bad.size:
        raise ValueError(
            f"x row {int(index[bad[0]])} (and {bad.size - 1} more) holds NaN, inf or values too large "
            "for float32 distances; drop or re-embed those records before clustering"
        )
    return sample


def _resolve_backend(backend: str) -> str:
    if backend == "torch":
        return "torch"
    if backend not in ("auto", "cuml"):
        raise ValueError(f"backend must be 'auto', 'cuml' or 'torch', got {backend!r}")
    if _cuml_usable():
        return "cuml"
    if backend == "cuml":
        raise RuntimeError(
            "backend='cuml' needs the cuml package and a CUDA GPU; "
            "install beam-curator[gpu] on a GPU host, or use backend='torch'"
        )
    return "torch"


def _cuml_usable() -> bool:
    try:
        import cupy
        import cuml  # noqa: F401
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:
        return False


def _torch_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _fit_cuml(
    sample: np.ndarray, k: int, max_iter: int, tol: float, seed: int, device: str | torch.device | None
) -> KMeansModel:
    import cupy
    from cuml.cluster import KMeans

    target = _torch_device(device if device is not None else "cuda")
    if target.type != "cuda":
        raise ValueError(f"backend='cuml' runs on a CUDA device, got device={device!r}")
    with cupy.cuda.Device(target.index or 0):
        model = KMeans(
            n_clusters=k,
            max_iter=max_iter,
            tol=tol,
            random_state=seed,
            init="scalable-k-means++",
            n_init=1,
            output_type="numpy",
        )
        model.fit(sample)
        centroids = np.asarray(model.cluster_centers_, dtype=np.float32)
    return KMeansModel(
        centroids=centroids,
        n_iter=int(model.n_iter_),
        inertia=float(model.inertia_),
        backend="cuml",
        n_fit_rows=len(sample),
    )


def _fit_torch(
    sample: np.ndarray, k: int, max_iter: int, tol: float, seed: int, device: torch.device
) -> KMeansModel:
    x = _tensor(sample, device)
    gen = torch.Generator().manual_seed(seed)
    lloyd = _Lloyd(x, k)
    with _one_cpu_thread(device):
        centroids = _kmeans_plus_plus(x, k, gen)
    inertia = lloyd.assign_all(centroids)
    n_iter, changed = 0, -1
    prev_inertia = math.inf
    moved_little = False
    # Each pass: stop tests on the inertia of (labels, centroids), then one
    # Lloyd update and re-assignment. No label change means a fixed point.
    while not (n_iter == max_iter or moved_little or changed == 0):
        if tol > 0 and prev_inertia - inertia < tol * prev_inertia:
            break
        new = lloyd.update()
        shift = (new - centroids).norm(dim=1)
        moved_little = tol > 0 and float((shift * shift).sum()) < tol
        changed = lloyd.reassign(new, shift)
        centroids, prev_inertia, inertia = new, inertia, lloyd.inertia()
        n_iter += 1
    return KMeansModel(
        centroids=centroids.cpu().numpy(),
        n_iter=n_iter,
        inertia=inertia,
        backend="torch",
        n_fit_rows=len(sample),
    )


@contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[None]:
    """Run k-means++ seeding single-threaded on the CPU. Its k sequential
    steps are each a chain of ~10 small ops; with several threads each op is
    a parallel region whose hand-off costs about as much as its work, and on
    a shared host a descheduled thread stalls every region for a time slice
    (measured: 24x slower seeding with 2 threads than with 1 on a busy 2-core
    machine). torch's thread count is process-wide, so the lock keeps
    concurrent fits from restoring each other's setting; other torch work in
    the process runs single-threaded meanwhile."""
    if device.type != "cpu":
        yield
        return
    with _THREADS_LOCK:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _kmeans_plus_plus(x: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Greedy k-means++ seeding: each step draws several candidates with
    probability proportional to squared distance and keeps the one that
    lowers the potential most. It runs on a seeded pool of at most
    ``_INIT_ROWS_PER_CLUSTER * k`` rows, projected onto the pool's top
    ``_SEED_DIMS`` principal components: every one of the k sequential steps
    streams the whole pool, and the projection keeps the directions that
    separate clusters while cutting that traffic (and so seeding time) ~6x
    for d=384. Seeds are pool rows in full dimension. Random draws come from
    the CPU generator, so the sequence is the same on every device."""
    n, d = x.shape
    m = min(n, _INIT_ROWS_PER_CLUSTER * k)
    pool = x[torch.randperm(n, generator=gen)[:m].to(x.device)] if m < n else x
    if d > _SEED_DIMS:
        centred = pool - pool.mean(0)
        _, axes = torch.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
        seeding = pool @ axes[:, -_SEED_DIMS:]
    else:
        seeding = pool
    seeding_sq = (seeding * seeding).sum(1)
    trials = 2 + int(math.log(k))

    def sq_dist(idx: torch.Tensor) -> torch.Tensor:
        """(len(idx), m) squared distances from pool rows ``idx`` to the pool."""
        dist = torch.addmm(seeding_sq[None, :], seeding[idx], seeding.T, beta=1, alpha=-2)
        return dist.add_(seeding_sq[idx, None]).clamp_(min=0)

    chosen = torch.empty(k, dtype=torch.long, device=x.device)
    chosen[0] = torch.randint(m, (1,), generator=gen).item()
    uniforms = torch.rand(k, trials, generator=gen, dtype=torch.float64).to(x.device)
    closest = sq_dist(chosen[:1])[0]
    for c in range(1, k):
        cum = closest.cumsum(0, dtype=torch.float64)
        cand = torch.searchsorted(cum, uniforms[c] * cum[-1], right=True).clamp_(max=m - 1)
        after = torch.minimum(closest[None, :], sq_dist(cand))
        best = after.sum(1, dtype=torch.float64).argmin()
        chosen[c] = cand[best]
        closest = after[best]
    return pool[chosen].clone()


class _Lloyd:
    """Lloyd iterations with Hamerly's bounds, so late iterations skip most
    of the (rows x k) distance products while giving Lloyd's own labels.

    Per row it keeps ``upper``, the exact distance to its centroid, and
    ``lower``, a lower bound on the distance to every other centroid. When a
    centroid moves by ``s``, the distance to it changes by at most ``s``
    (triangle inequality), so after an update ``lower`` drops by the largest
    move among the other centroids; a row whose exact ``upper`` is still
    <= ``lower`` keeps its label without comparing it to all k centroids.
    Only the other rows go through the blocked matrix product. Buffers are
    reused, so a pass allocates nothing proportional to n.
    """

    def __init__(self, x: torch.Tensor, k: int) -> None:
        n, d = x.shape
        self.x, self.k = x, k
        self.x_sq = (x * x).sum(1)
        block = _GPU_BLOCK_ELEMS if x.device.type == "cuda" else _CPU_BLOCK_ELEMS
        self.rows = max(1, min(n, block // max(k, d)))
        self.scratch = torch.empty(self.rows * max(k, d), device=x.device)
        self.labels = torch.empty(n, dtype=torch.long, device=x.device)
        self.upper = torch.empty(n, device=x.device)
        self.lower = torch.full((n,), math.inf, device=x.device)
        self.sums = torch.empty(k, d, device=x.device)

    def assign_all(self, centroids: torch.Tensor) -> float:
        """Nearest centroid of every row; returns the inertia."""
        self._nearest(centroids, None)
        return self.inertia()

    def inertia(self) -> float:
        return float((self.upper.double() ** 2).sum())

    def update(self) -> torch.Tensor:
        """Means of the current clusters; an empty cluster takes the row
        farthest from its centroid (the worst-served row), so the choice is
        deterministic and lowers the inertia."""
        self.sums.zero_().index_add_(0, self.labels, self.x)
        counts = torch.bincount(self.labels, minlength=self.k)
        new = self.sums / counts.clamp(min=1)[:, None].to(self.sums.dtype)
        empty = torch.nonzero(counts == 0).flatten()
        if empty.numel():
            new[empty] = self.x[torch.topk(self.upper, empty.numel()).indices]
        return new

    def reassign(self, centroids: torch.Tensor, shift: torch.Tensor) -> int:
        """Labels for moved ``centroids``; returns how many rows changed."""
        if self.k > 1:
            top = torch.topk(shift, 2)
            # The largest move among the *other* centroids of each row.
            others = torch.where(self.labels == top.indices[0], top.values[1], top.values[0])
            self.lower.sub_(others)
        self._own_distance(centroids)
        stale = torch.nonzero(self.upper > self.lower).flatten()
        before = self.labels[stale]
        self._nearest(centroids, stale)
        return int((self.labels[stale] != before).sum())

    def _own_distance(self, centroids: torch.Tensor) -> None:
        """Exact distance of every row to its own (moved) centroid, blocked.
        The direct difference avoids the cancellation of ||x||^2 - 2x.c + ||c||^2."""
        n, d = self.x.shape
        rows = len(self.scratch) // d
        for start in range(0, n, rows):
            part = slice(start, min(start + rows, n))
            labels = self.labels[part]
            gathered = self.scratch[: len(labels) * d].view(len(labels), d)
            torch.index_select(centroids, 0, labels, out=gathered)
            self.upper[part] = torch.linalg.vector_norm(gathered.sub_(self.x[part]), dim=1)

    def _nearest(self, centroids: torch.Tensor, rows: torch.Tensor | None) -> None:
        """Nearest and second-nearest centroid of ``rows`` (all when None)."""
        cent_sq = (centroids * centroids).sum(1)
        total = len(self.x) if rows is None else len(rows)
        for start in range(0, total, self.rows):
            stop = min(start + self.rows, total)
            part = slice(start, stop) if rows is None else rows[start:stop]
            block = self.scratch[: (stop - start) * self.k].view(stop - start, self.k)
            partial, labels = _two_nearest(self.x[part], centroids, cent_sq, out=block)
            dist = partial.add_(self.x_sq[part, None]).clamp_(min=0).sqrt_()
            self.labels[part] = labels[:, 0]
            self.upper[part] = dist[:, 0]
            if self.k > 1:
                self.lower[part] = dist[:, 1]
