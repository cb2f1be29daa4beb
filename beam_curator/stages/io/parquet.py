"""Parquet: reader and writer, through pyarrow."""

from __future__ import annotations

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.reader import FileReader, FileReaderStage, FileRecords
from beam_curator.stages.io.writer import FileWriterStage
from beam_curator.tasks import FileBlock

# Parquet read through fsspec (a Python file object) without pre-buffering. Pre-buffered reads
# run on Arrow's IO threads; one still pending when the interpreter ends needs the GIL to free
# its Python buffer, and the process aborts (SIGABRT, "terminate called without an active
# exception"; apache/arrow#34314), measured here in 4% of short runs. fsspec's files buffer
# their reads themselves.
WITHOUT_PREBUFFER = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))


def read_table(handle: object, **options: object) -> pa.Table:
    """``pyarrow.parquet.read_table`` on an open fsspec file, without pre-buffering (see above)."""
    return pq.read_table(handle, pre_buffer=False, **options)


class ParquetReaderStage(FileReaderStage):
    """A block is a range ``[first, stop)`` of a file's row groups."""

    name = "parquet_reader"

    @staticmethod
    def split_file(path: str, size: int, blocksize: int) -> list[tuple[int, int]]:
        """Runs of consecutive row groups, each closed once it holds ``blocksize``
        bytes (as stored); a file of one row group is read whole."""
        with fsspec.open(path, "rb") as handle:
            metadata = _footer(path, handle)
        blocks, first, held = [], 0, 0
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            held += sum(group.column(column).total_compressed_size for column in range(group.num_columns))
            if held >= blocksize:
                blocks.append((first, index + 1))
                first, held = index + 1, 0
        if first < metadata.num_row_groups:
            blocks.append((first, metadata.num_row_groups))
        return blocks

    def rows_before(self, path: str, block: FileBlock) -> int:
        """The rows of the row groups before the block, from the file's footer."""
        with fsspec.open(path, "rb") as handle:
            metadata = _footer(path, handle)
        return sum(metadata.row_group(index).num_rows for index in range(block.start))

    def read_file(self, path: str, block: FileBlock | None = None) -> FileRecords:
        with fsspec.open(path, "rb") as handle:
            try:
                if block is None:
                    table = read_table(handle)
                else:
                    table = pq.ParquetFile(handle, pre_buffer=False).read_row_groups(range(block.start, block.stop))
            except (pa.ArrowInvalid, OSError) as error:
                raise _unreadable(path, error) from error
        rows = pa.array(range(table.num_rows), pa.int64())
        if self.fields is None:
            return FileRecords(table, rows)
        absent = [name for name in self.fields if name not in table.column_names]
        if absent:
            raise CuratorInputError(
                f"{path}: no column(s) {', '.join(absent)} (it has {', '.join(table.column_names)}); "
                "fix the fields argument or the file"
            )
        table = table.select(self.fields)
        valid = pa.compute.is_valid(table.column(self.fields[0]))
        for name in self.fields[1:]:
            valid = pa.compute.and_(valid, pa.compute.is_valid(table.column(name)))
        nulls = table.num_rows - pa.compute.sum(valid).as_py() if table.num_rows else 0
        if nulls:
            first = pa.compute.index(valid, False).as_py() + (self.rows_before(path, block) if block else 0)
            self.bad_record(path, f"row {first}", f"{nulls} row(s) with null in {', '.join(self.fields)}")
            table, rows = table.filter(valid), rows.filter(valid)
        return FileRecords(table, rows, nulls)


def _footer(path: str, handle: object) -> pq.FileMetaData:
    try:
        return pq.ParquetFile(handle, pre_buffer=False).metadata
    except (pa.ArrowInvalid, OSError) as error:
        raise _unreadable(path, error) from error


def _unreadable(path: str, error: Exception) -> CuratorInputError:
    return CuratorInputError(f"{path}: not a readable parquet file ({error}); replace or remove it")


class ParquetReader(FileReader):
    """Read ``.parquet`` files into DocumentBatches, one per file group."""

    extensions = (".parquet",)
    reader_stage = ParquetReaderStage


class ParquetWriter(FileWriterStage):
    """One ``<task_id>.parquet`` per task."""

    name = "parquet_writer"
    extension = "parquet"

    def serialize(self, table: pa.Table, handle) -> None:
        pq.write_table(table, handle)
