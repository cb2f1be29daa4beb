"""Stages and file helpers shared by the engine tests and ``resume_pipeline.py``.

They live in an importable module (not a test file, not ``__main__``)
because Beam workers in other processes unpickle stages by module reference;
tests put this folder on ``PYTHONPATH`` for them (see ``scripts_pythonpath``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from beam_curator import Pipeline
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.io.writer import output_name
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


def output_rows(folder: Path) -> list[dict]:
    """Every record written under ``folder``, in canonical order (hidden
    temporary files of an interrupted write are not output)."""
    files = [file for file in folder.glob("*.jsonl") if not file.name.startswith(".")]
    return canonical([json.loads(line) for file in files for line in file.read_text().splitlines()])


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
    a test interrupt a run midway and see which partitions a rerun touched."""

    name = "slow_log"

    def __init__(self, log_path: str, delay: float) -> None:
        self.log_path = log_path
        self.delay = delay

    def fingerprint(self) -> object:
        """Where it logs and how long it waits change nothing it produces: a rerun may log elsewhere."""
        return {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        with open(self.log_path, "a") as log:
            log.write(task.task_id + "\n")
        time.sleep(self.delay)
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
    identify_language: bool = False,
) -> Pipeline:
    """Read one file per partition (only ``shard``'s, if given), log and wait, fan out and filter, write;
    with ``identify_language``, identify each document's language in place of the fan-out and filter."""
    if identify_language:
        from beam_curator.stages.text.language import LanguageIdentifier

        middle: list[ProcessingStage] = [LanguageIdentifier(), SlowLog(log_path, delay)]
    else:
        middle = [SlowLog(log_path, delay), ChunkAndFilter(chunk=2)]
    return Pipeline("resume", stages=[
        JsonlReader(input_dir, files_per_partition=1, shard=shard), *middle, JsonlWriter(output_dir),
    ])
