"""Parquet: reader and writer, through pyarrow."""

from __future__ import annotations

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.reader import FileReader, FileReaderStage
from beam_curator.stages.io.writer import FileWriterStage

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
    name = "parquet_reader"

    def read_file(self, path: str) -> tuple[pa.Table, int]:
        with fsspec.open(path, "rb") as handle:
            try:
                table = read_table(handle)
            except (pa.ArrowInvalid, OSError) as error:
                raise CuratorInputError(f"{path}: not a readable parquet file ({error}); replace or remove it") from error
        if self.fields is None:
            return table, 0
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
            first = pa.compute.index(valid, False).as_py()
            self.bad_record(path, f"row {first}", f"{nulls} row(s) with null in {', '.join(self.fields)}")
            table = table.filter(valid)
        return table, nulls


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
