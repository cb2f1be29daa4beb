"""Semantic deduplication with every stage in processes other than the driver.

The text workflow runs through the portable runner on an EXTERNAL worker
pool, on the multi-process local runner and on a dask LocalCluster (Beam's
DaskRunner, which reports no metrics): the model loads in the workers,
each phase's completion marks are written by worker pids and read back from
disk by a second run, which then finds nothing to do.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

from beam_curator.checkpoint import open_store
from beam_curator.runners import WorkerPool
from beam_curator.workflows import TextSemanticDeduplicationWorkflow
from stages_for_tests import writer_pids

TEXTS = [
    "Command-line tool to convert images between formats",
    "Library for reading and writing compressed archives",
    "Text editor with syntax highlighting for many languages",
    "Network monitor that draws bandwidth graphs per host",
    "Fonts for mathematical typesetting in documents",
    "Daemon that synchronises the system clock over the network",
]


def write_input(folder: Path) -> list[dict]:
    """Two files; the third file repeats two records' texts under new ids."""
    rows = [{"doc_id": f"d{i}", "text": text} for i, text in enumerate(TEXTS)]
    copies = [{"doc_id": "copy-1", "text": TEXTS[1]}, {"doc_id": "copy-4", "text": TEXTS[4]}]
    folder.mkdir(parents=True)
    for name, part in (("a", rows[:3]), ("b", rows[3:]), ("c", copies)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in part))
    return rows + copies


def run(tmp_path: Path, **runner: object) -> dict:
    return TextSemanticDeduplicationWorkflow(
        str(tmp_path / "input"), str(tmp_path / "output"), str(tmp_path / "cache"), id_field="doc_id",
        input_filetype="jsonl", output_filetype="jsonl",
        embedding_backend="sentence-transformers", n_clusters=2, eps=0.01, **runner,
    ).run().metadata


def phase_checkpoint(cache: Path, phase: str) -> Path:
    """A phase's checkpoint folder; phases that follow their inputs keep one per settings."""
    folder = cache / "checkpoints" / phase
    per_settings = [child for child in folder.iterdir() if child.is_dir() and not child.name.startswith(".")]
    return per_settings[0] if len(per_settings) == 1 else folder


def check_run_and_rerun(tmp_path: Path, **runner: object) -> None:
    rows = write_input(tmp_path / "input")
    first = run(tmp_path, **runner)
    assert first["num_duplicates"] == 2
    kept = sorted(
        json.loads(line)["doc_id"]
        for path in glob.glob(f"{tmp_path}/output/deduplicated/*.jsonl")
        for line in Path(path).read_text().splitlines()
    )
    assert len(kept) == len(rows) - 2
    assert sum(doc in kept for doc in ("d1", "copy-1")) == 1 and sum(doc in kept for doc in ("d4", "copy-4")) == 1
    check_marks_from_workers(tmp_path / "cache", os.getpid())
    written = output_times(tmp_path / "output")
    second = run(tmp_path, **runner)
    assert second["num_duplicates"] == 2 and second["embedding_time"] < first["embedding_time"]
    assert output_times(tmp_path / "output") == written, "the rerun wrote output again"
    for phase, _ in PHASE_PARTITIONS:
        assert os.getpid() not in writer_pids(phase_checkpoint(tmp_path / "cache", phase))


def output_times(folder: Path) -> dict[Path, int]:
    """When each file under ``folder`` was last written: a rerun that writes nothing leaves them all."""
    return {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


# The partitions each phase marks on write_input's three files.
PHASE_PARTITIONS = (("embedding", 3), ("kmeans-sample", 3), ("check-ids", 1), ("assign", 3), ("group-by-cluster", 1),
                    ("pairwise", 1), ("removal", 3))


def check_marks_from_workers(cache: Path, driver: int) -> None:
    """Every phase of a run on write_input's files marked each of its partitions, from processes other than
    the ``driver``."""
    for phase, partitions in PHASE_PARTITIONS:
        checkpoint = phase_checkpoint(cache, phase)
        pids = writer_pids(checkpoint)
        assert pids and driver not in pids, f"{phase} marks must come from worker processes, got {pids}"
        assert len(open_store(str(checkpoint)).completed()) == partitions


@pytest.mark.slow
def test_semdedup_on_an_external_worker_pool(tmp_path: Path, worker_pool: WorkerPool) -> None:
    check_run_and_rerun(tmp_path, runner="portable", **worker_pool.settings())


@pytest.mark.slow
def test_semdedup_on_local_worker_processes(tmp_path: Path, worker_pythonpath: None) -> None:
    check_run_and_rerun(tmp_path, runner="local-multiprocess", num_workers=2)


@pytest.mark.slow
def test_semdedup_on_dask_workers(tmp_path: Path, dask_cluster) -> None:
    check_run_and_rerun(tmp_path, runner="dask", dask_address=dask_cluster.scheduler_address)
