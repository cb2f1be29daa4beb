"""The facts NeMo Curator's duplicate-identification tests assert: a
document is a duplicate when its score reaches 1 - eps; the ids come out
sorted, in ``max(1, n // hint)``-row row groups (hint 10 by default)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from beam_curator.workflows.semantic.identification import identify


def identified(tmp_path: Path, clusters: list[dict], eps: float, row_groups: int | None = None) -> Path:
    scores = tmp_path / "pairwise"
    scores.mkdir()
    for number, data in enumerate(clusters):
        pd.DataFrame(data).to_parquet(scores / f"cluster_{number}.parquet", index=False)
    identify(str(scores), eps, "hard", str(tmp_path / "duplicates"), str(tmp_path / "pairs"), row_groups)
    return tmp_path / "duplicates" / "duplicates.parquet"


def row_groups(path: Path) -> int:
    return pq.ParquetFile(path).num_row_groups


@pytest.mark.parametrize(("data", "eps", "count"), [
    ({"id": ["doc1"], "max_id": ["doc1"], "cosine_sim_score": [0.0]}, 0.1, 0),
    ({"id": ["doc1", "doc2", "doc3"], "max_id": ["doc2", "doc3", "doc1"], "cosine_sim_score": [0.5, 0.6, 0.7]}, 0.1, 0),
    ({"id": ["doc1", "doc2", "doc3", "doc4"], "max_id": ["doc2", "doc1", "doc4", "doc3"],
      "cosine_sim_score": [0.98, 0.98, 0.85, 0.85]}, 0.01, 0),
    ({"id": ["doc4", "doc2", "doc3", "doc1"], "max_id": ["doc3", "doc1", "doc4", "doc2"],
      "cosine_sim_score": [0.85, 0.98, 0.85, 0.98]}, 0.2, 4),
])
def test_threshold_and_sorted_ids(tmp_path, data, eps, count):
    found = pd.read_parquet(identified(tmp_path, [data], eps))
    assert list(found.columns) == ["id"] and len(found) == count
    assert found["id"].tolist() == sorted(found["id"])


def test_two_duplicates_in_two_row_groups(tmp_path):
    data = {"id": ["doc1", "doc2", "doc3", "doc4", "doc5"], "max_id": ["doc2", "doc1", "doc4", "doc3", "doc1"],
            "cosine_sim_score": [0.95, 0.95, 0.85, 0.85, 0.75]}
    path = identified(tmp_path, [data], 0.1)
    assert pd.read_parquet(path)["id"].tolist() == ["doc1", "doc2"] and row_groups(path) == 2


def test_ten_clusters_combine_into_one_file_of_ten_row_groups(tmp_path):
    clusters = [{"id": [f"doc{c}_1", f"doc{c}_2", f"doc{c}_3"], "max_id": [f"doc{c}_2", f"doc{c}_1", f"doc{c}_1"],
                 "cosine_sim_score": [0.95, 0.95, 0.85]} for c in range(10)]
    path = identified(tmp_path, clusters, 0.1)
    assert len(pd.read_parquet(path)) == 20 and row_groups(path) == 10


def test_row_group_hint(tmp_path):
    data = {"id": [f"doc{i}" for i in range(50)], "max_id": [f"doc{(i + 1) % 50}" for i in range(50)],
            "cosine_sim_score": [0.95] * 50}
    path = identified(tmp_path, [data], 0.1, row_groups=5)
    assert len(pd.read_parquet(path)) == 50 and row_groups(path) == 5
