"""Initial centroids for the torch k-means backend, with NeMo Curator's (cuML's) choices.

``init`` names follow cuML's ``KMeans``, which NeMo Curator's semantic
deduplication uses:

* ``"k-means||"`` (the default, as in NeMo Curator): scalable k-means++
  (Bahmani et al. 2012). A few rounds each draw about
  ``oversampling_factor * k`` rows independently with probability
  proportional to their squared distance to the rows drawn so far; each
  candidate is weighted by the rows nearest to it, and the weighted
  candidates are clustered into ``k`` seeds (greedy k-means++ then Lloyd),
  :data:`_RECLUSTER_TRIES` times, keeping the lowest weighted inertia.
  Retrying on the few candidates costs little and avoids the bad local
  optima a single k-means++ draw falls into: on NeMo Curator's golden
  workflow data (1,500 ``make_blobs`` points, 5 clusters) greedy k-means++
  left 9 of 60 seeds at twice the best inertia, k-means|| with one try 4 of
  100, with three tries none of 100.
* ``"k-means++"``: greedy k-means++ (several candidates per step, the one
  lowering the potential most is kept, as scikit-learn does).
* ``"random"``: ``k`` distinct rows drawn uniformly.
* an array of ``k`` initial centroids.

All of them work on a seeded pool of at most ``_INIT_ROWS_PER_CLUSTER * k``
rows, projected onto the pool's top ``_SEED_DIMS`` principal components:
the projection keeps the directions that separate clusters while cutting the
traffic of every sequential step (and so seeding time) ~6x for d=384. Seeds
are returned in full dimension. Random draws come from the CPU generator, so
the sequence is the same on every device.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from beam_curator.dedup.semantic.kmeans_options import InitOptions

# Measured on normalised mixtures of 200-250 gaussians, d=384, k = number of
# modes, 4 seeds: 32 rows per cluster in 64 dimensions gave a converged
# inertia 1-3% *lower* than 32 rows in all 384 dimensions (16 rows: ~2%
# higher), at a third of the seeding time; seeding on all rows costs more
# than the Lloyd iterations.
_INIT_ROWS_PER_CLUSTER = 32
_SEED_DIMS = 64
_PARALLEL_ROUNDS = 5  # oversampling rounds of k-means|| (Bahmani et al. find ~5 enough)
_RECLUSTER_TRIES = 3
_RECLUSTER_ITERS = 20
# Distances computed at once when every row is compared with many points
# (64 MiB of float32): pool x candidates would otherwise be pool size x
# several k, 11 GB at k = 3,000.
_BLOCK_ELEMENTS = 1 << 24


def initial_centroids(x: torch.Tensor, k: int, gen: torch.Generator, options: InitOptions) -> torch.Tensor:
    """``k`` starting centroids for the rows of ``x``."""
    if not isinstance(options.init, str):
        given = np.asarray(options.init, dtype=np.float32)
        if given.shape != (k, x.shape[1]):
            raise ValueError(f"kmeans init array has shape {given.shape}; it must be (n_clusters, dims) = {(k, x.shape[1])}")
        return torch.from_numpy(given.copy()).to(x.device)
    pool, seeding = _pool(x, k, gen)
    if options.init == "random":
        return pool[torch.randperm(len(pool), generator=gen)[:k].to(x.device)].clone()
    if options.init == "k-means++":
        return pool[_greedy_plus_plus(seeding, None, k, gen)].clone()
    return _scalable_plus_plus(pool, seeding, k, gen, options.oversampling_factor)


def _pool(x: torch.Tensor, k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The seeded pool of rows to seed from, and its projection (see the module)."""
    n, d = x.shape
    m = min(n, _INIT_ROWS_PER_CLUSTER * k)
    pool = x[torch.randperm(n, generator=gen)[:m].to(x.device)] if m < n else x
    if d <= _SEED_DIMS:
        return pool, pool
    centred = pool - pool.mean(0)
    _, axes = torch.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    return pool, pool @ axes[:, -_SEED_DIMS:]


def _sq_dist(rows: torch.Tensor, points: torch.Tensor, points_sq: torch.Tensor) -> torch.Tensor:
    """(len(rows), len(points)) squared distances."""
    dist = torch.addmm(points_sq[None, :], rows, points.T, beta=1, alpha=-2)
    return dist.add_((rows * rows).sum(1)[:, None]).clamp_(min=0)


