"""Within-cluster SemDeDup kernels: normalisation, the global order, the blocked
max-similarity pass, and its agreement with the float64 brute-force reference."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from beam_curator.dedup.semantic import pairwise
from beam_curator.dedup.semantic.normalize import InvalidEmbeddingError, l2_normalize
from beam_curator.dedup.semantic.pairwise import identify_duplicates, max_similarity_to_earlier, semdedup_cluster
from beam_curator.dedup.semantic.ranking import order_documents, rank_keys
from beam_curator.dedup.semantic.recall import brute_force_scores

# Four unit vectors with easily checked cosines:
# cos(10,11)=.6  cos(10,12)=.8  cos(10,13)=0  cos(11,12)=.96  cos(11,13)=.8  cos(12,13)=.6
IDS = np.array([10, 11, 12, 13])
VECTORS = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
COSINE_DIST = np.array([0.1, 0.4, 0.3, 0.2])
L2_DIST = np.array([0.5, 0.2, 0.1, 0.4])

# (which_to_keep, distance_metric) -> rows (id, max_id, score) in rank order, worked out by hand.
EXPECTED = {
    ("hard", "cosine"): [(11, 11, 0.0), (12, 11, 0.96), (13, 11, 0.8), (10, 12, 0.8)],
    ("easy", "cosine"): [(10, 10, 0.0), (13, 10, 0.0), (12, 10, 0.8), (11, 12, 0.96)],
    ("hard", "l2"): [(10, 10, 0.0), (13, 10, 0.0), (11, 13, 0.8), (12, 11, 0.96)],
    ("easy", "l2"): [(12, 12, 0.0), (11, 12, 0.96), (13, 11, 0.8), (10, 12, 0.8)],
}


def rows(frame) -> list[tuple]:
    return list(zip(frame["id"].tolist(), frame["max_id"].tolist(), frame["cosine_sim_score"].tolist()))


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(("which", "metric"), sorted(EXPECTED))
def test_hand_checked_cluster(which, metric, batch_size):
    got = rows(semdedup_cluster(IDS, VECTORS, COSINE_DIST, L2_DIST, which, metric, batch_size, seed=0, device="cpu"))
    expected = EXPECTED[(which, metric)]
    assert [r[:2] for r in got] == [r[:2] for r in expected]
    assert [r[2] for r in got] == pytest.approx([r[2] for r in expected], abs=1e-6)


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_random_mode_scores_against_everything_ranked_before(metric, batch_size):
    frame = semdedup_cluster(IDS, VECTORS, COSINE_DIST, L2_DIST, "random", metric, batch_size, seed=7, device="cpu")
    order = order_documents(IDS, COSINE_DIST, L2_DIST, "random", metric, seed=7)
    cosines = VECTORS.astype(np.float64) @ VECTORS.T.astype(np.float64)
    ranked = order.tolist()
    for k, (doc, max_doc, score) in enumerate(rows(frame)):
        assert doc == IDS[ranked[k]]
        if k == 0:
            assert (max_doc, score) == (doc, 0.0)
            continue
        earlier = ranked[:k]
        best = max(earlier, key=lambda j: (cosines[ranked[k], j], -earlier.index(j)))
        assert max_doc == IDS[best]
        assert score == pytest.approx(cosines[ranked[k], best], abs=1e-6)


def test_random_order_ignores_distances_and_depends_on_seed():
    orders = {seed: tuple(order_documents(np.arange(50), None, None, "random", "cosine", seed)) for seed in range(4)}
    assert len(set(orders.values())) == 4
    same_seed = order_documents(np.arange(50), np.random.rand(50), np.random.rand(50), "random", "l2", 2)
    assert tuple(same_seed) == orders[2]


@settings(max_examples=60, deadline=None)
@given(
    which=st.sampled_from(["hard", "easy", "random"]),
    string_ids=st.booleans(),
    seed=st.integers(0, 2**40),
    data=st.data(),
)
def test_order_of_a_subset_is_the_restriction_of_the_global_order(which, string_ids, seed, data):
    n = data.draw(st.integers(1, 40))
    raw_ids = data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n, unique=True))
    ids = np.array([f"doc-{i}" for i in raw_ids]) if string_ids else np.array(raw_ids)
    dist = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5]), min_size=n, max_size=n)))
    subset = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    whole = order_documents(ids, dist, dist, which, "cosine", seed)
    part = order_documents(ids[subset], dist[subset], dist[subset], which, "cosine", seed)
    restricted = [ids[p] for p in whole if p in set(subset.tolist())]
    assert [ids[subset][p] for p in part] == restricted


def test_hard_and_easy_break_distance_ties_by_id_in_the_same_direction():
    ids = np.array(["b", "c", "a", "d"])
    dist = np.array([0.5, 0.5, 0.5, 0.1])
    assert ids[order_documents(ids, dist, None, "hard", "cosine", 0)].tolist() == ["c", "b", "a", "d"]
    assert ids[order_documents(ids, dist, None, "easy", "cosine", 0)].tolist() == ["d", "a", "b", "c"]


@pytest.mark.parametrize("batch_size", [1, 2, 3])
@pytest.mark.parametrize(
    ("ids", "which", "expected"),
    [
        ([3, 1, 2], "hard", [(3, 3), (2, 3), (1, 3)]),
        ([3, 1, 2], "easy", [(1, 1), (2, 1), (3, 1)]),
        (["y", "x", "z"], "hard", [("z", "z"), ("y", "z"), ("x", "z")]),
    ],
)
def test_identical_vectors_with_equal_distances_match_the_first_ranked(ids, which, expected, batch_size):
    vectors = np.tile(np.array([[0.3, -0.2, 0.9]], dtype=np.float32), (3, 1))
    dist = np.full(3, 0.25)
    frame = semdedup_cluster(ids, vectors, dist, dist, which, "l2", batch_size, seed=0, device="cpu")
    assert [r[:2] for r in rows(frame)] == expected
    assert identify_duplicates(frame["cosine_sim_score"], eps=1e-6).tolist() == [False, True, True]


def test_single_document_cluster_is_kept():
    frame = semdedup_cluster(["only"], np.ones((1, 5)), [0.2], [0.3], "hard", "cosine", 4, seed=0, device="cpu")
    assert rows(frame) == [("only", "only", 0.0)]


def test_empty_cluster_gives_no_rows():
    frame = semdedup_cluster([], np.empty((0, 5)), [], [], "easy", "cosine", 4, seed=0, device="cpu")
    assert len(frame) == 0 and list(frame.columns)[:3] == ["id", "max_id", "cosine_sim_score"]


def test_identify_duplicates_threshold_is_inclusive():
    scores = np.array([0.0, 0.89, 0.9, 0.95, 1.0])
    assert identify_duplicates(scores, eps=0.1).tolist() == [False, False, True, True, True]
    with pytest.raises(ValueError, match="eps"):
        identify_duplicates(scores, eps=1.5)


def clustered_dataset(seed: int, n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Random vectors, some of them noisy copies of others at varied distances."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, dim))
    copies = rng.integers(0, n, size=n // 2)
    noise = rng.choice([0.0, 0.01, 0.05, 0.2], size=(n // 2, 1))
    base[n - n // 2 :] = base[copies] + noise * rng.normal(size=(n // 2, dim))
    return base.astype(np.float32), rng.permutation(n) * 3 + 1


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 60),
    dim=st.integers(2, 16),
    batch_size=st.integers(1, 70),
    which=st.sampled_from(["hard", "easy", "random"]),
    metric=st.sampled_from(["cosine", "l2"]),
    syrk=st.booleans(),
)
def test_kernel_finds_the_same_duplicates_as_float64_brute_force(seed, n, dim, batch_size, which, metric, syrk):
    vectors, ids = clustered_dataset(seed, n, dim)
    dist = np.round(np.random.default_rng(seed).random(n), 1)  # rounded: many ties
    # On a CPU clusters this small are one syrk; without it they take the blocked scan a GPU takes.
    with mock.patch.object(pairwise, "_SYRK_DEVICES", pairwise._SYRK_DEVICES if syrk else ()):
        frame = semdedup_cluster(ids, vectors, dist, dist, which, metric, batch_size, seed, device="cpu")
    reference = brute_force_scores(ids, vectors, order_documents(ids, dist, dist, which, metric, seed))
    assert frame["id"].tolist() == reference["id"].tolist()
    assert np.allclose(frame["cosine_sim_score"], reference["cosine_sim_score"], atol=1e-5)
    epsilons = np.array([0.0001, 0.001, 0.01, 0.1])
    # float32 and float64 may legitimately disagree on a score within rounding of a threshold.
    assume(np.abs(reference["cosine_sim_score"].to_numpy()[:, None] - (1 - epsilons)).min() > 1e-5)
    for eps in epsilons:
        assert (
            identify_duplicates(frame["cosine_sim_score"], eps).tolist()
            == identify_duplicates(reference["cosine_sim_score"], eps).tolist()
        )


@pytest.mark.parametrize(
    "settings, clusters, batch_size",
    [
        # A tiny block budget forces many column chunks per row block, the path a giant cluster takes.
        ({"_BLOCK_ELEMENTS": 64}, 3, 8),
        # Row blocks that meet the diagonal go in tiles; a tiny tile exercises that path at test sizes.
        ({"_CPU_DIAGONAL_TILE": 3, "_BLOCK_ELEMENTS": 64}, 5, 32),
        # Without syrk (as on a GPU) a one-block cluster goes through the scan.
        ({"_SYRK_DEVICES": ()}, 7, 256),
    ],
)
def test_blocking_paths_match_brute_force(monkeypatch, settings, clusters, batch_size):
    for name, value in settings.items():
        monkeypatch.setattr(pairwise, name, value)
    vectors, _ = clustered_dataset(clusters, 200, 8)
    unit = l2_normalize(vectors, range(200))
    scores, index = max_similarity_to_earlier(unit, batch_size=batch_size, device="cpu")
    reference = brute_force_scores(np.arange(200), unit, np.arange(200))
    assert np.allclose(scores, reference["cosine_sim_score"], atol=1e-5)
    assert (index == reference["max_id"].to_numpy()).mean() > 0.95  # float32 vs float64 near-ties may differ


@pytest.mark.parametrize("bad", [np.zeros(3), np.array([np.nan, 1.0, 0.0]), np.array([np.inf, 0.0, 0.0])])
def test_degenerate_embedding_is_named_in_the_error(bad):
    vectors = np.array([[1.0, 0.0, 0.0], bad, [0.0, 1.0, 0.0]])
    with pytest.raises(InvalidEmbeddingError, match=r"'doc-b'.*drop them"):
        l2_normalize(vectors, ["doc-a", "doc-b", "doc-c"])
    with pytest.raises(ValueError, match="doc-b"):
        semdedup_cluster(["doc-a", "doc-b", "doc-c"], vectors, np.zeros(3), None, "hard", "cosine", 2, 0, "cpu")


def test_l2_normalize_returns_unit_float32_rows():
    unit = l2_normalize(np.array([[3.0, 4.0], [0.0, -2.0]]), [1, 2])
    assert unit.dtype == np.float32
    assert unit.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, -1.0]]


@pytest.mark.parametrize("scale", [1.0, 1e-30, 1e25])
def test_l2_normalize_float32_rows_of_any_scale(scale):
    # Squares of 1e-30 underflow and of 1e25 overflow in float32: such rows must
    # still be normalised exactly, not rejected.
    rows = (np.array([[3.0, 4.0], [1.0, -1.0]]) * scale).astype(np.float32)
    unit = l2_normalize(rows, [1, 2])
    assert unit.dtype == np.float32
    assert np.allclose(unit, [[0.6, 0.8], [2**-0.5, -(2**-0.5)]], rtol=1e-6)


def test_bad_ranking_inputs_are_explained():
    with pytest.raises(ValueError, match=r"\[7\].*NaN/inf cosine_dist"):
        rank_keys([5, 7], np.array([0.1, np.nan]), None, "hard", "cosine", 0)
    with pytest.raises(ValueError, match="needs l2_dist"):
        rank_keys([5, 7], np.zeros(2), None, "easy", "l2", 0)
    with pytest.raises(ValueError, match=r"\[5\] appear more than once"):
        order_documents([5, 7, 5], None, None, "random", "cosine", 0)
    with pytest.raises(ValueError, match="all integers or all strings"):
        order_documents([5, "7"], None, None, "random", "cosine", 0)
    with pytest.raises(ValueError, match="which_to_keep must be one of"):
        order_documents([5, 7], np.zeros(2), None, "hardest", "cosine", 0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.integers(0, 90), min_size=1, max_size=12),
    which=st.sampled_from(["hard", "easy"]),
    copies=st.integers(0, 5),
)
def test_many_clusters_at_once_score_as_each_cluster_alone(seed, sizes, which, copies):
    """Clusters scored together (small ones padded into one batched matmul,
    larger ones alone) give each cluster exactly the rows it gets on its own:
    same order, same max_id, scores equal to float32 rounding, with exact
    copies (ties) among them."""
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    assume(total > 0)
    vectors = rng.normal(size=(total, 12)).astype(np.float32)
    for _ in range(copies if total > 1 else 0):
        a, b = rng.integers(total, size=2)
        vectors[a] = vectors[b]
    ids = rng.permutation(10 * total)[:total]
    keys = rng.random(total)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    together = pairwise.semdedup_clusters(ids, l2_normalize(vectors, ids), keys, starts, which, 16)
    alone = [
        pairwise.semdedup_cluster_by_keys(ids[a : a + n], vectors[a : a + n], keys[a : a + n], which, 16)
        for a, n in zip(starts, sizes) if n
    ]
    expected = pd.concat(alone, ignore_index=True)
    assert together["id"].tolist() == expected["id"].tolist()
    assert together["max_id"].tolist() == expected["max_id"].tolist()
    np.testing.assert_allclose(together["cosine_sim_score"], expected["cosine_sim_score"], atol=1e-5)
