"""Comparisons across k-means cluster boundaries, which plain SemDeDup never makes.

Plain SemDeDup compares documents only within their nearest cluster, so two
near-duplicates on either side of a boundary both survive. Here each document
also *visits* its second-nearest cluster (optionally only when it lies within
``margin`` of that boundary), and each cluster's members are compared with its
visitors under the same global order as the within-cluster pass: a visitor is
scored against members ranked before it, a member against visitors ranked
before it. A pair is thus compared when either document visits the other's
cluster. The resulting partial score rows are merged with the within-cluster
rows by :func:`combine_scores`, which keeps each document's best match.

Because every comparison respects the global order, the combined result only
adds removals that brute force over the whole collection would also make.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.pairwise import (
    ID,
    MAX_ID,
    MAX_RANK_KEY,
    SCORE,
    earlier_max_similarity,
    score_rows,
)
from beam_curator.dedup.semantic.ranking import as_id_array, is_descending, order_by_keys


def visited_clusters(
    second_cluster: np.ndarray,
    nearest_dist: np.ndarray,
    second_dist: np.ndarray,
    margin: float | None = None,
) -> np.ndarray:
    """The cluster each document visits (its second-nearest), or -1 for none.

    With ``margin``, only documents whose second centroid is at most ``margin``
    farther than their nearest one visit: those far from any boundary cannot have
    a near-duplicate across it, and skipping them saves most of the work.
    """
    second = np.asarray(second_cluster, dtype=np.int64)
    if margin is None:
        return second.copy()
    if margin < 0:
        raise ValueError(f"margin must be >= 0 (or None for every document), got {margin}")
    gap = np.asarray(second_dist, dtype=np.float64) - np.asarray(nearest_dist, dtype=np.float64)
    if gap.shape != second.shape:
        raise ValueError(f"got {len(gap)} distance pairs for {len(second)} documents")
    return np.where(gap <= margin, second, -1)


def cross_cluster_scores(
    member_ids: Sequence,
    member_embeddings: np.ndarray,
    member_keys: np.ndarray,
    visitor_ids: Sequence,
    visitor_embeddings: np.ndarray,
    visitor_keys: np.ndarray,
    which_to_keep: str,
    batch_size: int,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """Partial score rows for one cluster from comparing its visitors with its members.

    Keys are each document's global rank key (``ranking.rank_keys``, from the
    distance to its *own* nearest centroid). Rows are emitted only for documents
    that had something ranked before them on the other side: visitors first, then
    members, each in rank order.
    """
    m_ids, v_ids = as_id_array(member_ids), as_id_array(visitor_ids)
    m_keys = np.asarray(member_keys, dtype=np.float64)
    v_keys = np.asarray(visitor_keys, dtype=np.float64)
    m_unit = l2_normalize(member_embeddings, m_ids)
    v_unit = l2_normalize(visitor_embeddings, v_ids)
    if len(m_ids) == 0 or len(v_ids) == 0:
        return score_rows(m_ids[:0], m_ids[:0], np.empty(0, np.float32), np.empty(0))
    order = order_by_keys(np.concatenate([m_ids, v_ids]), np.concatenate([m_keys, v_keys]), which_to_keep)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    m_order = order[order < len(m_ids)]
    v_order = order[order >= len(m_ids)] - len(m_ids)
    found = earlier_max_similarity(
        v_unit[v_order],
        m_unit[m_order],
        rank[len(m_ids) + v_order],
        rank[m_order],
        batch_size,
        device,
        symmetric=True,
    )
    visitors = _matched_rows(v_ids[v_order], found.query_score, found.query_index, m_ids[m_order], m_keys[m_order])
    members = _matched_rows(m_ids[m_order], found.key_score, found.key_index, v_ids[v_order], v_keys[v_order])
    return pd.concat([visitors, members], ignore_index=True)


def combine_scores(parts: Iterable[pd.DataFrame], which_to_keep: str) -> pd.DataFrame:
    """One row per id: its highest score over all partial rows.

    Equal scores go to the earlier-ranked ``max_id``, as within a cluster (the
    rule :func:`~beam_curator.dedup.semantic.ranking.best_match` applies to one
    document's matches). Rows
    come out in the order their ids first appear, so within-cluster rows passed
    first keep their rank order.
    """
    descending = is_descending(which_to_keep)
    rows = pd.concat(list(parts), ignore_index=True)
    first_seen = pd.factorize(rows[ID])[0]
    best_first = rows.assign(_first_seen=first_seen).sort_values(
        [SCORE, MAX_RANK_KEY, MAX_ID], ascending=[False, not descending, not descending], kind="stable"
    )
    best = best_first.drop_duplicates(ID, keep="first").sort_values("_first_seen", kind="stable")
    return best.drop(columns="_first_seen").reset_index(drop=True)


def _matched_rows(
    ids: np.ndarray, scores: np.ndarray, index: np.ndarray, other_ids: np.ndarray, other_keys: np.ndarray
) -> pd.DataFrame:
    matched = index >= 0
    hit = index[matched]
    return score_rows(ids[matched], other_ids[hit], scores[matched], other_keys[hit])
