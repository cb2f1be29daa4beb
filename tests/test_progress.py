"""Live progress and worker start-up, with workers in the driver, in local
processes and behind an EXTERNAL worker pool.

Workers share no memory with the driver, so what they record must arrive
through the progress folder; a pool that cannot start workers must turn into
an error naming the fix, not a run that waits forever.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.typehints.decorators import TypeCheckError

from beam_curator import Pipeline
from beam_curator.data import sample_corpus_path
from beam_curator.runners import WorkerPool, free_port, pipeline_options
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.transforms import CuratorStages
from beam_curator.transforms.progress import (
    ProgressRecorder,
    ProgressView,
    ProgressWatcher,
    WorkersDidNotStartError,
    progress_folder_in,
    read_progress,
)
from beam_curator.workflows import FuzzyDeduplicationWorkflow

SAMPLE_DOCUMENTS, SAMPLE_FILES = 614, 6


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["local", "local-multiprocess", "portable-external"])
def test_workers_in_any_process_report_documents_and_partitions(
    runner: str, tmp_path: Path, worker_pool: WorkerPool,
) -> None:
    settings = {"local": {}, "local-multiprocess": {"num_workers": 2}, "portable-external": worker_pool.settings()}
    folder = str(tmp_path / "progress")
    stages = [JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))]
    options = pipeline_options(runner.split("-external")[0], **settings[runner])
    with beam.Pipeline(options=options) as p:
        _ = p | CuratorStages(stages, str(tmp_path / "ckpt"), progress_folder=folder)
    snapshot = read_progress(folder)
    assert snapshot.workers >= 1
    if runner != "local":
        assert str(os.getpid()) not in " ".join(os.listdir(folder)), "recorded by the worker processes"
    assert snapshot.partitions == {"pending": SAMPLE_FILES, "skipped": 0, "completed": SAMPLE_FILES}
    reader = snapshot.stage("jsonl_reader")
    assert (reader["tasks"], reader["items_out"]) == (SAMPLE_FILES, SAMPLE_DOCUMENTS)
    assert snapshot.stage("jsonl_writer")["items_in"] == SAMPLE_DOCUMENTS


def test_the_bar_shows_documents_an_estimated_total_rate_and_partitions(tmp_path: Path) -> None:
    folder = str(tmp_path / "progress")
    recorder = ProgressRecorder.for_folder(folder)
    recorder.partition("pending", 4)
    recorder.partition("skipped", 1)
    stream = io.StringIO()
    with ProgressWatcher([ProgressView(folder, "embedding", "reader", "writer")], show=True, stream=stream) as watcher:
        recorder.stage("reader", tasks=2, items_in=0, items_out=200)
        recorder.stage("writer", tasks=1, items_in=150, items_out=1)
        recorder.partition("completed")
        recorder.write(force=True)
        watcher.update(read_progress(folder))
        live = stream.getvalue().split("\r")[-1]
        # 200 documents in the 2 partitions read so far: about 400 in all 4.
        assert "150/400" in live and "doc/s" in live and "partitions 1/4, 1 already complete" in live, live
    assert "150/150" in stream.getvalue().split("\r")[-1], "the final line shows the real total"


class Terminal(io.StringIO):
    """What the bars are drawn on when a run's stderr is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_fuzzy_workflows_lsh_bars_count_groups_buckets_and_edges(tmp_path: Path, monkeypatch) -> None:
    """The LSH phase's first step has a task per group of signature files, its
    second writes buckets, and the edges phase edges: each bar says so, and
    ends at that step's real count."""
    (tmp_path / "in").mkdir()
    texts = ["The quick brown fox jumps over the lazy dog", "The quick brown fox jumps over the lazy dog!",
             "A test string", "A different test string", "Something else entirely"]
    for number, text in enumerate(texts):
        (tmp_path / "in" / f"part{number}.jsonl").write_text(f'{{"text": "{text}"}}\n')
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    FuzzyDeduplicationWorkflow(str(tmp_path / "cache"), str(tmp_path / "out"), str(tmp_path / "in"),
                               input_filetype="jsonl", char_ngrams=5).run()
    lines = terminal.getvalue().replace("\r", "\n").splitlines()

    def final(title: str, unit: str, count: int) -> bool:
        """Whether the last line of the bar ``title`` ends at ``count`` and names ``unit`` in its rate."""
        line = [line for line in lines if line.startswith(f"{title}: ")][-1]
        return f" {count}/{count} " in line and (f"{unit}/s" in line or f"s/{unit}" in line)

    buckets = pq.read_table(tmp_path / "cache" / "LSHStage").num_rows
    edges = pq.read_table(tmp_path / "cache" / "BucketsToEdgesStage").num_rows
    assert buckets and edges
    assert final("lsh-band-keys", "group", 1), lines
    assert final("lsh", "bucket", buckets), lines
    assert final("edges", "edge", edges), lines
    assert final("minhash", "doc", len(texts)), "documents stay documents"


