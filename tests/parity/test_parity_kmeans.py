"""The facts NeMo Curator's k-means tests assert: four tight ``make_blobs``
clusters (normalised, in 20 files, with a metadata column) are recovered
(adjusted Rand index > 0.99, > 0.95 fitting on half the data with
``fit_data_fraction=0.5``), every row is labelled, the output keeps the
metadata column with int64 ids and float32 distances, in one partition per
cluster, and the centroids are saved. NeMo uses 10,000 points per cluster
in 1,024 dimensions on a GPU; 1,000 per cluster keep this test quick on a CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from beam_curator.dedup.semantic.kmeans import InitOptions, fit_kmeans
from beam_curator.dedup.semantic.kmeans_torch import _RESTART_SEED_STEP
from beam_curator.workflows import SemanticDeduplicationWorkflow

CLUSTERS, PER_CLUSTER, DIMS = 4, 1000, 1024


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> tuple[Path, np.ndarray]:
    points, truth = make_blobs(n_samples=CLUSTERS * PER_CLUSTER, centers=CLUSTERS, n_features=DIMS,
                               random_state=42, cluster_std=0.5)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    folder = tmp_path_factory.mktemp("blobs") / "input"
    folder.mkdir()
    rng = np.random.default_rng(42)
    for number, rows in enumerate(np.array_split(np.arange(len(points)), 20)):
        pd.DataFrame({"id": rows, "embeddings": points[rows].tolist(), "random_col": rng.integers(0, 100, len(rows))}
                     ).to_parquet(folder / f"data_part_{number:02d}.parquet", index=False)
    return folder, truth


def clustered(folder: Path, output: Path, **settings: object) -> pd.DataFrame:
    SemanticDeduplicationWorkflow(
        input_path=str(folder), output_path=str(output), n_clusters=CLUSTERS, id_field="id",
        embedding_field="embeddings", metadata_fields=["random_col"], embedding_dim=DIMS, random_state=42,
        eps=0.01, **settings,
    ).run()
    return pd.read_parquet(output / "kmeans_results" / "embs_by_nearest_center").sort_values("id")


@pytest.mark.parametrize(("fraction", "least_ari"), [(None, 0.99), (0.5, 0.95)])
def test_blobs_are_recovered_and_every_row_labelled(blobs, tmp_path, fraction, least_ari):
    folder, truth = blobs
    frame = clustered(folder, tmp_path, fit_data_fraction=fraction)
    assert frame["id"].tolist() == list(range(len(truth)))
    assert adjusted_rand_score(truth, frame["nearest_cent"].astype(int)) > least_ari
    centroids = np.load(tmp_path / "kmeans_results" / "kmeans_centroids.npy")
    assert centroids.shape == (CLUSTERS, DIMS)


def test_output_columns_types_and_partitions(blobs, tmp_path):
    frame = clustered(blobs[0], tmp_path)
    assert {"id", "embeddings", "random_col", "nearest_cent", "l2_dist_to_cent", "cosine_dist_to_cent"} <= set(frame.columns)
    assert frame["id"].dtype == np.int64
    assert frame["l2_dist_to_cent"].dtype == np.float32 and frame["cosine_dist_to_cent"].dtype == np.float32
    folders = list((tmp_path / "kmeans_results" / "embs_by_nearest_center").glob("nearest_cent=*"))
    assert len(folders) == CLUSTERS


def test_wrong_embedding_dim_is_refused(blobs, tmp_path):
    with pytest.raises(ValueError, match="embedding_dim=512"):
        SemanticDeduplicationWorkflow(str(blobs[0]), str(tmp_path), n_clusters=CLUSTERS, embedding_dim=512).run()


def test_n_init_keeps_the_lowest_inertia_and_init_choices_work():
    points, _ = make_blobs(n_samples=[100, 200, 300, 400, 500], centers=None, n_features=3, random_state=42)
    unit = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)
    # Restart r of seed s is seeded with s + r * _RESTART_SEED_STEP: n_init=5 is the best of those five runs.
    single = [fit_kmeans(unit, 5, seed=r * _RESTART_SEED_STEP, backend="torch", init=InitOptions("random")).inertia
              for r in range(5)]
    several = fit_kmeans(unit, 5, seed=0, backend="torch", init=InitOptions("random", n_init=5))
    assert several.inertia == min(single) and max(single) > min(single)
    given = fit_kmeans(unit, 5, backend="torch", max_iter=0, init=InitOptions(unit[:5]))
    np.testing.assert_array_equal(given.centroids, unit[:5])
    with pytest.raises(ValueError, match="init must be one of"):
        InitOptions("kmeans++")
