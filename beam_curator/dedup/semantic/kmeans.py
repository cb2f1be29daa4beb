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

Backends share one results contract: seeded; cuML's initialisations
(k-means|| by default, as NeMo Curator, see :mod:`.kmeans_seeding`) and
``n_init`` restarts keeping the lowest inertia; ``n_iter`` counts centroid updates; ``inertia`` is that of
the returned centroids over the fitted rows; the same meaning of ``tol``.

* ``"cuml"`` (:mod:`.kmeans_cuml`): ``cuml.cluster.KMeans`` with
  ``init="scalable-k-means++"`` (the parallel k-means|| variant) on an NVIDIA
  GPU.
* ``"torch"`` (:mod:`.kmeans_torch`): k-means|| seeding on a subsample, then
  Lloyd iterations as blocked matrix products with Hamerly's bounds (same
  labels as plain Lloyd, far fewer products once clusters settle), on CUDA
  when available, else on the CPU.

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

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from beam_curator.dedup.semantic.device import resolve_device
from beam_curator.dedup.semantic.kmeans_cuml import fit_cuml
from beam_curator.dedup.semantic.kmeans_seeding import InitOptions
from beam_curator.dedup.semantic.kmeans_torch import as_tensor, fit_torch, two_nearest

Backend = Literal["auto", "cuml", "torch"]

_EPS = 1e-12
__all__ = ["Assignment", "InitOptions", "KMeansModel", "assign", "fit_kmeans"]


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
    init: InitOptions = InitOptions(),
) -> KMeansModel:
    """Fit ``n_clusters`` centroids to the rows of ``x`` (n, d).

    ``x`` may be a ``np.memmap``: with ``max_sample_bytes`` only the sampled
    rows are read. The sample is at most ``max_sample_bytes`` of float32 rows,
    drawn uniformly without replacement with ``seed``. ``backend="auto"``
    picks cuML when it is installed and a CUDA GPU is visible, else torch.
    ``device`` (e.g. ``"cuda:1"``, ``"cpu"``) defaults to the first GPU when
    there is one. ``init`` is how fits start and how many are made
    (:class:`~beam_curator.dedup.semantic.kmeans_seeding.InitOptions`).
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
    fit = fit_cuml if chosen == "cuml" else fit_torch
    centroids, n_iter, inertia = fit(sample, int(n_clusters), max_iter, tol, seed, device, init)
    return KMeansModel(centroids, n_iter, inertia, backend=chosen, n_fit_rows=len(sample))


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
    about ``chunk_rows * len(centroids) * 4`` bytes besides the outputs,
    with chunks cut to at most 2**24 distances (64 MiB) when there are many
    centroids.
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
    dev = resolve_device(device)
    cent = as_tensor(centroids, dev)
    k = cent.shape[0]
    chunk_rows = min(chunk_rows, max(1, (1 << 24) // k))
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
        rows = as_tensor(x[start:stop], dev)
        rows_sq = (rows * rows).sum(1)
        partial, labels = two_nearest(rows, cent, cent_sq)
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


def _check_matrix(a: np.ndarray, name: str) -> None:
    if not isinstance(a, np.ndarray) or a.ndim != 2 or 0 in a.shape:
        shape = getattr(a, "shape", type(a).__name__)
        raise ValueError(f"{name} must be a non-empty 2-D numpy array (rows x dims), got {shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} must hold floating-point embeddings, got dtype {a.dtype}")


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