def test_the_bar_moves_on_to_the_next_step_once_its_source_has_listed(tmp_path: Path) -> None:
    """Steps of ``run_in_order`` run one after another: the first step's bar
    ends with its own total, then the second step's bar opens."""
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    views = [ProgressView(first, "sample", "reader", "sample_writer"),
             ProgressView(second, "check-ids", "check", "ids_writer")]
    stream = io.StringIO()
    with ProgressWatcher(views, show=True, stream=stream) as watcher:
        sampling = ProgressRecorder.for_folder(first)
        sampling.stage("sample_writer", tasks=3, items_in=90, items_out=3)
        sampling.write(force=True)
        watcher._follow()
        assert watcher.current == 0 and "check-ids" not in stream.getvalue()
        checking = ProgressRecorder.for_folder(second)
        checking.partition("pending", 2)
        checking.stage("ids_writer", tasks=1, items_in=5, items_out=1)
        checking.write(force=True)
        watcher._follow()
        assert watcher.current == 1
    shown = stream.getvalue()
    assert "sample" in shown and "90/90" in shown, "the first bar ends with its own total"
    assert "check-ids" in shown.split("90/90")[-1] and "5/5" in shown.split("\r")[-1]


def test_the_start_timeout_counts_from_the_job_running(tmp_path: Path) -> None:
    """A job server starting, files staging, a cluster taking the job on: no
    worker reports meanwhile, and none of it counts against the start-up timeout."""
    with ProgressWatcher([ProgressView(str(tmp_path / "progress"), "copy", "reader", "writer")], show=False,
                         start_timeout=0.5) as watcher:
        watcher.poll_s = 0.1
        time.sleep(1.5)
        assert not watcher.stalled, "stalled before the job was running"
        watcher.job_running()
        deadline = time.monotonic() + 5
        while not watcher.stalled and time.monotonic() < deadline:
            time.sleep(0.1)
        assert watcher.stalled


def test_pipeline_run_leaves_no_progress_files(tmp_path: Path) -> None:
    Pipeline("copy", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))]).run(
        str(tmp_path / "ckpt"), progress=False,
    )
    assert not list((tmp_path / "ckpt" / ".beam_curator_progress").iterdir())


def test_progress_files_skip_the_sync_that_output_files_get(tmp_path: Path, monkeypatch) -> None:
    """A sync costs milliseconds per file; progress is rewritten every second and only displayed,
    while output files must be on disk before their partition is marked."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    tmp_path = tmp_path.resolve()  # as /proc names the synced files
    folder = tmp_path / "progress"
    with beam.Pipeline(options=pipeline_options("local")) as p:
        _ = p | CuratorStages([JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))],
                              str(tmp_path / "ckpt"), progress_folder=str(folder))
    assert read_progress(str(folder)).partitions["completed"] == SAMPLE_FILES
    assert sum(f"{tmp_path}/out/" in path for path in synced) == SAMPLE_FILES
    assert not [path for path in synced if str(folder) in path]


def test_a_pcollection_of_strings_fails_when_the_pipeline_is_built(tmp_path: Path) -> None:
    pipeline = beam.Pipeline(options=pipeline_options("local"))
    with pytest.raises(TypeCheckError, match="CuratorStages: expected .*Task.*, got <class 'str'>"):
        _ = pipeline | beam.Create(["a text"]) | CuratorStages([JsonlWriter(str(tmp_path / "out"))])


@pytest.fixture
def python_without_beam(tmp_path: Path) -> str:
    """A folder whose ``python`` cannot run Beam, as on a PATH without the venv."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "python"
    fake.write_text("#!/bin/sh\necho 'no apache_beam here' >&2\nexit 1\n")
    fake.chmod(0o755)
    return str(folder)


