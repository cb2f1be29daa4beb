"""The k-means sample is drawn by Beam workers, one partition per embeddings
file, so the driver reads only ``kmeans_max_sample_bytes`` of vectors: what
is drawn, that the draw repeats, that a finished sample is not drawn again,
and that a lost one is."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import file_times, write_embeddings  # noqa: E402

from beam_curator.workflows import SemanticDeduplicationWorkflow  # noqa: E402

DOCS, DIMS, FILES = 2000, 16, 4
SAMPLE_ROWS = 400  # the budget below, in rows: a fifth of the documents


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(DOCS, DIMS)).astype(np.float32)
    folder = write_embeddings(tmp_path_factory.mktemp("emb") / "embeddings", list(range(DOCS)), vectors, files=FILES)
    return folder, pd.DataFrame({"id": range(DOCS), "embeddings": list(vectors)})


def run(embeddings: Path, base: Path, seed: int = 42) -> pd.DataFrame:
    """One workflow run; the sample it fitted on, with the file each row is in."""
    SemanticDeduplicationWorkflow(
        str(embeddings), str(base / "output"), str(base / "cache"), n_clusters=5, eps=0.01, seed=seed,
        kmeans_max_sample_bytes=SAMPLE_ROWS * DIMS * 4, runner="local",
    ).run()
    files = sorted((base / "cache" / "kmeans_sample").glob("*.parquet"))
    return pd.concat([pd.read_parquet(f).assign(file=f.name) for f in files], ignore_index=True)


def test_sample_is_a_budget_sized_draw_from_every_file(embeddings, tmp_path):
    folder, data = embeddings
    sample = run(folder, tmp_path)
    # Binomial(2000, 0.2): mean 400, standard deviation 18.
    assert 300 < len(sample) < 500
    assert sample["file"].nunique() == FILES
    assert sample["id"].is_unique
    drawn = data.set_index("id").loc[sample["id"], "embeddings"]
    assert np.array_equal(np.stack(sample["embeddings"]), np.stack(drawn))


def test_draw_depends_on_the_seed_and_the_documents_alone(embeddings, tmp_path):
    folder, data = embeddings
    first = set(run(folder, tmp_path / "a")["id"])
    assert set(run(folder, tmp_path / "b")["id"]) == first
    # The same documents in other files (other names, other partitions): the same sample.
    regrouped = write_embeddings(tmp_path / "regrouped", list(data["id"]), np.stack(data["embeddings"]), files=3)
    assert set(run(regrouped, tmp_path / "c")["id"]) == first
    assert set(run(folder, tmp_path / "d", seed=7)["id"]) != first


def test_a_sample_smaller_than_k_says_what_to_change(embeddings, tmp_path):
    folder, _ = embeddings
    with pytest.raises(ValueError, match="fewer than n_clusters=5.*raise kmeans_max_sample_bytes"):
        SemanticDeduplicationWorkflow(
            str(folder), str(tmp_path / "output"), str(tmp_path / "cache"), n_clusters=5, eps=0.01,
            kmeans_max_sample_bytes=DIMS * 4, runner="local",
        ).run()


def test_a_finished_sample_is_not_drawn_again(embeddings, tmp_path):
    folder, _ = embeddings
    run(folder, tmp_path)
    sample = tmp_path / "cache" / "kmeans_sample"
    before = file_times(sample)
    # Centroids lost (as if the run died between the sample and the fit): only the fit is redone.
    (tmp_path / "cache" / "kmeans_results" / "kmeans_centroids.npy").unlink()
    for marker in (tmp_path / "cache" / "checkpoints" / "phases").glob("kmeans*"):
        if "started" not in marker.name:
            marker.unlink()
    run(folder, tmp_path)
    assert file_times(sample) == before
    assert (tmp_path / "cache" / "kmeans_results" / "kmeans_centroids.npy").exists()


def test_a_lost_sample_is_drawn_again_before_the_fit(embeddings, tmp_path):
    folder, _ = embeddings
    drawn = run(folder, tmp_path)
    centroids = tmp_path / "cache" / "kmeans_results" / "kmeans_centroids.npy"
    fitted = np.load(centroids)
    # Sample and centroids lost with the sampling checkpoint intact: its partitions see their files gone.
    for file in (tmp_path / "cache" / "kmeans_sample").glob("*.parquet"):
        file.unlink()
    centroids.unlink()
    redrawn = run(folder, tmp_path)
    pd.testing.assert_frame_equal(redrawn, drawn)
    np.testing.assert_array_equal(np.load(centroids), fitted)