def _nearest(rows: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each row, the squared distance to its nearest point and that point's
    index, a block of rows at a time."""
    points_sq = (points * points).sum(1)
    step = max(1, _BLOCK_ELEMENTS // max(1, len(points)))
    found = [_sq_dist(rows[start : start + step], points, points_sq).min(1) for start in range(0, len(rows), step)]
    return torch.cat([f.values for f in found]), torch.cat([f.indices for f in found])


def _greedy_plus_plus(points: torch.Tensor, weights: torch.Tensor | None, k: int, gen: torch.Generator) -> torch.Tensor:
    """Indices of ``k`` seeds by greedy k-means++ on (optionally weighted)
    ``points``: each step draws ``2 + log k`` candidates with probability
    proportional to weight x squared distance and keeps the one that lowers
    the weighted potential most."""
    m = len(points)
    points_sq = (points * points).sum(1)
    w = torch.ones(m, device=points.device) if weights is None else weights
    trials = 2 + int(math.log(k))
    chosen = torch.empty(k, dtype=torch.long, device=points.device)
    first_cum = w.cumsum(0, dtype=torch.float64)
    first = torch.rand(1, generator=gen, dtype=torch.float64).to(points.device) * first_cum[-1]
    chosen[0] = torch.searchsorted(first_cum, first, right=True).clamp_(max=m - 1)[0]
    uniforms = torch.rand(k, trials, generator=gen, dtype=torch.float64).to(points.device)
    closest = _sq_dist(points[chosen[:1]], points, points_sq)[0]
    for c in range(1, k):
        cum = (closest * w).cumsum(0, dtype=torch.float64)
        cand = torch.searchsorted(cum, uniforms[c] * cum[-1], right=True).clamp_(max=m - 1)
        after = torch.minimum(closest[None, :], _sq_dist(points[cand], points, points_sq))
        best = (after * w).sum(1, dtype=torch.float64).argmin()
        chosen[c] = cand[best]
        closest = after[best]
    return chosen


def _scalable_plus_plus(
    pool: torch.Tensor, seeding: torch.Tensor, k: int, gen: torch.Generator, oversampling_factor: float
) -> torch.Tensor:
    """k-means|| (see the module): oversample candidates, weight them, recluster them."""
    m = len(seeding)
    seeding_sq = (seeding * seeding).sum(1)
    picked = torch.randint(m, (1,), generator=gen).to(seeding.device)
    closest = _sq_dist(seeding[picked], seeding, seeding_sq)[0]
    for _ in range(_PARALLEL_ROUNDS):
        potential = closest.sum(dtype=torch.float64)
        if potential <= 0:
            break
        chance = (oversampling_factor * k * closest.double() / potential).clamp_(max=1)
        drawn = torch.nonzero(torch.rand(m, generator=gen, dtype=torch.float64).to(seeding.device) < chance).flatten()
        if drawn.numel():
            picked = torch.cat([picked, drawn])
            closest = torch.minimum(closest, _nearest(seeding, seeding[drawn])[0])
    picked = torch.unique(picked)
    if len(picked) <= k:  # too few distinct candidates to choose among: greedy k-means++ on the pool
        return pool[_greedy_plus_plus(seeding, None, k, gen)].clone()
    candidates = seeding[picked]
    owner = _nearest(seeding, candidates)[1]
    weights = torch.bincount(owner, minlength=len(picked)).to(seeding.dtype)
    best_labels, best_inertia = None, math.inf
    for _ in range(_RECLUSTER_TRIES):
        labels, inertia = _weighted_lloyd(candidates, weights, _greedy_plus_plus(candidates, weights, k, gen))
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    # Seeds in full dimension: the weighted means of the candidates' full rows.
    full = pool[picked]
    sums = torch.zeros(k, full.shape[1], device=full.device, dtype=full.dtype)
    sums.index_add_(0, best_labels, full * weights[:, None])
    mass = torch.zeros(k, device=full.device, dtype=full.dtype).index_add_(0, best_labels, weights)
    return sums / mass.clamp(min=1e-12)[:, None]


def _weighted_lloyd(points: torch.Tensor, weights: torch.Tensor, seeds: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Labels and weighted inertia after Lloyd iterations on weighted points
    from the points at index ``seeds``; a cluster keeps at least its seed."""
    centroids = points[seeds].clone()
    points_sq = (points * points).sum(1)
    labels = torch.empty(0, dtype=torch.long, device=points.device)
    for _ in range(_RECLUSTER_ITERS):
        new_labels = _nearest(points, centroids)[1]
        new_labels[seeds] = torch.arange(len(seeds), device=points.device)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
        sums = torch.zeros_like(centroids).index_add_(0, labels, points * weights[:, None])
        mass = torch.zeros(len(seeds), device=points.device, dtype=points.dtype).index_add_(0, labels, weights)
        centroids = sums / mass.clamp(min=1e-12)[:, None]
    own = centroids[labels]
    dist = (points_sq - 2 * (points * own).sum(1) + (own * own).sum(1)).clamp_(min=0)
    return labels, float((dist * weights).sum(dtype=torch.float64))