def start_pool(module: str, port: int, path_first: str) -> subprocess.Popen:
    env = dict(os.environ, PATH=os.pathsep.join([path_first, os.environ["PATH"]]))
    port_flag = f"--port={port}" if module == "beam_curator.runners.worker_pool" else f"--service_port={port}"
    pool = subprocess.Popen([sys.executable, "-m", module, port_flag], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("localhost", port), timeout=1).close()
            return pool
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{module} did not listen on {port}")


@pytest.fixture
def pools() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for pool in started:
        os.killpg(pool.pid, signal.SIGKILL)
        pool.wait()


def copy_through_pool(tmp_path: Path, module: str, python_dir: str, pools: list[subprocess.Popen], timeout: float):
    """Copy the sample through a pool started by ``python -m module`` with ``python_dir`` first on PATH."""
    port = free_port()
    pools.append(start_pool(module, port, python_dir))
    copy = Pipeline("copy", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))])
    return copy.run(str(tmp_path / "ckpt"), "portable", environment_type="EXTERNAL",
                    environment_config=f"localhost:{port}", worker_start_timeout=timeout)


@pytest.mark.slow
def test_a_pool_whose_workers_cannot_start_fails_fast_with_the_fix(
    tmp_path: Path, python_without_beam: str, pools: list[subprocess.Popen],
) -> None:
    started = time.monotonic()
    with pytest.raises(WorkersDidNotStartError, match=r"within 10 s .*python -m beam_curator.runners.worker_pool"):
        copy_through_pool(tmp_path, "apache_beam.runners.worker.worker_pool_main", python_without_beam, pools, 10)
    assert time.monotonic() - started < 60
    # The abandoned job's thread must end too, or the process could not exit after the error.
    deadline = time.monotonic() + 20
    while any("_run_job" in thread.name for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "the embedded job service's thread still waits for the workers"
        time.sleep(0.2)


@pytest.mark.slow
def test_our_pool_runs_workers_with_its_own_interpreter(
    tmp_path: Path, python_without_beam: str, pools: list[subprocess.Popen],
) -> None:
    summary = copy_through_pool(tmp_path, "beam_curator.runners.worker_pool", python_without_beam, pools, 60)
    assert summary.partitions_completed == SAMPLE_FILES


KILLED_WITH_PROGRESS = """
import os, signal, sys
from beam_curator.transforms.progress import progress_folder_in
in_checkpoint = progress_folder_in(sys.argv[1])
os.makedirs(in_checkpoint)  # as its workers' first progress files make it
print(in_checkpoint, progress_folder_in(None), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer or a scheduler's kill -9 ends a run
"""


def test_the_progress_folders_of_a_sigkilled_run_are_removed_by_the_next_run(tmp_path: Path) -> None:
    """A killed run never reaches its ``finally``: its progress folders (in its checkpoint, and a temporary
    one) stay until the next run's start finds their owner dead. A live run's folder stays."""
    checkpoint = tmp_path / "ckpt"
    killed = subprocess.run([sys.executable, "-c", KILLED_WITH_PROGRESS, str(checkpoint)], capture_output=True,
                            text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    left = [Path(folder) for folder in killed.stdout.split()]
    assert len(left) == 2 and all(folder.is_dir() for folder in left)
    live = Path(progress_folder_in(str(checkpoint)))
    live.mkdir(parents=True)
    Pipeline("copy", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))]).run(
        checkpoint_path=str(checkpoint), runner="local", progress=False)
    assert not any(folder.exists() for folder in left), "a killed run's progress folder was left"
    assert live.is_dir(), "a live run's progress folder was removed"
