"""Kill the semantic-dedup workflow in its pairwise phase and run the same command again.

The killed run (SIGKILL: no cleanup of any kind) leaves some clusters
scored and checkpointed. The rerun must reuse the k-means results, skip
exactly the checkpointed clusters without rewriting their files, and end
with the duplicates an uninterrupted run finds. A rerun after input files
were added must take them in, embedding only the new ones.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import (  # noqa: E402
    SCRIPTS_DIR,
    captured_logs,
    copy_corpus,
    duplicate_ids,
    jsonl_rows,
    kept_rows,
    short_notes,
    write_embeddings,
    write_jsonl,
)
from semdedup_resume_run import N_CLUSTERS, workflow  # noqa: E402
from semdedup_text_run import workflow as text_workflow  # noqa: E402

from beam_curator.checkpoint import open_store  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402
from stages_for_tests import kill_once  # noqa: E402

SUMMARY = re.compile(r"pairwise: (\d+) partitions pending, (\d+) skipped as complete, (\d+) completed this run")


def synthetic_embeddings(folder: Path, documents: int = 2000) -> Path:
    """Documents around 200 random centres, 300 of them near-copies of others."""
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(N_CLUSTERS, 32))
    vectors = centres[rng.integers(0, N_CLUSTERS, documents)] + rng.normal(size=(documents, 32))
    vectors[:300] = vectors[300:600] + 0.02 * rng.normal(size=(300, 32))
    return write_embeddings(folder, [f"doc{i:05d}" for i in range(documents)], vectors, files=2)


def scored_clusters(folder: Path) -> list[Path]:
    """The parquet files of ``folder``, without hidden temporaries."""
    return [path for path in folder.glob("*.parquet") if not path.name.startswith(".")] if folder.exists() else []


def reference_duplicates(embeddings: Path, base: Path) -> pd.DataFrame:
    """The duplicates of an uninterrupted run with the same settings."""
    workflow(str(embeddings), str(base / "reference"), str(base / "reference_cache")).run()
    return duplicate_ids(base / "reference").sort_values("id", ignore_index=True)


def test_a_killed_run_resumes_from_its_checkpoint_and_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    embeddings = synthetic_embeddings(tmp_path / "embeddings")
    output, cache = tmp_path / "output", tmp_path / "cache"
    pairwise = cache / "pairwise_results"
    # 10 rows per range: one range per cluster, 200 pairwise partitions.
    command = [sys.executable, str(SCRIPTS_DIR / "semdedup_resume_run.py"), str(embeddings), str(output), str(cache), "10"]

    kill_once(command, lambda: len(scored_clusters(pairwise)), tmp_path / "killed.log")
    done = open_store(str(cache / "checkpoints" / "pairwise")).completed()
    assert 0 < len(done) < N_CLUSTERS, f"expected a run stopped midway, {len(done)} clusters checkpointed"
    assert not (output / "duplicates").exists()
    finished_files = {  # cluster_<k> is written by partition 0_clusters<k>to<k+1>
        path: path.stat().st_mtime_ns for path in scored_clusters(pairwise)
        if "0_clusters{0}to{1}".format(k := int(path.stem.removeprefix("cluster_")), k + 1) in done
    }
    assert len(finished_files) == len(done)

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "k-means: embeddings and settings unchanged, reusing" in rerun.stderr
    pending, skipped, completed = map(int, SUMMARY.search(rerun.stderr).groups())
    assert (skipped, pending, completed) == (len(done), N_CLUSTERS - len(done), N_CLUSTERS - len(done))
    assert {path: path.stat().st_mtime_ns for path in finished_files} == finished_files, "a finished cluster was redone"
    assert len(scored_clusters(pairwise)) == N_CLUSTERS

    expected = reference_duplicates(embeddings, tmp_path)
    assert len(expected) >= 250
    pd.testing.assert_frame_equal(duplicate_ids(output).sort_values("id", ignore_index=True), expected)


def test_a_run_killed_while_grouping_by_cluster_resumes_the_remaining_ranges(tmp_path: Path) -> None:
    embeddings = synthetic_embeddings(tmp_path / "embeddings")
    output, cache = tmp_path / "output", tmp_path / "cache"
    by_cluster = cache / "kmeans_results" / "embs_by_nearest_center"
    # 10 rows per range: one range per cluster, 200 grouping partitions.
    command = [sys.executable, str(SCRIPTS_DIR / "semdedup_resume_run.py"), str(embeddings), str(output), str(cache), "10"]

    kill_once(command, lambda: len(list(by_cluster.glob("nearest_cent=*"))), tmp_path / "killed.log")
    done = open_store(str(cache / "checkpoints" / "group-by-cluster")).completed()
    assert 0 < len(done) < N_CLUSTERS, f"expected a run stopped midway, {len(done)} ranges checkpointed"
    finished_files = {path: path.stat().st_mtime_ns for folder in by_cluster.iterdir()
                      for path in scored_clusters(folder) if "_".join(path.stem.split("_")[:2]) in done}
    assert len(finished_files) == len(done)

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    grouped = re.search(r"group-by-cluster: (\d+) partitions pending, (\d+) skipped as complete", rerun.stderr)
    assert (int(grouped[1]), int(grouped[2])) == (N_CLUSTERS - len(done), len(done))
    assert {path: path.stat().st_mtime_ns for path in finished_files} == finished_files, "a finished range was redone"
    # One file per cluster (besides any hidden temporary file the kill left, which readers skip).
    assert all(len(scored_clusters(folder)) == 1 for folder in by_cluster.iterdir())
    pd.testing.assert_frame_equal(
        duplicate_ids(output).sort_values("id", ignore_index=True), reference_duplicates(embeddings, tmp_path)
    )


def test_a_rerun_after_files_were_added_embeds_only_them_and_deduplicates_everything(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    notes = short_notes()
    write_jsonl(tmp_path / "input" / "part-0.jsonl", notes[:6])

    def run() -> dict:
        return TextSemanticDeduplicationWorkflow(
            str(tmp_path / "input"), str(tmp_path / "output"), str(tmp_path / "cache"), id_field="doc_id",
            input_filetype="jsonl", output_filetype="jsonl",
            embedding_backend="sentence-transformers", n_clusters=2, eps=0.01, runner="local",
        ).run().metadata

    assert run()["num_duplicates"] == 0
    added = [notes[6], {"doc_id": "copy-of-d2", "text": notes[2]["text"]}]
    write_jsonl(tmp_path / "input" / "part-1.jsonl", added)
    with captured_logs() as logs:
        metadata = run()
    assert "embedding: 1 partitions pending, 1 skipped as complete, 1 completed this run" in "\n".join(logs)
    assert metadata["num_duplicates"] == metadata["num_duplicates_removed"] == 1
    removed = set(duplicate_ids(tmp_path / "output")["id"])
    assert removed < {"d2", "copy-of-d2"}
    kept = {row["doc_id"] for file in (tmp_path / "output" / "deduplicated").glob("*.jsonl") for row in jsonl_rows(file)}
    assert kept == {row["doc_id"] for row in notes[:7] + added} - removed


def test_a_run_killed_while_embedding_resumes_per_input_file(tmp_path: Path) -> None:
    """The longest phase: files embedded before the kill are not embedded again."""
    files = tuple(f"part-0000{i}.jsonl" for i in range(4))
    input_dir = copy_corpus(tmp_path / "input", files)
    output, cache = tmp_path / "output", tmp_path / "cache"
    embeddings = cache / "embeddings"
    command = [sys.executable, str(SCRIPTS_DIR / "semdedup_text_run.py"), str(input_dir), str(output), str(cache)]

    kill_once(command, lambda: len(scored_clusters(embeddings)), tmp_path / "killed.log", at=2)
    embedded = {path: path.stat().st_mtime_ns for path in scored_clusters(embeddings)}
    assert 2 <= len(embedded) < len(files), f"expected a run stopped midway, {len(embedded)} files embedded"

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    found = re.search(r"embedding: (\d+) partitions pending, (\d+) skipped as complete", rerun.stderr)
    done = int(found[2])  # the last file seen may have been written but not yet marked when the kill came
    assert done >= len(embedded) - 1 >= 1 and int(found[1]) == len(files) - done
    unchanged = [path for path, mtime in embedded.items() if path.exists() and path.stat().st_mtime_ns == mtime]
    assert len(unchanged) >= done, "a file embedded before the kill was embedded again"

    text_workflow(str(input_dir), str(tmp_path / "reference"), str(tmp_path / "reference_cache")).run()
    assert kept_rows(output) == kept_rows(tmp_path / "reference")
    pd.testing.assert_frame_equal(
        duplicate_ids(output).sort_values("id", ignore_index=True),
        duplicate_ids(tmp_path / "reference").sort_values("id", ignore_index=True),
    )
