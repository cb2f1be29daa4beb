"""Brute-force reference and the recall of the clustered search, measured on samples.

Clustering makes SemDeDup affordable by comparing only documents that share a
cluster (plus, in cross-cluster mode, visitors); the price is near-duplicate
pairs that are never compared. On a sample small enough to compare all pairs in
float64, this module counts those pairs and the documents they leave in place,
so the choice of cluster count, eps and margin can be judged with numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.pairwise import ID, MAX_ID, SCORE
from beam_curator.dedup.semantic.ranking import as_id_array

_BLOCK_ROWS = 1024


@dataclass
class MissedPair:
    """A near-duplicate pair the clustered search never compared."""

    id_a: Any
    id_b: Any
    cosine_similarity: float


@dataclass
class EpsRecall:
    """How the clustered search fares at one eps (duplicates: similarity >= 1 - eps)."""

    eps: float
    similar_pairs: int
    compared_pairs: int
    missed_pairs: int
    recall: float
    removed_by_brute_force: int
    removed_by_clustered: int
    kept_but_brute_force_removes: int
    missed_examples: list[MissedPair] = field(default_factory=list)


@dataclass
class RecallReport:
    sample_size: int
    cross_cluster: bool
    per_eps: list[EpsRecall]

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, ready for ``json.dump``."""
        return asdict(self)


def brute_force_scores(ids: Sequence, embeddings: np.ndarray, order: np.ndarray) -> pd.DataFrame:
    """Exact float64 SemDeDup over all documents at once, in ``order`` (positions,
    as from ``ranking.order_documents``): the reference the kernels must match.
    Holds the full similarity matrix, so it is meant for tests and samples."""
    id_array = as_id_array(ids)
    ranked_ids = id_array[np.asarray(order, dtype=np.int64)]
    unit = l2_normalize(embeddings, id_array).astype(np.float64)[order]
    n = len(ranked_ids)
    sim = unit @ unit.T
    positions = np.arange(n)
    sim[positions[:, None] <= positions[None, :]] = -np.inf
    index = sim.argmax(axis=1) if n else np.empty(0, dtype=np.int64)
    scores = np.clip(sim[positions, index], 0.0, 1.0)  # the kernels' range (pairwise.clip_scores)
    if n:
        index[0], scores[0] = 0, 0.0
    return pd.DataFrame({ID: ranked_ids, MAX_ID: ranked_ids[index], SCORE: scores})


def recall_report(
    ids: Sequence,
    embeddings: np.ndarray,
    order: np.ndarray,
    clusters: np.ndarray,
    eps_values: Sequence[float],
    visited: np.ndarray | None = None,
    max_examples: int = 5,
) -> RecallReport:
    """Recall of the clustered search against brute force on a sample.

    ``order`` gives the sample's positions in global order, ``clusters`` each
    document's nearest cluster and, for cross-cluster mode, ``visited`` the
    cluster it visits or -1 (``cross_cluster.visited_clusters``). A pair counts as
    compared when both share a cluster or one visits the other's cluster. Removals
    are those the two searches would make on the sample itself: the later-ranked
    document of each pair at or above 1 - eps.
    """
    if not eps_values:
        raise ValueError("eps_values must name at least one eps")
    id_array = as_id_array(ids)
    unit = l2_normalize(embeddings, id_array).astype(np.float64)
    cluster = np.asarray(clusters, dtype=np.int64)
    visit = np.full(len(id_array), -1, dtype=np.int64) if visited is None else np.asarray(visited, dtype=np.int64)
    if cluster.shape != id_array.shape or visit.shape != id_array.shape:
        raise ValueError(f"clusters and visited need one entry per document ({len(id_array)})")
    if (cluster < 0).any():
        raise ValueError("cluster ids must be >= 0; -1 means 'visits no cluster'")
    rank = np.empty(len(id_array), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(id_array))
    first, second, sim = _similar_pairs(unit, 1.0 - max(eps_values))
    compared = (
        (cluster[first] == cluster[second]) | (visit[first] == cluster[second]) | (visit[second] == cluster[first])
    )
    later = np.where(rank[first] > rank[second], first, second)
    per_eps = []
    for eps in eps_values:
        similar = sim >= 1.0 - eps
        missed = similar & ~compared
        brute_removed = np.unique(later[similar])
        clustered_removed = np.unique(later[similar & compared])
        worst = np.flatnonzero(missed)[np.argsort(-sim[missed], kind="stable")][:max_examples]
        per_eps.append(
            EpsRecall(
                eps=float(eps),
                similar_pairs=int(similar.sum()),
                compared_pairs=int((similar & compared).sum()),
                missed_pairs=int(missed.sum()),
                recall=float((similar & compared).sum() / similar.sum()) if similar.any() else 1.0,
                removed_by_brute_force=len(brute_removed),
                removed_by_clustered=len(clustered_removed),
                kept_but_brute_force_removes=len(np.setdiff1d(brute_removed, clustered_removed)),
                missed_examples=[
                    MissedPair(id_array[first[p]].item(), id_array[second[p]].item(), float(sim[p])) for p in worst
                ],
            )
        )
    return RecallReport(sample_size=len(id_array), cross_cluster=visited is not None, per_eps=per_eps)


def _similar_pairs(unit: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs (i < j) with similarity >= threshold, computed in row blocks."""
    firsts, seconds, sims = [], [], []
    columns = np.arange(len(unit))
    for start in range(0, len(unit), _BLOCK_ROWS):
        block = unit[start : start + _BLOCK_ROWS] @ unit.T
        rows = np.arange(start, start + len(block))
        i, j = np.nonzero((block >= threshold) & (columns[None, :] > rows[:, None]))
        firsts.append(rows[i])
        seconds.append(j)
        sims.append(block[i, j])
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return np.concatenate(firsts), np.concatenate(seconds), np.concatenate(sims)
