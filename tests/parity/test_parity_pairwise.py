"""The facts NeMo Curator's pairwise tests assert, on our kernel and our
cluster stage: six unit vectors (three of them identical), their best
earlier match under every batch size, the order, ``max_id`` and scores for
hard/easy with cosine/l2 ranking, metadata and random rankings, a
one-document cluster, and scores within [0, 1]."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from beam_curator.dedup.semantic.pairwise import earlier_max_similarity, max_similarity_to_earlier
from beam_curator.dedup.semantic.ranking import RankingStrategy
from beam_curator.workflows.semantic.grouping import ClusterRangeTask
from beam_curator.workflows.semantic.pairwise_phase import (
    ClusterPairwiseStage,
    ClusterScoresWriter,
    PairwiseSettings,
)

RAW = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12], [1, 2, 3], [1, 2, 3]], dtype=np.float32)
UNIT = RAW / np.linalg.norm(RAW, axis=1, keepdims=True)
SCORES = [0.0, 0.974631, 0.998190, 0.999618, 1.0, 1.0]
BEST_EARLIER = [0, 0, 1, 2, 0, 0]


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 5, 6])
def test_best_earlier_match_of_each_row(batch_size):
    scores, index = max_similarity_to_earlier(UNIT, batch_size)
    np.testing.assert_allclose(scores, SCORES, rtol=1e-6, atol=1e-6)
    assert index.tolist() == BEST_EARLIER


@pytest.mark.parametrize("batch_size", [100, 512, 1024, 2048])
def test_batch_size_does_not_change_random_results(batch_size):
    rows = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    rank = np.arange(1024)
    reference = earlier_max_similarity(rows, rows, rank, rank, 1024)
    found = earlier_max_similarity(rows, rows, rank, rank, batch_size)
    np.testing.assert_allclose(found.query_score, reference.query_score, rtol=1e-5, atol=1e-5)
    assert found.query_index.tolist() == reference.query_index.tolist()


def write_cluster(by_center: Path, frame: pd.DataFrame, cluster: int = 0) -> None:
    """A cluster folder as the k-means phase leaves it, in two files as NeMo's test has."""
    folder = by_center / f"nearest_cent={cluster}"
    folder.mkdir(parents=True)
    frame.iloc[:3].to_parquet(folder / "a.parquet", index=False)
    frame.iloc[3:].to_parquet(folder / "b.parquet", index=False)


@pytest.fixture()
def six_documents(tmp_path) -> Path:
    centroid = UNIT[0]
    frame = pd.DataFrame({
        "id": range(6), "embeddings": list(UNIT),
        "l2_dist_to_cent": np.linalg.norm(UNIT - centroid, axis=1),
        "cosine_dist_to_cent": 1 - UNIT @ centroid,
        "custom_score": [0.1, 0.8, 0.3, 0.9, 0.2, 0.15], "priority": [3, 1, 2, 1, 3, 2],
    })
    write_cluster(tmp_path / "by_center", frame)
    return tmp_path / "by_center"


def scored(by_center: Path, cluster: int = 0, **settings: object) -> pd.DataFrame:
    """Scores of one cluster, as the pairwise phase's two stages leave them: in ``cluster_<k>.parquet``."""
    stage = ClusterPairwiseStage(str(by_center), None, PairwiseSettings("id", **settings))
    scores = stage.process(ClusterRangeTask(data=(cluster, cluster + 1)))
    assert scores._metadata["clusters"] == [(cluster, 0, scores.num_items)]
    written = ClusterScoresWriter(str(by_center.parent / "pairwise")).process(scores)
    assert written.data == [str(by_center.parent / "pairwise" / f"cluster_{cluster}.parquet")]
    return pd.read_parquet(written.data[0])


EXPECTED = {
    "hard": ([3, 2, 1, 5, 4, 0], [3, 3, 2, 1, 5, 5], [0.0, 0.99961, 0.99819, 0.974631, 1.0, 1.0]),
    "easy": ([0, 4, 5, 1, 2, 3], [0, 0, 0, 0, 1, 2], [0.0, 1.0, 1.0, 0.97464, 0.99819, 0.999618]),
}


@pytest.mark.parametrize("metric", ["cosine", "l2"])
@pytest.mark.parametrize("which", ["hard", "easy"])
def test_order_max_ids_and_scores_of_distance_rankings(six_documents, which, metric):
    frame = scored(six_documents, which_to_keep=which, distance_metric=metric)
    assert set(frame.columns) == {"id", "max_id", "cosine_sim_score"}
    ids, max_ids, scores = EXPECTED[which]
    assert frame["id"].tolist() == ids and frame["max_id"].tolist() == max_ids
    np.testing.assert_allclose(frame["cosine_sim_score"], scores, rtol=1e-5, atol=1e-5)
    assert frame["cosine_sim_score"].between(0.0, 1.0).all()


@pytest.mark.parametrize(("columns", "ascending", "order"), [
    (["custom_score"], False, [3, 1, 2, 4, 5, 0]),
    (["priority", "custom_score"], [True, False], [3, 1, 2, 5, 4, 0]),
])
def test_metadata_ranking_orders_the_cluster(six_documents, columns, ascending, order):
    frame = scored(six_documents, ranking=RankingStrategy.metadata_based(columns, ascending))
    assert frame["id"].tolist() == order
    assert set(frame["max_id"]) <= set(range(6)) and frame["cosine_sim_score"].between(0.0, 1.0).all()


def test_random_ranking_keeps_every_document(six_documents):
    frame = scored(six_documents, ranking=RankingStrategy.random(random_seed=42))
    assert sorted(frame["id"]) == list(range(6)) and frame["cosine_sim_score"].between(0.0, 1.0).all()


def test_ranking_by_a_missing_column_names_it(six_documents):
    with pytest.raises(KeyError, match="rank_col"):
        scored(six_documents, ranking=RankingStrategy.metadata_based(["rank_col"]))


def test_a_one_document_cluster_scores_zero(tmp_path):
    folder = tmp_path / "by_center" / "nearest_cent=0"
    folder.mkdir(parents=True)
    pd.DataFrame({"id": [1], "embeddings": [[0.1, 0.2, 0.3]], "l2_dist_to_cent": [0.0],
                  "cosine_dist_to_cent": [0.0]}).to_parquet(folder / "a.parquet", index=False)
    frame = scored(tmp_path / "by_center", which_to_keep="random")
    assert frame["id"].tolist() == [1] and frame["cosine_sim_score"].tolist() == [0.0]
