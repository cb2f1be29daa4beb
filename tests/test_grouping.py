"""Documents reach their cluster folders through per-range files written by
the assignment tasks and a grouping phase over those ranges of clusters: one file per cluster, every document
exactly once under its nearest cluster (and, with the cross-cluster pass,
once more under its second-nearest), and the same duplicates however many
ranges the grouping used."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import duplicate_ids, write_embeddings  # noqa: E402

from beam_curator.workflows import SemanticDeduplicationWorkflow  # noqa: E402
from beam_curator.workflows.semantic import grouping  # noqa: E402

DOCS, CLUSTERS = 1200, 12


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory) -> Path:
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(CLUSTERS, 8))
    vectors = centres[rng.integers(0, CLUSTERS, DOCS)] + 0.3 * rng.normal(size=(DOCS, 8))
    vectors[:100] = vectors[100:200] + 0.01 * rng.normal(size=(100, 8))
    return write_embeddings(tmp_path_factory.mktemp("emb") / "embeddings", list(range(DOCS)), vectors, files=5)


def run(embeddings: Path, base: Path, **settings: object) -> Path:
    SemanticDeduplicationWorkflow(
        str(embeddings), str(base / "output"), str(base / "cache"), n_clusters=CLUSTERS, eps=0.01,
        runner="local", **settings,
    ).run()
    return base / "cache" / "kmeans_results"


def folder_ids(root: Path, key: str = "nearest_cent") -> dict[int, list[int]]:
    """Cluster -> ids of its hive folder ``<key>=<cluster>``, checking that each folder holds one file."""
    found = {}
    for folder in root.glob(f"{key}=*"):
        files = list(folder.glob("*.parquet"))
        assert len(files) == 1, f"{folder} holds {len(files)} files"
        found[int(folder.name.split("=")[1])] = pd.read_parquet(files[0])["id"].tolist()
    return found


@pytest.mark.parametrize("rows_per_range", [1 << 20, 100])
def test_one_file_per_cluster_and_every_document_once(embeddings, tmp_path, monkeypatch, rows_per_range):
    monkeypatch.setattr(grouping, "_ROWS_PER_RANGE", rows_per_range)
    kmeans = run(embeddings, tmp_path, cross_cluster=True)
    members = folder_ids(kmeans / "embs_by_nearest_center")
    assert sorted(i for ids in members.values() for i in ids) == list(range(DOCS))
    visitors = folder_ids(kmeans / "embs_by_second_center", "second_nearest_cent")
    # Without a margin every document visits its second-nearest cluster, never its own.
    assert sorted(i for ids in visitors.values() for i in ids) == list(range(DOCS))
    assert all(not set(ids) & set(members[c]) for c, ids in visitors.items())
    # The per-range files are gone once grouped.
    assert not (kmeans / "members_by_range").exists() and not (kmeans / "visitors_by_range").exists()


def test_duplicates_do_not_depend_on_the_number_of_ranges(embeddings, tmp_path, monkeypatch):
    run(embeddings, tmp_path / "one")
    monkeypatch.setattr(grouping, "_ROWS_PER_RANGE", 50)
    run(embeddings, tmp_path / "many")
    one, many = (set(duplicate_ids(tmp_path / name / "output")["id"]) for name in ("one", "many"))
    assert one == many and len(one) >= 100


@pytest.mark.parametrize(("n_clusters", "n_rows", "expected"), [(10, 5, 1), (10, 5 << 18, 5), (3, 100 << 18, 3), (50_000, 10**9, 1024)])
def test_cluster_ranges_cover_every_cluster_once(n_clusters, n_rows, expected):
    ranges = grouping.cluster_ranges(n_clusters, n_rows)
    assert len(ranges) == expected
    assert [c for low, high in ranges for c in range(low, high)] == list(range(n_clusters))


def test_the_phases_after_embedding_start_three_beam_pipelines(embeddings, tmp_path, monkeypatch):
    """Sampling with the id check, assignment with the grouping (each pair one
    Beam pipeline, the second step waiting for the first), and pairwise."""
    import apache_beam as beam

    started: list[str] = []
    real_run = beam.Pipeline.run

    def run_counted(self, *args, **kwargs):
        started.append("run")
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", run_counted)
    run(embeddings, tmp_path)
    assert len(started) == 3
    assert len(duplicate_ids(tmp_path / "output")) >= 100
