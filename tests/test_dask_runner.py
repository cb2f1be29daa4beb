"""The resumable pipeline on Beam's DaskRunner, in worker processes of a dask LocalCluster.

Beam's Dask runner reports no metrics, so these runs also check the summary
``Pipeline.run`` counts itself (from the listing in the driver and the
checkpoint), and that marks are written per partition as it finishes: a
driver killed midway leaves some partitions marked and the rest for the rerun.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.runners.dask import close_local_clusters
from beam_curator.stages.io import JsonlReader, JsonlWriter
from stages_for_tests import (
    PARTITIONS, FailShort, UpperInBatches, run_and_resume, write_corpus, writer_pids, written_records,
)

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
import curator_helpers  # noqa: E402

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")


def worker_pids(cluster) -> set[int]:
    with distributed.Client(cluster) as client:
        return set(client.run(os.getpid).values())


def test_marks_come_from_dask_workers_and_a_rerun_skips_everything(tmp_path: Path, dask_cluster) -> None:
    pids, _ = run_and_resume(tmp_path, "dask", dask_address=dask_cluster.scheduler_address)
    assert pids <= worker_pids(dask_cluster), f"marks from {pids}, not from the cluster's workers"
    # The workers live on, but hold no checkpoint file after a run: a reset needs no --force.
    open_store(str(tmp_path / "checkpoint")).reset()
    assert not open_store(str(tmp_path / "checkpoint")).completed()


def test_a_failed_partition_shows_as_not_completed(tmp_path: Path, dask_cluster) -> None:
    corpus = write_corpus(tmp_path / "input", PARTITIONS)  # two partitions hold only short texts
    pipeline = Pipeline("failing", stages=[
        JsonlReader(str(corpus), files_per_partition=1), FailShort(min_length=5), JsonlWriter(str(tmp_path / "out")),
    ])
    address = dask_cluster.scheduler_address
    first = pipeline.run(str(tmp_path / "checkpoint"), "dask", dask_address=address)
    assert (first.partitions_pending, first.partitions_completed, first.partitions_incomplete) == (PARTITIONS, 8, 2)
    assert "2 partitions not completed" in str(first)
    second = pipeline.run(str(tmp_path / "checkpoint"), "dask", dask_address=address)
    assert (second.partitions_pending, second.partitions_skipped, second.partitions_incomplete) == (2, 8, 2)


def test_a_stage_that_raises_fails_the_run_with_its_error(tmp_path: Path, dask_cluster) -> None:
    corpus = write_corpus(tmp_path / "input", PARTITIONS)
    pipeline = Pipeline("raising", stages=[
        JsonlReader(str(corpus), files_per_partition=1), FailShort(min_length=5, raise_error=True),
        JsonlWriter(str(tmp_path / "out")),
    ])
    with pytest.raises(ValueError, match="text too short in 0_"):
        pipeline.run(str(tmp_path / "checkpoint"), "dask", dask_address=dask_cluster.scheduler_address)
    assert len(open_store(str(tmp_path / "checkpoint")).completed()) < PARTITIONS


def test_batched_stages_lose_no_task(tmp_path: Path, dask_cluster) -> None:
    """Beam's DaskRunner drops what ``finish_bundle`` emits; ``run_on_dask`` must keep it."""
    corpus = write_corpus(tmp_path / "input", PARTITIONS)
    pipeline = Pipeline("batched", stages=[
        JsonlReader(str(corpus), files_per_partition=1), UpperInBatches(), JsonlWriter(str(tmp_path / "out")),
    ])
    summary = pipeline.run(str(tmp_path / "checkpoint"), "dask", dask_address=dask_cluster.scheduler_address)
    assert (summary.partitions_completed, summary.partitions_incomplete) == (PARTITIONS, 0)
    records = written_records(tmp_path / "out")
    assert len(records) == PARTITIONS * 3 and all(record["text"] == record["text"].upper() for record in records)


def test_a_cluster_started_for_a_run_serves_the_next_and_closes_on_request(
    tmp_path: Path, worker_pythonpath: None, caplog: pytest.LogCaptureFixture,
) -> None:
    """A workflow runs a Beam pipeline per phase: one LocalCluster serves them
    all (started once, said once), and is closed at exit or when asked."""
    before = set(multiprocessing.active_children())
    corpus = write_corpus(tmp_path / "input", 4)
    caplog.set_level(logging.INFO, logger="beam_curator")
    for name in ("own-cluster", "own-cluster-again"):
        pipeline = Pipeline(name, stages=[JsonlReader(str(corpus)), JsonlWriter(str(tmp_path / name))])
        summary = pipeline.run(str(tmp_path / f"checkpoint-{name}"), "dask", num_workers=1)
        assert (summary.partitions_pending, summary.partitions_completed) == (4, 4)
        assert os.getpid() not in writer_pids(tmp_path / f"checkpoint-{name}")
    assert sum("started a dask LocalCluster" in record.getMessage() for record in caplog.records) == 1
    assert set(multiprocessing.active_children()) > before
    close_local_clusters()
    assert set(multiprocessing.active_children()) <= before, "the LocalCluster's workers outlived close_local_clusters"


FILES = 12
DELAY = 0.5  # seconds per partition: a kill lands between partitions


