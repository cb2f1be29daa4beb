"""Replay-safe file sinks.

Each task becomes one file, written under a temporary name and renamed into
place. Its name, ``<input-stem>-<short-id>.<ext>``, is a function of the
task alone: the stem of the first input file it was read from (so a user
sees which input an output came from) and 16 hex digits of a hash of its
lineage id (so names are unique). A replayed partition therefore overwrites
its own files instead of adding duplicates, and a reader never sees half a
file. Beam's own file sinks finalise only at the end of a run,
which would leave nothing durable to checkpoint against.

With ``partition_cols`` (pyarrow's and pandas' name) a task's documents are
split into hive folders, ``<path>/language=de/<input-stem>-<short-id>.<ext>``:
one file per value, each written and recorded as an unsplit output is, so a
file missing from any folder makes its partition run again. The columns are
left out of the files and taken from the folder names, as pyarrow, Spark and
DuckDB write and read hive datasets (``hive``); the readers restore them.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import BinaryIO

import pyarrow as pa

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.io.hive import remove_stale, split_by_columns
from beam_curator.tasks import DocumentBatch, FileGroupTask, Task
from beam_curator.writing import write_atomically


class FileWriterStage(ProcessingStage):
    """Writes each DocumentBatch to ``<path>/<file_stem(task)>.<extension>``; returns the file as a FileGroupTask.

    The result's ``_metadata["written"]`` records the file (name relative to
    ``path``, bytes, records): the checkpoint keeps it with the partition's
    completion, and a rerun re-runs a partition whose file is gone or changed.

    ``partition_cols`` (a column or a list, as pyarrow's ``write_to_dataset``)
    writes one file per value into ``<path>/<column>=<value>/`` instead (see
    the module's note): all of them are recorded, and a task written again
    removes its own files from folders of values it no longer has.
    """

    extension = ""

    def __init__(self, path: str, fields: list[str] | None = None, extension: str | None = None,
                 partition_cols: str | list[str] | None = None) -> None:
        self.path = path.rstrip("/")
        self.fields = fields
        if extension:  # the format's usual ending otherwise
            self.extension = extension.lstrip(".")
        self.partition_cols = [partition_cols] if isinstance(partition_cols, str) else list(partition_cols or [])

    def fingerprint(self) -> object:
        """The settings; ``partition_cols`` only where set, so that checkpoints made by
        unsplit writers before the setting existed stay valid."""
        settings = super().fingerprint()
        if not self.partition_cols:
            del settings["partition_cols"]
        return settings

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
            table = table.select(list(dict.fromkeys([*self.fields, *self.partition_cols])))
        name = f"{self.file_stem(task)}.{self.extension}"
        parts = split_by_columns(table, self.partition_cols) if self.partition_cols else {"": table}
        written = [self._write(f"{folder}/{name}" if folder else name, part) for folder, part in parts.items()]
        if self.partition_cols:
            remove_stale(self.path, name, self.partition_cols, set(parts))
        result = FileGroupTask(dataset_name=task.dataset_name, data=[f"{self.path}/{record[0]}" for record in written])
        result._metadata = {**task._metadata, "num_records": table.num_rows, "written": written}
        return result

    def _write(self, name: str, table: pa.Table) -> list:
        """Write ``table`` to ``<path>/<name>``; its record ``[name, bytes, records]``."""
        size = write_atomically(f"{self.path}/{name}", lambda handle: self.serialize(table, handle))
        return [name, size, table.num_rows]


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

