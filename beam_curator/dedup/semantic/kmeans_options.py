"""How a k-means fit starts, checked without torch.

The options live apart from the seeding kernels (:mod:`.kmeans_seeding`),
which import torch, so that a workflow refuses bad settings as it is built
and a rerun that fits nothing never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

Init = Union[str, np.ndarray]
INIT_METHODS = ("k-means||", "k-means++", "random")


@dataclass(frozen=True)
class InitOptions:
    """How a fit starts: ``init`` (see :mod:`.kmeans_seeding`), ``n_init`` runs (or
    ``"auto"``: 1, or 10 for ``"random"``, as scikit-learn and cuML), the
    k-means|| ``oversampling_factor``, and ``max_samples_per_batch``, the
    most rows whose distances to all centroids are computed at once (caps
    the fit's working memory; None: only the backend's own block budget)."""

    init: Init = "k-means||"
    n_init: int | str = 1
    oversampling_factor: float = 2.0
    max_samples_per_batch: int | None = 1 << 15

    def __post_init__(self) -> None:
        if isinstance(self.init, str) and self.init not in INIT_METHODS:
            raise ValueError(f"kmeans init must be one of {', '.join(INIT_METHODS)} or an array of centroids, got {self.init!r}")
        if self.n_init != "auto" and (isinstance(self.n_init, bool) or not isinstance(self.n_init, int) or self.n_init < 1):
            raise ValueError(f"kmeans n_init must be a positive integer or 'auto', got {self.n_init!r}")
        if not self.oversampling_factor > 0:
            raise ValueError(f"kmeans oversampling_factor must be > 0, got {self.oversampling_factor!r}")
        if self.max_samples_per_batch is not None and self.max_samples_per_batch < 1:
            raise ValueError(f"kmeans max_samples_per_batch must be >= 1, got {self.max_samples_per_batch!r}")

    def starts(self) -> int:
        """Runs to make: an array of centroids is one start, whatever ``n_init`` says."""
        if not isinstance(self.init, str):
            return 1
        if self.n_init == "auto":
            return 10 if self.init == "random" else 1
        return int(self.n_init)