def wait_until_idle(cluster, timeout: float = 60) -> None:
    """Tasks of a killed driver that were already running finish on the
    workers (the scheduler forgets them at once); wait for them, so the
    checkpoint read next is the final one."""
    deadline = time.monotonic() + timeout
    with distributed.Client(cluster) as client:
        while any(client.run(lambda dask_worker: dask_worker.state.executing_count).values()):
            assert time.monotonic() < deadline, "the killed driver's tasks never finished"
            time.sleep(0.1)


def test_a_driver_killed_midrun_leaves_per_partition_marks_and_the_rerun_completes_the_output(
    tmp_path: Path, dask_cluster,
) -> None:
    input_dir = curator_helpers.write_corpus(tmp_path / "in", FILES)
    every = {curator_helpers.source_id([file]) for file in input_dir.glob("*.jsonl")}
    reference = tmp_path / "reference"
    curator_helpers.resume_pipeline(str(input_dir), str(reference), str(tmp_path / "reference.log"), 0).run()

    def command(log: str) -> list[str]:
        return [sys.executable, str(curator_helpers.SCRIPTS_DIR / "resume_pipeline.py"), str(input_dir),
                str(tmp_path / "out"), str(tmp_path / "ckpt"), "--log", str(tmp_path / log), "--delay", str(DELAY),
                "--dask-address", dask_cluster.scheduler_address]

    console = tmp_path / "first.out"
    with console.open("w") as sink:
        first = subprocess.Popen(command("first.log"), stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not open_store(str(tmp_path / "ckpt")).completed():
            assert first.poll() is None, f"the run ended before it could be killed:\n{console.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no partition was marked"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    wait_until_idle(dask_cluster)
    marked = open_store(str(tmp_path / "ckpt")).completed()
    assert marked < every, f"all {FILES} partitions were marked before the kill: marks must come as partitions finish"

    second = subprocess.run(command("second.log"), capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary == {"pending": FILES - len(marked), "skipped": len(marked), "completed": FILES - len(marked)}
    rerun = ["_".join(line.split("_")[:2]) for line in (tmp_path / "second.log").read_text().splitlines()]
    assert sorted(rerun) == sorted(every - marked), "each unmarked partition once, and only those"
    output = tmp_path / "out"
    assert sorted(p.name for p in output.iterdir() if not p.name.startswith(".")) == \
        sorted(p.name for p in reference.iterdir())
    assert curator_helpers.output_rows(output) == curator_helpers.output_rows(reference)
    assert open_store(str(tmp_path / "ckpt")).completed() == every


def test_closing_the_local_cluster_waits_for_a_worker_slow_to_exit_without_a_nanny_warning(tmp_path: Path) -> None:
    """dask kills a worker still alive 4 s after its cluster is told to close, with a warning on the
    terminal after a run that succeeded; a worker holding a model on a busy machine takes that long."""
    data = write_corpus(tmp_path / "in", 2)
    script = Path(__file__).parent / "scripts" / "dask_worker_slow_to_exit.py"
    done = subprocess.run([sys.executable, str(script), str(data), str(tmp_path / "out"), str(tmp_path / "ckpt")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 completed this run" in done.stdout
    assert "nanny" not in done.stderr and "still alive" not in done.stderr, done.stderr[-3000:]


def test_the_local_clusters_workers_of_a_sigkilled_driver_exit_and_the_next_cluster_removes_their_folders(
    tmp_path: Path,
) -> None:
    """A SIGKILLed driver's LocalCluster is not ended by the package's markers: its worker processes watch
    their parent and exit with it, and the next LocalCluster started on the machine removes the scratch
    folders they left (dask's own clean-up of folders no live worker locks)."""
    ready = tmp_path / "ready"
    driver = subprocess.Popen([sys.executable, "-c", (
        "import pathlib, sys, time\n"
        "from beam_curator.runners.dask import _local_cluster\n"
        "if __name__ == '__main__':\n"
        "    _local_cluster(2)\n"
        "    pathlib.Path(sys.argv[1]).touch()\n"
        "    time.sleep(600)\n"), str(ready)])
    deadline = time.monotonic() + 180
    while not ready.exists():
        assert driver.poll() is None and time.monotonic() < deadline, "the driver did not start its cluster"
        time.sleep(0.2)
    workers = [child for child in psutil.Process(driver.pid).children(recursive=True)
               if any(path.path.endswith(".dirlock") for path in child.open_files())]
    folders = {Path(path.path).with_suffix("") for worker in workers for path in worker.open_files()
               if path.path.endswith(".dirlock")}
    assert len(workers) == 2 and all(folder.is_dir() for folder in folders), (workers, folders)
    driver.kill()
    driver.wait()
    gone, alive = psutil.wait_procs(workers, timeout=60)
    assert not alive, f"workers outlived their SIGKILLed driver: {alive}"
    assert all(folder.is_dir() for folder in folders), "SIGKILL leaves their folders"
    next_run = subprocess.run([sys.executable, "-c", (
        "from beam_curator.runners.dask import _local_cluster, close_local_clusters\n"
        "if __name__ == '__main__':\n"
        "    _local_cluster(1)\n"
        "    close_local_clusters()\n")], capture_output=True, text=True, timeout=180)
    assert next_run.returncode == 0, next_run.stderr[-3000:]
    assert not [folder for folder in folders if folder.exists()], "the next cluster left the killed one's folders"
