"""The cuML backend of :mod:`beam_curator.dedup.semantic.kmeans`:
``cuml.cluster.KMeans`` on one NVIDIA GPU, with the initialisation settings
of :class:`~beam_curator.dedup.semantic.kmeans_seeding.InitOptions` (cuML's
own names; k-means|| by default). cupy and cuml are imported on call, so this module loads on hosts
without them; :func:`beam_curator.dedup.semantic.kmeans.fit_kmeans` only calls
it once it has found both and a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from beam_curator.dedup.semantic.device import resolve_device
from beam_curator.dedup.semantic.kmeans_seeding import InitOptions


def fit_cuml(
    sample: np.ndarray, k: int, max_iter: int, tol: float, seed: int, device: str | torch.device | None,
    init: InitOptions = InitOptions(),
) -> tuple[np.ndarray, int, float]:
    """Centroids, number of centroid updates and inertia of a seeded fit to
    ``sample`` on a CUDA ``device`` (default: the first GPU)."""
    import cupy
    from cuml.cluster import KMeans

    target = resolve_device(device if device is not None else "cuda")
    if target.type != "cuda":
        raise ValueError(f"backend='cuml' runs on a CUDA device, got device={device!r}")
    with cupy.cuda.Device(target.index or 0):
        model = KMeans(
            n_clusters=k,
            max_iter=max_iter,
            tol=tol,
            random_state=seed,
            init=init.init,  # cuML takes the same names ("k-means||", "k-means++", "random") and arrays
            n_init=init.starts(),
            oversampling_factor=init.oversampling_factor,
            max_samples_per_batch=init.max_samples_per_batch or 1 << 15,
            output_type="numpy",
        )
        model.fit(sample)
        centroids = np.asarray(model.cluster_centers_, dtype=np.float32)
    return centroids, int(model.n_iter_), float(model.inertia_)
