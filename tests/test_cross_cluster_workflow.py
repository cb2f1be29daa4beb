"""Cross-cluster SemDeDup through the whole workflow, k-means included.

Two well-separated groups of documents make k-means put its boundary midway
between them; near-duplicate pairs placed on that boundary, one copy a hair
towards each group, are split into different clusters. Plain SemDeDup never
compares them; the cross-cluster pass does, and the recall report measures
the difference against brute force.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import duplicate_ids, straddling_vectors, write_embeddings  # noqa: E402

from beam_curator.workflows import SemanticDeduplicationWorkflow  # noqa: E402

PAIRS = 6
GROUP = 300
DIM = 40
EPS = 0.01


def straddling_embeddings(folder: Path) -> Path:
    ids, vectors = straddling_vectors(PAIRS, GROUP, DIM)
    return write_embeddings(folder, ids, vectors, files=3)


def run(embeddings: Path, base: Path, cross_cluster: bool) -> dict:
    return SemanticDeduplicationWorkflow(
        str(embeddings), str(base / "output"), str(base / "cache"), n_clusters=2, eps=EPS,
        cross_cluster=cross_cluster, recall_sample=10_000, runner="local",
    ).run().metadata


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("cross")
    embeddings = straddling_embeddings(base / "embeddings")
    return {mode: (run(embeddings, base / mode, mode == "cross"), base / mode) for mode in ("plain", "cross")}


def pair_members(removed: set[str]) -> list[set[str]]:
    return [removed & {f"L{i}", f"R{i}"} for i in range(PAIRS)]


def test_kmeans_put_the_two_copies_of_every_pair_in_different_clusters(runs) -> None:
    _, base = runs["plain"]
    folder = base / "cache" / "kmeans_results" / "embs_by_nearest_center"
    cluster = {
        doc_id: int(part.name.split("=")[1])
        for part in folder.iterdir()
        for doc_id in pd.read_parquet(part, columns=["id"])["id"]
    }
    assert len(cluster) == 2 * GROUP + 2 * PAIRS
    assert all(cluster[f"L{i}"] != cluster[f"R{i}"] for i in range(PAIRS))
    assert len({cluster[f"g{i}"] for i in range(GROUP)}) == 1  # the groups, not the pairs, decided the split


def test_plain_mode_misses_the_straddling_pairs_and_cross_cluster_finds_each_once(runs) -> None:
    plain, cross = (set(duplicate_ids(runs[mode][1] / "output")["id"]) for mode in ("plain", "cross"))
    assert all(not found for found in pair_members(plain))
    assert all(len(found) == 1 for found in pair_members(cross))
    assert cross - plain == set().union(*pair_members(cross)), "the cross pass removed something else"
    assert (runs["cross"][1] / "cache" / "kmeans_results" / "embs_by_second_center").is_dir()


def test_recall_report_shows_cross_cluster_recall_at_least_plain_at_every_eps(runs) -> None:
    metadata, base = runs["cross"]
    report = json.loads((base / "output" / "recall" / "recall_report.json").read_text())
    assert metadata["recall"] == report and set(report) == {"plain", "cross_cluster"}
    plain = {row["eps"]: row for row in report["plain"]["per_eps"]}
    cross = {row["eps"]: row for row in report["cross_cluster"]["per_eps"]}
    assert plain.keys() == cross.keys() and EPS in plain
    for eps in plain:
        assert cross[eps]["recall"] >= plain[eps]["recall"], eps
    assert plain[EPS]["recall"] < 1.0 and cross[EPS]["recall"] == 1.0
    assert plain[EPS]["missed_pairs"] >= PAIRS and plain[EPS]["kept_but_brute_force_removes"] == PAIRS
    assert report["plain"]["sample_size"] == 2 * GROUP + 2 * PAIRS

    plain_only = json.loads((runs["plain"][1] / "output" / "recall" / "recall_report.json").read_text())
    assert set(plain_only) == {"plain"}
