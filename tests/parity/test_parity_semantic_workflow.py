"""NeMo Curator's golden semantic-dedup workflow: 1,500 ``make_blobs`` points
(5 blobs of 100..500 points in 3 dimensions, seed 42) in two parquet files,
5 clusters, eps 0.01. NeMo finds 1,471 duplicates keeping ``hard`` documents
(1,495 keeping ``easy``), and its k-means, pairwise and duplicates folders,
the first two directly under the cache path, hold the schemas checked below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest
from sklearn.datasets import make_blobs

from beam_curator.workflows import SemanticDeduplicationWorkflow

GOLDEN = {"hard": 1471, "easy": 1495}


def golden_input(folder: Path) -> Path:
    points, _ = make_blobs(n_samples=[100 * (i + 1) for i in range(5)], centers=None, n_features=3, random_state=42)
    frame = pd.DataFrame({"id": np.arange(len(points)), "embeddings": points.tolist()})
    folder.mkdir(parents=True)
    half = len(frame) // 2
    frame.iloc[:half].to_parquet(folder / "part_0000.parquet", index=False)
    frame.iloc[half:].to_parquet(folder / "part_0001.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    base = tmp_path_factory.mktemp("golden")
    source = golden_input(base / "input")
    found = {}
    for which in GOLDEN:
        output = base / which
        # NeMo's own arguments (output_path only: the cache goes under it).
        result = SemanticDeduplicationWorkflow(
            input_path=str(source), output_path=str(output), n_clusters=5, id_field="id",
            embedding_field="embeddings", distance_metric="cosine", which_to_keep=which, eps=0.01,
            random_state=42, verbose=False,
        ).run()
        assert result.get_metadata("num_duplicates") == result.metadata["num_duplicates"]  # NeMo's accessor
        found[which] = (output, result.metadata)
    return found


@pytest.mark.parametrize("which", sorted(GOLDEN))
def test_duplicate_count_is_nemos_golden_figure(runs, which):
    output, metadata = runs[which]
    assert metadata["num_duplicates"] == GOLDEN[which]
    assert len(pd.read_parquet(output / "duplicates")) == GOLDEN[which]
    for phase in ("total_time", "kmeans_time", "pairwise_time"):
        assert metadata[phase] > 0


def files_under(folder: Path) -> pd.DataFrame:
    """As NeMo's test reads a folder: every parquet file below it, at once."""
    return pd.read_parquet(sorted(str(path) for path in folder.rglob("*.parquet")))


def test_output_schemas_and_row_counts(runs):
    output, metadata = runs["hard"]
    kmeans = files_under(output / "kmeans_results")
    assert set(kmeans.columns) == {"nearest_cent", "id", "embeddings", "l2_dist_to_cent", "cosine_dist_to_cent"}
    assert len(kmeans) == 1500
    pairwise = files_under(output / "pairwise_results")
    assert set(pairwise.columns) == {"id", "max_id", "cosine_sim_score"} and len(pairwise) == 1500
    names = sorted(path.name for path in (output / "pairwise_results").glob("*.parquet"))
    assert names == [f"cluster_{k}.parquet" for k in range(5)]
    duplicates = files_under(output / "duplicates")
    assert set(duplicates.columns) == {"id"} and len(duplicates) == metadata["num_duplicates"]
    assert duplicates["id"].is_monotonic_increasing


def test_results_lie_directly_in_the_cache_path_as_nemos_do(runs):
    """NeMo's workflow used directly writes ``kmeans_results/`` and
    ``pairwise_results/`` straight into ``cache_path`` (by default
    ``output_path``); only its text workflow nests them in ``semantic_dedup/``."""
    output, metadata = runs["hard"]
    for folder in ("kmeans_results", "pairwise_results", "duplicates", "kmeans_sample", "id_check"):
        assert (output / folder).is_dir(), folder
    assert metadata["kmeans_results_path"] == str(output / "kmeans_results")
    assert metadata["pairwise_results_path"] == str(output / "pairwise_results")
    assert not (output / "semantic_dedup").exists()


def test_cluster_folder_reads_as_one_hive_partitioned_dataset(runs):
    folder = runs["hard"][0] / "kmeans_results" / "embs_by_nearest_center"
    frame = pd.read_parquet(folder)
    assert len(frame) == 1500 and sorted(frame["nearest_cent"].astype(int).unique()) == list(range(5))
    table = ds.dataset(folder, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 1500 and "nearest_cent" in table.column_names


def test_scores_stay_within_zero_and_one(runs):
    scores = files_under(runs["hard"][0] / "pairwise_results")["cosine_sim_score"]
    assert scores.between(0.0, 1.0).all() and scores.max() == 1.0
