"""The two kernels of the verify cascade: candidate pairs from a cheap model,
then the full model's judgement of each pair.

A cheap (screening) model's vectors cluster the documents and, within each
cluster, name every pair at least ``1 - screening_eps`` similar, the later-
ranked document first. Every such pair is kept, not only each document's best
earlier match: the screening model's best match may be one the full model
rejects while its second is one the full model accepts. Only the documents in
these pairs are embedded with the full model; :func:`verified_scores` then
gives each later-ranked document its best full-model similarity among its
candidate pairs, in the score rows identification reads. A document removed
at ``eps`` is then at least ``1 - eps`` similar to an earlier-ranked document
by the full model: the cascade removes nothing the full model would keep.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from beam_curator.dedup.semantic.pairwise import ID, MAX_ID, SCORE, clip_scores, rank_order_in_clusters
from beam_curator.dedup.semantic.ranking import as_id_array

EARLIER_ID, SCREENING_SCORE = "earlier_id", "screening_score"
"""Candidate-pair columns beside ``id`` (the later-ranked document of the pair);
``workflows.semantic.cascade`` names them too, without importing torch."""

# Similarities one block holds (64 MiB of float32), and pairs judged per step (their vectors: ~100 MiB at 384-d).
_BLOCK_ELEMENTS = 1 << 24
_PAIRS_PER_STEP = 1 << 16


def candidate_pairs(
    ids: Sequence, unit: np.ndarray, keys: np.ndarray, starts: Sequence[int], which_to_keep: str, threshold: float,
) -> pd.DataFrame:
    """Every pair of one cluster with a dot product of at least ``threshold``,
    for clusters laid out one after another (cluster ``i`` is rows
    ``starts[i]`` up to ``starts[i + 1]`` of ``ids``, ``unit`` (unit rows) and
    ``keys``, its rank keys): ``id`` ranked after ``earlier_id``, and their
    ``screening_score``. A cluster's rows go through in blocks against the
    rows ranked up to them, so memory stays within one block."""
    id_array = as_id_array(ids)
    bounds = np.append(np.asarray(starts, dtype=np.int64), len(id_array))
    order = rank_order_in_clusters(id_array, np.asarray(keys, dtype=np.float64), bounds, which_to_keep)
    later, earlier, scores = [], [], []
    for low, high in zip(bounds[:-1], bounds[1:]):
        ranked = order[low:high]
        rows = np.ascontiguousarray(unit[ranked], dtype=np.float32)
        step = max(1, _BLOCK_ELEMENTS // max(len(rows), 1))
        for r0 in range(1, len(rows), step):
            r1 = min(r0 + step, len(rows))
            sim = rows[r0:r1] @ rows[:r1].T
            sim[np.arange(r1 - r0)[:, None] + r0 <= np.arange(r1)[None, :]] = -np.inf  # keep earlier-ranked only
            row, column = np.nonzero(sim >= threshold)
            later.append(ranked[row + r0])
            earlier.append(ranked[column])
            scores.append(sim[row, column])
    if not later:
        return pd.DataFrame({ID: id_array[:0], EARLIER_ID: id_array[:0], SCREENING_SCORE: np.empty(0, np.float32)})
    return pd.DataFrame({
        ID: id_array[np.concatenate(later)], EARLIER_ID: id_array[np.concatenate(earlier)],
        SCREENING_SCORE: clip_scores(np.concatenate(scores).astype(np.float32)),
    })


def verified_scores(later: np.ndarray, earlier: np.ndarray, ids: np.ndarray, unit: np.ndarray) -> pd.DataFrame:
    """For each document that is the later-ranked side of a candidate pair
    (``later[i]`` after ``earlier[i]``), its highest full-model similarity
    among its pairs and the document it is reached with: score rows (``id``,
    ``max_id``, ``cosine_sim_score``) as the within-cluster pass writes them.
    ``ids`` and ``unit`` are the full model's documents and unit vectors;
    a pair naming a document without one is an error."""
    position = pd.Index(as_id_array(ids)).get_indexer
    a, b = position(as_id_array(later)), position(as_id_array(earlier))
    missing = np.flatnonzero((a < 0) | (b < 0))
    if missing.size:
        pair = missing[0]
        raise ValueError(
            f"{missing.size} candidate pair(s) name a document without a full-model vector, e.g. "
            f"({later[pair]!r}, {earlier[pair]!r}); the verification embeddings are incomplete: rerun to embed them"
        )
    score = np.empty(len(a), dtype=np.float32)
    for first in range(0, len(a), _PAIRS_PER_STEP):
        chosen = slice(first, first + _PAIRS_PER_STEP)
        score[chosen] = np.einsum("ij,ij->i", unit[a[chosen]], unit[b[chosen]])
    frame = pd.DataFrame({ID: later, MAX_ID: earlier, SCORE: clip_scores(score)})
    best = frame.sort_values(SCORE, ascending=False, kind="stable").drop_duplicates(ID)
    return best.sort_values(ID, kind="stable", ignore_index=True)
