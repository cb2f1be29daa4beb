"""One small pipeline on every runner preset that works offline: the same rows,
the same files, every partition marked, and a second run that skips it all."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import (  # noqa: E402
    ChunkAndFilter,
    canonical,
    expected_chunk_rows,
    output_rows,
    source_id,
    scripts_pythonpath,
    write_corpus,
    written_file,
)

from beam_curator import Pipeline  # noqa: E402
from beam_curator.checkpoint import open_store  # noqa: E402
from beam_curator.runners import usable_cores  # noqa: E402
from beam_curator.stages import ProcessingStage  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.tasks import DocumentBatch  # noqa: E402
from stages_for_tests import writer_pids  # noqa: E402

FILES = 4


def pipeline(input_dir: Path, output_dir: Path) -> Pipeline:
    return Pipeline("runners", stages=[
        JsonlReader(str(input_dir), files_per_partition=1),
        ChunkAndFilter(chunk=2),
        JsonlWriter(str(output_dir)),
    ])


def expectations(input_dir: Path) -> tuple[list[dict], set[str], set[str]]:
    """Rows, file names and partition ids, worked out without Beam."""
    rows, names, partitions = [], set(), set()
    for file in sorted(input_dir.glob("*.jsonl")):
        kept = expected_chunk_rows([json.loads(line) for line in file.read_text().splitlines()])
        partitions.add(source_id([file]))
        rows += kept
        # reader: one-to-one (_0); chunker: kept chunks by position.
        names |= {written_file(input_dir, file, f"_0_{i}").name for i in range((len(kept) + 1) // 2)}
    return canonical(rows), names, partitions


def snapshot(folder: Path) -> dict[str, int]:
    return {file.name: file.stat().st_mtime_ns for file in folder.iterdir()}


@pytest.mark.slow
@pytest.mark.parametrize("runner, settings", [
    ("local", {}),
    ("local", {"num_workers": 2}),  # threads of this process
    ("local-multiprocess", {"num_workers": 2}),
    ("portable", {}),
    ("in-process", {}),  # no Beam pipeline: the same DoFns in this thread
])
def test_runner_writes_the_same_rows_and_a_rerun_skips_everything(
    runner: str, settings: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", scripts_pythonpath())  # workers in other processes import the stages
    input_dir = write_corpus(tmp_path / "in", FILES)
    output_dir, checkpoint = tmp_path / "out", str(tmp_path / "ckpt")
    rows, names, partitions = expectations(input_dir)
    assert len(names) >= 3 and len(partitions) == FILES  # the corpus fans out and filters

    first = pipeline(input_dir, output_dir).run(checkpoint_path=checkpoint, runner=runner, **settings)
    assert (first.partitions_pending, first.partitions_skipped) == (FILES, 0)
    assert first.partitions_completed == FILES
    assert output_rows(output_dir) == rows
    assert {file.name for file in output_dir.iterdir()} == names
    assert open_store(checkpoint).completed() == partitions
    writers = writer_pids(Path(checkpoint))
    # Marks are written where the work ran: in this process, or in the worker processes.
    assert (writers == {os.getpid()}) == (runner != "local-multiprocess"), writers

    written = snapshot(output_dir)
    second = pipeline(input_dir, output_dir).run(checkpoint_path=checkpoint, runner=runner, **settings)
    assert (second.partitions_pending, second.partitions_skipped, second.partitions_completed) == (0, FILES, 0)
    assert snapshot(output_dir) == written, "a rerun of a complete checkpoint must write nothing"


def test_memory_checkpoint_on_the_local_runner(tmp_path: Path) -> None:
    """The fsspec store in a real run: in-process workers share ``memory://``."""
    input_dir = write_corpus(tmp_path / "in", FILES)
    checkpoint = f"memory://{tmp_path.name}/ckpt"
    _, _, partitions = expectations(input_dir)
    first = pipeline(input_dir, tmp_path / "out").run(checkpoint_path=checkpoint, runner="local")
    assert first.partitions_completed == FILES
    assert open_store(checkpoint).completed() == partitions
    second = pipeline(input_dir, tmp_path / "out").run(checkpoint_path=checkpoint, runner="local")
    assert (second.partitions_pending, second.partitions_skipped) == (0, FILES)
    open_store(checkpoint).reset()


class MergeBatches(ProcessingStage):
    """Merges each batch into one task: M inputs, one output."""

    batch_size = 8

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task

    def process_batch(self, tasks: list[DocumentBatch]) -> list[DocumentBatch]:
        return [DocumentBatch(data=pa.concat_tables([task.to_pyarrow() for task in tasks]))]


@pytest.mark.parametrize("runner", ["local", "in-process"])
def test_a_batch_stage_merging_partitions_marks_every_one_of_them(runner: str, tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", FILES)
    _, _, partitions = expectations(input_dir)
    summary = Pipeline("merge", stages=[
        JsonlReader(str(input_dir)), MergeBatches(), JsonlWriter(str(tmp_path / "out")),
    ]).run(checkpoint_path=str(tmp_path / "ckpt"), runner=runner)
    assert summary.partitions_completed == FILES
    assert open_store(str(tmp_path / "ckpt")).completed() == partitions
    lines = [line for file in input_dir.glob("*.jsonl") for line in file.read_text().splitlines()]
    every_row = canonical([json.loads(line) for line in lines])
    assert output_rows(tmp_path / "out") == every_row


class ThreadTag(ProcessingStage):
    """Tags rows with the thread that processed them, and holds its thread a
    moment so that another one takes the next partition meanwhile."""

    name = "thread_tag"

    def process(self, task: DocumentBatch) -> DocumentBatch:
        import threading
        import time

        time.sleep(0.2)
        table = task.to_pyarrow()
        table = table.append_column("thread", pa.array([threading.get_ident()] * table.num_rows, pa.int64()))
        return DocumentBatch(dataset_name=task.dataset_name, data=table, _metadata=task._metadata)


@pytest.mark.parametrize("num_workers", [None, 2])
def test_the_local_runner_runs_bundles_on_num_workers_threads(num_workers: int | None, tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", FILES)
    Pipeline("threads", stages=[
        JsonlReader(str(input_dir), files_per_partition=1), ThreadTag(), JsonlWriter(str(tmp_path / "out")),
    ]).run(str(tmp_path / "ckpt"), "local", num_workers=num_workers)
    threads = {row["thread"] for row in output_rows(tmp_path / "out")}
    assert len(threads) == (num_workers or min(usable_cores(), FILES)), threads
