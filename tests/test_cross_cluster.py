"""Cross-cluster SemDeDup: near-duplicates split by a cluster boundary are found, and
every extra removal is one that brute force under the same global order makes too."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from beam_curator.dedup.semantic.cross_cluster import combine_scores, cross_cluster_scores, visited_clusters
from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.pairwise import identify_duplicates, score_rows, semdedup_cluster_by_keys
from beam_curator.dedup.semantic.ranking import best_match, order_by_keys, rank_keys
from beam_curator.dedup.semantic.recall import brute_force_scores, recall_report


class Clustered:
    """A whole dataset deduplicated the way a pipeline would: each cluster alone
    (members, and in cross mode its visitors too), then the partial rows combined."""

    def __init__(self, ids, vectors, centroids, which, metric, seed, margin=None, batch_size=16):
        self.ids = np.asarray(ids)
        self.unit = l2_normalize(vectors, self.ids)
        centres = l2_normalize(centroids, range(len(centroids)))
        dist = 1.0 - self.unit.astype(np.float64) @ centres.T.astype(np.float64)
        self.nearest, second = np.argsort(dist, axis=1, kind="stable")[:, :2].T
        rows = np.arange(len(self.ids))
        d1, d2 = dist[rows, self.nearest], dist[rows, second]
        l2 = np.linalg.norm(self.unit - centres[self.nearest], axis=1)
        self.which = which
        self.keys = rank_keys(self.ids, d1, l2, which, metric, seed)
        self.visited = visited_clusters(second, d1, d2, margin)
        self.plain_parts = []
        self.cross_parts = []
        for c in range(len(centres)):
            members, visitors = self.nearest == c, self.visited == c
            self.plain_parts.append(
                semdedup_cluster_by_keys(
                    self.ids[members], self.unit[members], self.keys[members], which, batch_size, "cpu"
                )
            )
            self.cross_parts.append(
                cross_cluster_scores(
                    self.ids[members], self.unit[members], self.keys[members],
                    self.ids[visitors], self.unit[visitors], self.keys[visitors],
                    which, batch_size, "cpu",
                )
            )

    def plain(self) -> pd.Series:
        return combine_scores(self.plain_parts, self.which).set_index("id")["cosine_sim_score"]

    def cross(self) -> pd.Series:
        return combine_scores(self.plain_parts + self.cross_parts, self.which).set_index("id")["cosine_sim_score"]

    def brute_force(self) -> pd.Series:
        order = order_by_keys(self.ids, self.keys, self.which)
        return brute_force_scores(self.ids, self.unit, order).set_index("id")["cosine_sim_score"]

    def recall(self, eps_values, cross: bool):
        order = order_by_keys(self.ids, self.keys, self.which)
        visited = self.visited if cross else None
        return recall_report(self.ids, self.unit, order, self.nearest, eps_values, visited)


def removed(scores: pd.Series, eps: float) -> set:
    return set(scores.index[identify_duplicates(scores.to_numpy(), eps)])


def straddling_dataset(pairs: int, seed: int = 0):
    """Background documents around three centroids, plus near-duplicate pairs whose
    two copies sit just on either side of the boundary between centroids 0 and 1."""
    rng = np.random.default_rng(seed)
    dim = 16
    centroids = np.eye(dim)[:3]
    background = np.repeat(centroids, 20, axis=0) + 0.6 * rng.normal(size=(60, dim))
    middle = (centroids[0] + centroids[1]) + 0.3 * rng.normal(size=(pairs, dim)) * (np.arange(dim) >= 3)
    left, right = middle + 0.02 * centroids[0], middle + 0.02 * centroids[1]
    vectors = np.vstack([background, left, right])
    ids = [f"bg{i}" for i in range(60)] + [f"L{i}" for i in range(pairs)] + [f"R{i}" for i in range(pairs)]
    return ids, vectors, centroids


@pytest.mark.parametrize("which", ["hard", "easy", "random"])
def test_duplicates_straddling_a_boundary_are_missed_by_plain_and_found_across(which):
    ids, vectors, centroids = straddling_dataset(pairs=6)
    run = Clustered(ids, vectors, centroids, which, "cosine", seed=3, margin=0.1)
    assert all(run.nearest[60:66] == 0) and all(run.nearest[66:] == 1)
    pair_copies = {f"L{i}" for i in range(6)} | {f"R{i}" for i in range(6)}
    plain, cross = removed(run.plain(), 0.01), removed(run.cross(), 0.01)
    assert not plain & pair_copies
    assert len(cross & pair_copies) == 6
    assert all(len(cross & {f"L{i}", f"R{i}"}) == 1 for i in range(6))
    assert cross == removed(run.brute_force(), 0.01)

    plain_recall = run.recall([0.01], cross=False).per_eps[0]
    cross_recall = run.recall([0.01], cross=True).per_eps[0]
    assert plain_recall.missed_pairs >= 6 and plain_recall.recall < 1.0
    assert plain_recall.kept_but_brute_force_removes >= 6
    assert {frozenset((p.id_a, p.id_b)) for p in plain_recall.missed_examples} <= {
        frozenset((f"L{i}", f"R{i}")) for i in range(6)
    }
    assert cross_recall.recall == 1.0 and cross_recall.kept_but_brute_force_removes == 0


def test_recall_report_is_json_ready_and_covers_every_eps():
    ids, vectors, centroids = straddling_dataset(pairs=3)
    report = Clustered(ids, vectors, centroids, "easy", "l2", seed=0).recall([0.001, 0.01, 0.5], cross=False)
    loaded = json.loads(json.dumps(report.to_dict()))
    assert [e["eps"] for e in loaded["per_eps"]] == [0.001, 0.01, 0.5]
    similar = [e["similar_pairs"] for e in loaded["per_eps"]]
    assert similar == sorted(similar) and similar[-1] > similar[0]
    assert loaded["sample_size"] == 66 and loaded["cross_cluster"] is False
    assert isinstance(loaded["per_eps"][1]["missed_examples"][0]["id_a"], str)


def clustered_random_dataset(seed: int, n: int, dim: int, k: int):
    """Points scattered around random centroids, a third of them noisy copies of others."""
    rng = np.random.default_rng(seed)
    centroids = rng.normal(size=(k, dim))
    points = centroids[rng.integers(0, k, size=n)] + rng.normal(size=(n, dim))
    copied = rng.integers(0, n, size=n // 3)
    points[: n // 3] = points[copied] + rng.choice([0.02, 0.1, 0.3], size=(n // 3, 1)) * rng.normal(size=(n // 3, dim))
    return rng.permutation(n), points, centroids


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 80),
    dim=st.integers(2, 8),
    k=st.integers(2, 5),
    which=st.sampled_from(["hard", "easy", "random"]),
    metric=st.sampled_from(["cosine", "l2"]),
    margin=st.sampled_from([None, 0.0, 0.05, 0.5]),
    batch_size=st.integers(1, 20),
)
def test_cross_removes_at_least_plain_and_never_more_than_brute_force(
    seed, n, dim, k, which, metric, margin, batch_size
):
    ids, points, centroids = clustered_random_dataset(seed, n, dim, k)
    run = Clustered(ids, points, centroids, which, metric, seed, margin, batch_size)
    plain, cross, brute = run.plain(), run.cross(), run.brute_force()
    assert sorted(cross.index) == sorted(ids)
    cross, plain = cross[brute.index], plain[brute.index]
    assert (cross >= plain).all()
    # A cluster's first document scores 0 by convention, whatever its true best match.
    assert (cross <= np.maximum(brute, 0.0) + 1e-5).all()
    epsilons = np.array([0.001, 0.01, 0.05, 0.2])
    assume(np.abs(np.concatenate([cross, brute])[:, None] - (1 - epsilons)).min() > 1e-5)
    for eps in epsilons:
        assert removed(plain, eps) <= removed(cross, eps) <= removed(brute, eps)


@pytest.mark.parametrize(("visitor_key", "scored", "matched"), [(0.1, "y", "x"), (0.9, "x", "y")])
def test_a_pair_is_compared_when_only_one_side_visits(visitor_key, scored, matched):
    # x belongs to another cluster and visits this one; y and z are members.
    x = np.array([[1.0, 0.1, 0.0]])
    members = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    part = cross_cluster_scores(["y", "z"], members, [0.5, 0.2], ["x"], x, [visitor_key], "easy", 4, "cpu")
    by_id = part.set_index("id")
    assert by_id.loc[scored, "max_id"] == matched
    assert by_id.loc[scored, "cosine_sim_score"] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6)
    # z meets x only if x is ranked before it (key 0.1 < 0.2), and then with similarity 0.
    assert ("z" in by_id.index) == (visitor_key < 0.2)


def test_visitor_that_is_also_a_member_is_rejected():
    vectors = np.eye(3)[:2]
    with pytest.raises(ValueError, match=r"\[2\] appear more than once"):
        cross_cluster_scores([1, 2], vectors, [0.1, 0.2], [2], vectors[:1], [0.2], "hard", 4, "cpu")


def test_visited_clusters_honours_the_margin():
    second, d1, d2 = np.array([4, 5, 6]), np.array([0.1, 0.1, 0.3]), np.array([0.15, 0.4, 0.3])
    assert visited_clusters(second, d1, d2).tolist() == [4, 5, 6]
    assert visited_clusters(second, d1, d2, margin=0.1).tolist() == [4, -1, 6]
    assert visited_clusters(second, d1, d2, margin=0.0).tolist() == [-1, -1, 6]


@pytest.mark.parametrize(("which", "expected"), [("hard", [7, 8, 9]), ("easy", [6, 8, 4]), ("random", [6, 8, 4])])
def test_combine_keeps_the_best_score_and_breaks_ties_by_earlier_match(which, expected):
    def part(ids, max_ids, scores, max_keys):
        return score_rows(np.array(ids), np.array(max_ids), np.array(scores, np.float32), np.array(max_keys))

    parts = [
        part([1, 2, 3], [6, 8, 3], [0.9, 0.7, 0.0], [0.3, 0.5, 0.0]),
        part([1, 2], [7, 5], [0.9, 0.6], [0.7, 0.5]),
        part([3, 3], [9, 4], [0.8, 0.8], [0.4, 0.4]),
    ]
    combined = combine_scores(parts, which)
    assert combined["id"].tolist() == [1, 2, 3]
    # Ties: id 1 at 0.9 (keys 0.3 vs 0.7), id 3 at 0.8 (equal keys; ids 9 vs 4 decide).
    assert combined["max_id"].tolist() == expected
    assert combined["cosine_sim_score"].tolist() == pytest.approx([0.9, 0.7, 0.8])


@settings(max_examples=200, deadline=None)
@given(which=st.sampled_from(["hard", "easy", "random"]),
       matches=st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.5, 0.75, 1.0]), st.integers(10, 16),
                                  st.sampled_from([0.25, 0.5])), min_size=1, max_size=12))
# Found by CI: a match kept from the second half had to be the one the whole list would keep.
@example(which="easy", matches=[(1, 0.5, 10, 0.5), (1, 0.5, 11, 0.5), (1, 0.5, 11, 0.25)])
def test_a_combine_of_one_documents_matches_keeps_the_match_combine_scores_keeps(which, matches):
    """The transform merges each document's matches in a combine, in any grouping; the workflow merges score
    rows in tables. Few distinct scores and keys, so that ties decide."""
    rows = combine_scores([score_rows(np.array([m[0] for m in matches]), np.array([m[2] for m in matches]),
                                      np.array([m[1] for m in matches], np.float32),
                                      np.array([m[3] for m in matches]))], which).set_index("id")
    for document in {m[0] for m in matches}:
        own = [(score, max_id, key) for doc, score, max_id, key in matches if doc == document]
        # A combine may merge partial results again: the answer must not depend on the grouping.
        halves = [best_match(own[:1], which), *([best_match(own[1:], which)] if own[1:] else [])]
        for found in (best_match(own, which), best_match(halves, which)):
            assert (found[0], found[1]) == (rows.loc[document, "cosine_sim_score"], rows.loc[document, "max_id"])
