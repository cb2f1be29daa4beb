"""The torch backend of :mod:`beam_curator.dedup.semantic.kmeans`.

Seeding (:mod:`.kmeans_seeding`: k-means||, greedy k-means++ or random),
then Lloyd iterations as blocked matrix products with Hamerly's bounds,
restarted ``n_init`` times if asked. It runs on any torch device, so
the same code fits on a CUDA GPU and on a CPU-only worker; the shared helpers
(:func:`as_tensor`, :func:`two_nearest`) also serve the assignment step.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from beam_curator.dedup.semantic.device import resolve_device
from beam_curator.dedup.semantic.kmeans_seeding import InitOptions, initial_centroids

# Restart r of an n_init fit is seeded with seed + r * this step, so that
# restarts of one seed do not repeat the first runs of a nearby seed.
_RESTART_SEED_STEP = 1_000_003
# Elements of the (rows x k) distance block computed at once during the fit.
# On the CPU every block op is a parallel region, and on a shared host a
# descheduled thread stalls each one for a time slice: 2**22 (16 MiB, still
# within L3) instead of 2**20 cut a 2-thread fit on a busy 2-core machine from
# 5.9 s to 1.8 s, with no change single-threaded. A GPU wants bigger blocks.
_CPU_BLOCK_ELEMS = 1 << 22
_GPU_BLOCK_ELEMS = 1 << 26
_THREADS_LOCK = threading.Lock()


def as_tensor(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """float32 tensor on ``device``, sharing ``a``'s memory when it can
    (torch cannot share a read-only buffer such as a memmap opened "r")."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return (torch.from_numpy(a) if a.flags.writeable else torch.tensor(a)).to(device)


def two_nearest(
    rows: torch.Tensor, centroids: torch.Tensor, cent_sq: torch.Tensor, out: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``||c||^2 - 2 x.c`` and index of the nearest and second-nearest
    centroid (one column when there is one centroid). ``||x||^2`` is the same
    for every centroid, so the ranking needs one matrix product; ``out`` is a
    reusable (rows x k) buffer."""
    block = torch.addmm(cent_sq, rows, centroids.T, beta=1, alpha=-2, out=out)
    top = torch.topk(block, min(2, len(centroids)), dim=1, largest=False, sorted=True)
    return top.values, top.indices


def fit_torch(
    sample: np.ndarray, k: int, max_iter: int, tol: float, seed: int, device: str | torch.device | None,
    init: InitOptions = InitOptions(),
) -> tuple[np.ndarray, int, float]:
    """Centroids, number of centroid updates and inertia of a seeded fit to
    ``sample`` on ``device`` (default: CUDA when available, else the CPU).
    With ``init.n_init`` > 1 the fit is restarted from new seeds and the run
    with the lowest inertia is kept (the first on ties)."""
    dev = resolve_device(device)
    x = as_tensor(sample, dev)
    best: tuple[np.ndarray, int, float] | None = None
    for start in range(init.starts()):
        gen = torch.Generator().manual_seed(seed + start * _RESTART_SEED_STEP)
        lloyd = _Lloyd(x, k, init.max_samples_per_batch)
        with _one_cpu_thread(dev):
            centroids = initial_centroids(x, k, gen, init)
        run = _lloyd_iterations(lloyd, centroids, max_iter, tol)
        if best is None or run[2] < best[2]:
            best = run
    assert best is not None
    return best


def _lloyd_iterations(lloyd: _Lloyd, centroids: torch.Tensor, max_iter: int, tol: float) -> tuple[np.ndarray, int, float]:
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
    return centroids.cpu().numpy(), n_iter, inertia


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

    def __init__(self, x: torch.Tensor, k: int, max_rows: int | None = None) -> None:
        n, d = x.shape
        self.x, self.k = x, k
        self.x_sq = (x * x).sum(1)
        block = _GPU_BLOCK_ELEMS if x.device.type == "cuda" else _CPU_BLOCK_ELEMS
        self.rows = max(1, min(n, block // max(k, d), max_rows or n))
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
            partial, labels = two_nearest(self.x[part], centroids, cent_sq, out=block)
            dist = partial.add_(self.x_sq[part, None]).clamp_(min=0).sqrt_()
            self.labels[part] = labels[:, 0]
            self.upper[part] = dist[:, 0]
            if self.k > 1:
                self.lower[part] = dist[:, 1]
