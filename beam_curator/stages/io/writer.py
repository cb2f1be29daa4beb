"""Replay-safe file sinks.

Each task becomes one file, written under a temporary name and renamed into
place. Its name, ``<input-stem>-<short-id>.<ext>``, is a function of the
task alone: the stem of the first input file it was read from (so a user
sees which input an output came from) and 16 hex digits of a hash of its
lineage id (so names are unique). A replayed partition therefore overwrites
its own files instead of adding duplicates, and a reader never sees half a
file. Beam's own file sinks finalise only at the end of a run,
which would leave nothing durable to checkpoint against.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import BinaryIO

import pyarrow as pa

from beam_curator.stages.base import ProcessingStage
from beam_curator.tasks import DocumentBatch, FileGroupTask, Task
from beam_curator.writing import write_atomically


class FileWriterStage(ProcessingStage):
    """Writes each DocumentBatch to ``<path>/<file_stem(task)>.<extension>``; returns the file as a FileGroupTask.

    The result's ``_metadata["written"]`` records the file (name relative to
    ``path``, bytes, records): the checkpoint keeps it with the partition's
    completion, and a rerun re-runs a partition whose file is gone or changed.
    """

    extension = ""

    def __init__(self, path: str, fields: list[str] | None = None, extension: str | None = None) -> None:
        self.path = path.rstrip("/")
        self.fields = fields
        if extension:  # the format's usual ending otherwise
            self.extension = extension.lstrip(".")

    @abstractmethod
    def serialize(self, table: pa.Table, handle: BinaryIO) -> None:
        """Write the table's records to an open binary file."""

    def file_stem(self, task: DocumentBatch) -> str:
        """The file's name without extension (``output_name``): the same on
        every replay of the task, so that a replay overwrites instead of duplicating."""
        return output_name(task)

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.to_pyarrow()
        if self.fields:
            table = table.select(self.fields)
        name = f"{self.file_stem(task)}.{self.extension}"
        size = write_atomically(f"{self.path}/{name}", lambda handle: self.serialize(table, handle))
        result = FileGroupTask(dataset_name=task.dataset_name, data=[f"{self.path}/{name}"])
        result._metadata = {**task._metadata, "num_records": table.num_rows, "written": [[name, size, table.num_rows]]}
        return result


def output_name(task: Task) -> str:
    """``<stem>-<short-id>``: the stem of the task's first source file (``part``
    when it has none) and a hash of its lineage id, which is what keeps the
    name unique and the same on every replay."""
    sources = task._metadata.get("source_files") or []
    stem = _stem(sources[0]) if sources else "part"
    return f"{stem}-{hashlib.sha256(task.task_id.encode()).hexdigest()[:16]}"


def _stem(path: str) -> str:
    """``a/b/deb-00.jsonl.gz`` -> ``deb-00``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0] or name

