"""Shared reading logic: FileGroupTask in, DocumentBatch out.

Bad records follow ``on_bad_record``: ``"raise"`` (default) stops the run with
an error naming the file and line, so nothing is silently lost and the
partition stays pending; ``"skip"`` drops the record, logs where it was, and
counts it in the batch's ``_metadata["skipped_records"]``.

A file in ``<column>=<value>`` folders below a folder or glob read (a hive
dataset: our writers' ``partition_cols``, pyarrow's, Spark's) gets each such
column with its folder's value, as a string (null for
``__HIVE_DEFAULT_PARTITION__``), as pyarrow and Spark read these folders; the
folder's value wins over a column of that name inside the file, as in pyarrow.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.errors import check_on_bad_record
from beam_curator.stages.base import CompositeStage, ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.hive import partition_values
from beam_curator.stages.io.partitioning import FilePartitioningStage
from beam_curator.stages.io.sharding import ShardSpec
from beam_curator.tasks import DocumentBatch, FileBlock, FileGroupTask

logger = logging.getLogger(__name__)


@dataclass
class FileRecords:
    """What a reader read from one file, or from one block of it: the records
    (only the requested fields), the row number of each counted from the start
    of what was read, and how many bad records were skipped.

    Row numbers count the physical records (lines of JSON Lines, rows of
    Parquet), blank and bad ones included, so that a record's row number
    does not depend on which fields were read or which records were skipped."""

    table: pa.Table
    rows: pa.Array
    skipped: int = 0


class FileReaderStage(ProcessingStage):
    """Reads every file of a group, or one block of one file, into one DocumentBatch.

    ``file_column`` / ``row_column`` (off by default) add each record's file
    and its row number within that file: a locator that does not depend on
    how files were grouped into partitions or split into blocks. ``roots``
    are the inputs the files were listed from (folders, globs or files), below
    which ``<column>=<value>`` folders give columns (see the module's note).
    """

    def __init__(
        self,
        fields: list[str] | None = None,
        on_bad_record: str = "raise",
        file_column: str | None = None,
        row_column: str | None = None,
        roots: str | list[str] | None = None,
    ) -> None:
        check_on_bad_record(on_bad_record)
        self.fields = list(fields) if fields else None
        self.on_bad_record = on_bad_record
        self.file_column = file_column
        self.row_column = row_column
        # Where the input is, like the partitioning stage's file_paths, is not a setting of the
        # checkpoint: a moved input keeps its marks.
        self._roots = [roots] if isinstance(roots, str) else list(roots or [])

    @abstractmethod
    def read_file(self, path: str, block: FileBlock | None = None) -> FileRecords:
        """The records of the file, or of ``block`` of it (see ``split_file``)."""

    @staticmethod
    def split_file(path: str, size: int, blocksize: int) -> list[tuple[int, int]]:
        """The blocks a file of ``size`` bytes splits into, about ``blocksize`` bytes
        each, in the format's units; none (read whole) for formats that cannot split."""
        return []

    def rows_before(self, path: str, block: FileBlock) -> int:
        """How many physical records of the file come before ``block``."""
        raise NotImplementedError(f"{type(self).__name__} reads no blocks")

    def partition_values(self, path: str) -> dict[str, str | None]:
        """The columns the file's hive folders give it (see the module's note), of those requested."""
        given = partition_values(path, self._roots) if self._roots else {}
        return {name: value for name, value in given.items() if self.fields is None or name in self.fields}

    def fields_in(self, path: str) -> list[str] | None:
        """The requested fields to read from the file itself (None: every field): all but those
        its folders give."""
        if self.fields is None:
            return None
        given = self.partition_values(path)
        return [name for name in self.fields if name not in given]

    def bad_record(self, path: str, where: str, problem: str) -> None:
        message = f"{path}, {where}: {problem}"
        if self.on_bad_record == "raise":
            raise CuratorInputError(
                f"{message}. Fix or remove the record, or read with on_bad_record='skip' "
                "(beam-curator: --on-bad-record skip) to drop and count such records"
            )
        logger.warning("skipping bad record in %s", message)

    def process(self, task: FileGroupTask) -> DocumentBatch:
        tables, empty, skipped = [], None, 0
        for path in task.data:
            records = self.read_file(path, task.block)
            table = records.table
            skipped += records.skipped
            if table.num_rows == 0:
                if task.block is None:
                    logger.warning("input file %s holds no records", path)
                empty = table
                continue
            if self.row_column:
                rows = records.rows
                if task.block is not None:
                    rows = pc.add(rows, self.rows_before(path, task.block))
                table = table.append_column(self.row_column, rows)
            if self.file_column:
                table = table.append_column(self.file_column, pa.array([path] * table.num_rows, pa.string()))
            for name, value in self.partition_values(path).items():
                column = pa.array([value] * table.num_rows, pa.string())
                table = (table.set_column(table.column_names.index(name), name, column) if name in table.column_names
                         else table.append_column(name, column))
            tables.append(table)
        if tables:
            data = pa.concat_tables(tables, promote_options="permissive")
        else:  # keep the requested columns, so that writers selecting fields still work
            data = empty if empty is not None else pa.table({})
        batch = DocumentBatch(dataset_name=task.dataset_name, data=data)
        batch._metadata = {**task._metadata, "source_files": list(task.data), "skipped_records": skipped}
        return batch


class FileReader(CompositeStage):
    """A reader as users add it: partition the files (the source), then read each group.

    ``blocksize`` (bytes, or ``"128MiB"``; NeMo's name) groups small files up to
    that size and splits a larger file into blocks of about that size, each a
    partition of its own (see ``FilePartitioningStage``): an interrupted run
    keeps the blocks it finished, and the progress bar counts them.
    ``fingerprint`` (None, ``"stat"`` or ``"content"``) says whether a finished
    partition whose files changed since runs again; see ``FilePartitioningStage``.
    ``extensions`` replaces the format's usual file name endings.
    ``shard`` (``(index, count)``, ``"INDEX/COUNT"``, ``"slurm"`` or
    ``"slurm/COUNT"``) reads only one shard of the partitions, for job arrays
    sharing a checkpoint; see ``FilePartitioningStage``.
    """

    extensions: tuple[str, ...] = ()
    reader_stage: type[FileReaderStage]

    def __init__(
        self,
        file_paths: str | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        fields: list[str] | None = None,
        on_bad_record: str = "raise",
        file_column: str | None = None,
        row_column: str | None = None,
        fingerprint: str | None = None,
        extensions: list[str] | tuple[str, ...] | None = None,
        shard: ShardSpec = None,
    ) -> None:
        self.partitioning = FilePartitioningStage(
            file_paths, files_per_partition, blocksize, tuple(extensions or self.extensions), fingerprint=fingerprint,
            shard=shard, split_file=self.reader_stage.split_file,
        )
        self.reader = self.reader_stage(fields, on_bad_record, file_column, row_column, file_paths)

    def decompose(self) -> list[ProcessingStage]:
        return [self.partitioning, self.reader]
