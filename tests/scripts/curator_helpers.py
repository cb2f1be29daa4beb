"""Stages and file helpers shared by the engine tests and ``resume_pipeline.py``.

They live in an importable module (not a test file, not ``__main__``)
because Beam workers in other processes unpickle stages by module reference;
tests put this folder on ``PYTHONPATH`` for them (see ``scripts_pythonpath``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.io.writer import output_name
from beam_curator.stages.text.filters import DocumentFilter, ScoreFilter
from beam_curator.tasks import DocumentBatch, FileGroupTask

SCRIPTS_DIR = Path(__file__).resolve().parent


def scripts_pythonpath() -> str:
    """``PYTHONPATH`` for subprocess workers, with this folder first."""
    return os.pathsep.join(filter(None, [str(SCRIPTS_DIR), os.environ.get("PYTHONPATH", "")]))


def write_corpus(folder: Path, files: int, rows_per_file: int = 3) -> Path:
    """``files`` small JSONL files; rows carry a global number ``n`` that the
    test stages filter on, and file 2 (when present) is filtered out whole."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        rows = [
            {"id": f"{index}-{row}", "n": 0 if index == 2 else index * 10 + row + 1, "text": f"text {index} {row}"}
            for row in range(rows_per_file)
        ]
        (folder / f"part-{index:03d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def source_id(paths: list[str | Path]) -> str:
    """The lineage id a one-file-group source partition gets."""
    return f"0_{FileGroupTask(data=[str(p) for p in paths]).get_deterministic_id()}"


def written_file(folder: Path, input_file: Path, lineage: str = "_0") -> Path:
    """Where a writer puts the records of ``input_file`` whose lineage id is the
    file's source id plus ``lineage`` (``_0``: the writer follows the reader)."""
    task = DocumentBatch(task_id=f"{source_id([input_file])}{lineage}", _metadata={"source_files": [str(input_file)]})
    return folder / f"{output_name(task)}.jsonl"


def canonical(rows: list[dict]) -> list[dict]:
    """Rows in an order that does not depend on which worker wrote them."""
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def data_files(folder: Path, pattern: str = "*.jsonl") -> list[Path]:
    """The files of ``folder`` matching ``pattern``, sorted, without the hidden
    temporary files a killed write leaves (pathlib's glob matches dotfiles;
    the readers skip them)."""
    return sorted(file for file in folder.glob(pattern) if not file.name.startswith("."))


def output_rows(folder: Path) -> list[dict]:
    """Every record written under ``folder``, in canonical order."""
    return canonical([json.loads(line) for file in data_files(folder) for line in file.read_text().splitlines()])


def kept_texts(document_filter: DocumentFilter, *texts: str) -> list[str]:
    """The texts a ``ScoreFilter`` of ``document_filter`` keeps, in order."""
    batch = DocumentBatch(dataset_name="texts", data=pa.table({"text": list(texts)}))
    return ScoreFilter(document_filter).process(batch).to_pyarrow().column("text").to_pylist()


class ChunkAndFilter(ProcessingStage):
    """Fans each batch out into chunks of ``chunk`` rows and filters chunks
    whose first ``n`` is a multiple of 3; a batch with no chunk left is
    filtered whole. Exercises fan-out and both kinds of filter."""

    name = "chunk_and_filter"

    def __init__(self, chunk: int = 2) -> None:
        self.chunk = chunk

    def process(self, task: DocumentBatch) -> list[DocumentBatch | None] | None:
        table = task.to_pyarrow()
        chunks = [table.slice(start, self.chunk) for start in range(0, table.num_rows, self.chunk)]
        results = [
            None if chunk["n"][0].as_py() % 3 == 0 else DocumentBatch(dataset_name=task.dataset_name, data=chunk)
            for chunk in chunks
        ]
        return results if any(result is not None for result in results) else None


def expected_chunk_rows(input_rows: list[dict], chunk: int = 2) -> list[dict]:
    """What ``ChunkAndFilter`` keeps of one file's rows, computed without Beam."""
    kept = []
    for start in range(0, len(input_rows), chunk):
        part = input_rows[start:start + chunk]
        if part[0]["n"] % 3 != 0:
            kept.extend(part)
    return kept


class SlowLog(ProcessingStage):
    """Appends each task id to ``log_path`` and sleeps ``delay`` seconds: lets
    a test interrupt a run midway and see which partitions a rerun touched.
    With ``hold_after``, a task that finds that many ids logged before it waits
    (up to ``HOLD_S``): a run a test kills once some partitions are written
    cannot finish first, however slow the test's polling is under load."""

    name = "slow_log"
    HOLD_S = 120.0

    def __init__(self, log_path: str, delay: float, hold_after: int | None = None) -> None:
        self.log_path = log_path
        self.delay = delay
        self.hold_after = hold_after

    def fingerprint(self) -> object:
        """Where it logs and how long it waits change nothing it produces: a rerun may log elsewhere."""
        return {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        with open(self.log_path, "a+") as log:
            log.seek(0)
            held = self.hold_after is not None and len(log.read().splitlines()) >= self.hold_after
            log.write(task.task_id + "\n")
        time.sleep(self.HOLD_S if held else self.delay)
        return task


class FailOnce(ProcessingStage):
    """Raises on the first attempt at each partition, passes it on the next: an engine that retries
    failed tasks completes the run; ``marker_dir`` remembers the attempts across processes."""

    name = "fail_once"

    def __init__(self, marker_dir: str) -> None:
        self.marker_dir = marker_dir

    def process(self, task: DocumentBatch) -> DocumentBatch:
        marker = Path(self.marker_dir) / task.task_id
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            raise RuntimeError(f"first attempt at {task.task_id} fails on purpose")
        return task


def resume_pipeline(
    input_dir: str, output_dir: str, log_path: str, delay: float, shard: str | None = None,
    middle: str = "fan-out", hold_after: int | None = None,
) -> Pipeline:
    """Read one file per partition (only ``shard``'s, if given), log and wait, then the ``middle``
    stages, and write. ``middle``: "fan-out" (chunk each file's rows into tasks and filter some),
    "language" (identify each document's language) or "fineweb" (the filter command's FineWeb preset:
    datatrove's four rule sets, C4's rewriting the text of what it keeps). ``hold_after``: see ``SlowLog``."""
    if middle == "language":
        from beam_curator.stages.text.language import LanguageIdentifier

        stages: list[ProcessingStage] = [LanguageIdentifier(), SlowLog(log_path, delay, hold_after)]
    elif middle == "fineweb":
        from beam_curator.configs.filter_config import load_filter_config, preset_path

        stages = [*load_filter_config(preset_path("fineweb")).stages, SlowLog(log_path, delay, hold_after)]
    else:
        stages = [SlowLog(log_path, delay, hold_after), ChunkAndFilter(chunk=2)]
    return Pipeline("resume", stages=[
        JsonlReader(input_dir, files_per_partition=1, shard=shard), *stages, JsonlWriter(output_dir),
    ])


def killed_and_rerun(folder: Path, inputs: Path, files: int, middle: str) -> None:
    """Run ``resume_pipeline.py`` on ``inputs`` (``files`` JSONL files) with ``middle`` once through,
    then again SIGKILLed once a partition is marked, and rerun: the rerun skips the marked partitions,
    completes the rest, and writes what the uninterrupted run wrote."""
    def command(output: str, delay: float) -> list[str]:
        return [sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"), str(inputs), str(folder / output),
                str(folder / f"{output}-ckpt"), "--log", str(folder / f"{output}-{delay}.log"),
                "--delay", str(delay), "--middle", middle]

    environment = {**os.environ, "PYTHONPATH": scripts_pythonpath()}
    fresh = subprocess.run(command("fresh", 0), capture_output=True, text=True, timeout=180, env=environment)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    checkpoint = folder / "out-ckpt"
    with (folder / "first.txt").open("w") as console:
        first = subprocess.Popen(command("out", 0.5), stdout=console, stderr=subprocess.STDOUT, env=environment)
        deadline = time.monotonic() + 120
        while not (checkpoint.exists() and open_store(str(checkpoint)).completed()):
            assert first.poll() is None and time.monotonic() < deadline, (folder / "first.txt").read_text()[-3000:]
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    marked = open_store(str(checkpoint)).completed()
    assert 0 < len(marked) < files
    rerun = subprocess.run(command("out", 0), capture_output=True, text=True, timeout=180, env=environment)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert (summary["skipped"], summary["completed"]) == (len(marked), files - len(marked))
    assert output_rows(folder / "out") == output_rows(folder / "fresh")
