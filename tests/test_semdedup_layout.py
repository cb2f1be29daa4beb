"""A cache in the layout of earlier versions is computed again, not misread.

``SemanticDeduplicationWorkflow`` used to keep its k-means and pairwise
results in ``cache_path/semantic_dedup/``, as the text workflow does; it now
keeps them directly in ``cache_path``, as NeMo Curator does. A rerun on a
cache of the old layout must not pass its phases as done because their files
are still in place where nothing reads them any more: it computes them again
where they belong and ends with what a fresh run gives.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import captured_logs, write_embeddings  # noqa: E402

from beam_curator.workflows import SemanticDeduplicationWorkflow  # noqa: E402
from beam_curator.workflows.semantic.layout import TEXT_RESULTS_FOLDER  # noqa: E402

RESULTS = ("kmeans_results", "kmeans_sample", "id_check", "pairwise_results")


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory) -> Path:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(150, 8))
    vectors[:40] = vectors[40:80] + 0.001 * rng.normal(size=(40, 8))
    return write_embeddings(tmp_path_factory.mktemp("emb") / "embeddings", list(range(150)), vectors, files=3)


def run(embeddings: Path, base: Path, **settings: object) -> dict:
    return SemanticDeduplicationWorkflow(
        str(embeddings), str(base / "output"), str(base / "cache"), n_clusters=3, eps=0.01, runner="local", **settings,
    ).run().metadata


def written_by_an_earlier_version(embeddings: Path, base: Path) -> None:
    """Phases, keys and folders as an earlier version left them: the text
    workflow's results folder is where it put the direct workflow's too."""
    run(embeddings, base, _results_folder=TEXT_RESULTS_FOLDER)


def moved_into_semantic_dedup(embeddings: Path, base: Path) -> None:
    """Today's markers, with the folders moved to where they used to be."""
    run(embeddings, base)
    (base / "cache" / TEXT_RESULTS_FOLDER).mkdir()
    for folder in RESULTS:
        shutil.move(base / "cache" / folder, base / "cache" / TEXT_RESULTS_FOLDER / folder)


@pytest.mark.parametrize("earlier", [written_by_an_earlier_version, moved_into_semantic_dedup])
def test_a_rerun_on_a_cache_of_the_earlier_layout_gives_the_fresh_runs_result(embeddings, tmp_path, earlier):
    earlier(embeddings, tmp_path / "old")
    assert {path.name for path in (tmp_path / "old" / "cache" / TEXT_RESULTS_FOLDER).iterdir()} == set(RESULTS)
    with captured_logs() as logs:
        rerun = run(embeddings, tmp_path / "old")
    fresh = run(embeddings, tmp_path / "fresh")

    assert {"kmeans", "pairwise"} <= set(rerun["phases_run"]), "the old results passed as done"
    cache = tmp_path / "old" / "cache"
    assert rerun["kmeans_results_path"] == str(cache / "kmeans_results")
    assert rerun["pairwise_results_path"] == str(cache / "pairwise_results")
    assert all((cache / folder).is_dir() for folder in RESULTS)
    assert rerun["num_duplicates"] == fresh["num_duplicates"] >= 40
    for folder in ("duplicates", "duplicate_pairs"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "old" / "output" / folder),
                                      pd.read_parquet(tmp_path / "fresh" / "output" / folder))
    # An earlier version's cache is named, to be deleted; moved folders keep today's keys and are only missing.
    named = any(f"{cache / TEXT_RESULTS_FOLDER} holds k-means and pairwise results" in line for line in logs)
    assert named == (earlier is written_by_an_earlier_version)
    assert run(embeddings, tmp_path / "old")["phases_run"] == []  # the new layout is then reused
