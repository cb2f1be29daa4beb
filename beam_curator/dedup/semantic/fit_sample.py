"""Which documents k-means is fitted on, decided by each document's id alone.

The sample is every document whose seeded ``uniform_by_id`` draw falls
below one fraction: the share of the documents whose float32 vectors fill
the memory budget (at most NeMo Curator's ``fit_data_fraction``). A draw
that depends on nothing but the id and the seed is the same whatever files,
partitions, bundles or order the documents come in, so the semantic
workflow and the ``SemanticDedup`` transform fit on the same documents and,
fitting them in id order, find the same centroids.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from beam_curator.dedup.semantic.ranking import uniform_by_id


def fit_fraction(total_rows: int, dims: int, max_sample_bytes: int, fit_data_fraction: float | None) -> float:
    """The share of ``total_rows`` documents of ``dims`` dimensions drawn for the fit."""
    return min(1.0, max_sample_bytes / (max(total_rows, 1) * max(dims, 1) * 4), fit_data_fraction or 1.0)


def drawn_for_fit(ids: Sequence, fraction: float, seed: int) -> np.ndarray:
    """Whether each document is in the sample (a boolean array). The draw is
    salted, so that it is independent of the seeded ``random`` ranking."""
    if fraction >= 1.0:
        return np.ones(len(ids), dtype=bool)
    salted = int.from_bytes(hashlib.sha256(f"kmeans-sample|{seed}".encode()).digest()[:8], "little")
    return uniform_by_id(ids, salted) < fraction
