"""Parquet: reader and writer, through pyarrow, and the reads every phase makes of its own files."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from beam_curator.errors import store_outage_in
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.reader import FileReader, FileReaderStage, FileRecords
from beam_curator.stages.io.writer import FileWriterStage
from beam_curator.tasks import FileBlock

# Arrow's own threads never call into Python here. A file Arrow reads through a Python object (an
# fsspec file) makes its threads take the GIL, and a process whose Arrow threads did so may abort
# as the interpreter exits, after its work is done (SIGABRT, "terminate called without an active
# exception"; apache/arrow#34314): measured in 15% of scripts that read a small file 30 times, and
# in CI runs of user scripts. So a local file is opened by Arrow itself, whose threads then run only
# its C++ (0 aborts in 80 such scripts), and a file of any other filesystem is read on the calling
# thread, without pre-buffering (0 in 120).


class ParquetInput:
    """One parquet file, opened as the note above says; use it in a ``with`` block."""

    def __init__(self, url: str) -> None:
        fs, path = fsspec.core.url_to_fs(url)
        self.threads = isinstance(fs, LocalFileSystem)
        self._handle = None if self.threads else fs.open(path, "rb")
        try:
            self.file = pq.ParquetFile(path if self.threads else self._handle, pre_buffer=self.threads)
        except BaseException:
            self.close()
            raise

    def read(self, columns: Sequence[str] | None = None, row_groups: Sequence[int] | None = None) -> pa.Table:
        if row_groups is None:
            return self.file.read(columns=columns, use_threads=self.threads)
        return self.file.read_row_groups(row_groups, columns=columns, use_threads=self.threads)

    def iter_batches(self, batch_size: int, row_groups: Sequence[int], columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        return self.file.iter_batches(batch_size=batch_size, row_groups=row_groups, columns=columns,
                                      use_threads=self.threads)

    def close(self) -> None:
        self.file = None
        if self._handle is not None:
            self._handle.close()

    def __enter__(self) -> ParquetInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ParquetFolder:
    """The parquet files of a folder as one dataset (``partitioning``: ``"hive"``
    for ``name=value`` subfolders), opened as the note above says."""

    def __init__(self, url: str, partitioning: str | None = None) -> None:
        fs, path = fsspec.core.url_to_fs(url)
        self.threads = isinstance(fs, LocalFileSystem)
        scan = ds.ParquetFragmentScanOptions(pre_buffer=self.threads)
        self.dataset = ds.dataset(
            path, format=ds.ParquetFileFormat(default_fragment_scan_options=scan),
            filesystem=pafs.LocalFileSystem() if self.threads else fs, partitioning=partitioning,
        )

    @property
    def schema(self) -> pa.Schema:
        return self.dataset.schema

    def count_rows(self) -> int:
        return self.dataset.count_rows(use_threads=self.threads)

    def to_table(self, columns: Sequence[str] | None = None, filter: ds.Expression | None = None) -> pa.Table:
        return self.dataset.to_table(columns=columns, filter=filter, use_threads=self.threads)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self.dataset.to_batches(use_threads=self.threads)


def parquet_files(url: str) -> list[str]:
    """The parquet files directly in ``url``, sorted, as URLs of ``url``'s
    filesystem (``gs://...``, ``memory://...``, or local paths); none if it
    does not exist.

    Hidden files are left out: a writer killed mid-write can leave a
    ``.tmp-*`` file behind, which is not data.
    """
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return []
    found = sorted(file for file in fs.glob(f"{path}/*.parquet") if not file.rsplit("/", 1)[-1].startswith("."))
    return found if isinstance(fs, LocalFileSystem) else [fs.unstrip_protocol(file) for file in found]


def read_parquet(url: str, columns: Sequence[str] | None = None, filters: ds.Expression | None = None) -> pa.Table:
    """One parquet file of any filesystem fsspec knows, as a table (only the rows
    ``filters`` keeps: row groups whose statistics rule them out are not read);
    one that cannot be read is an error naming it."""
    fs, path = fsspec.core.url_to_fs(url)
    with _readable(url):
        if isinstance(fs, LocalFileSystem):
            return pq.read_table(path, columns=columns, filters=filters)
        with fs.open(path, "rb") as handle:
            return pq.read_table(handle, columns=columns, filters=filters, pre_buffer=False, use_threads=False)


# What to do about a file that cannot be read: one a phase wrote, or one of the input.
_PHASE_FILE = "if it is in the cache, delete it and rerun to compute it again, otherwise replace it"
_INPUT_FILE = "replace or remove it"


def parquet_metadata(url: str, advice: str = _PHASE_FILE) -> pq.FileMetaData:
    """The footer of one parquet file (row count, schema); an error naming it if unreadable."""
    with _readable(url, advice), ParquetInput(url) as parquet:
        return parquet.file.metadata


@contextmanager
def _readable(url: str, advice: str = _PHASE_FILE) -> Iterator[None]:
    """A failed read as an error naming the file and what to do, unless the
    object store failed rather than the file: then the store's error."""
    try:
        yield
    except (pa.ArrowException, OSError) as error:
        outage = store_outage_in(error)
        if outage is not None:
            raise outage from error
        raise CuratorInputError(f"{url}: not a readable parquet file ({error}); {advice}") from error


class ParquetReaderStage(FileReaderStage):
    """A block is a range ``[first, stop)`` of a file's row groups."""

    name = "parquet_reader"

    @staticmethod
    def split_file(path: str, size: int, blocksize: int) -> list[tuple[int, int]]:
        """Runs of consecutive row groups, each closed once it holds ``blocksize``
        bytes (as stored); a file of one row group is read whole."""
        metadata = parquet_metadata(path, _INPUT_FILE)
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
        metadata = parquet_metadata(path, _INPUT_FILE)
        return sum(metadata.row_group(index).num_rows for index in range(block.start))

    def read_file(self, path: str, block: FileBlock | None = None) -> FileRecords:
        with _readable(path, _INPUT_FILE), ParquetInput(path) as parquet:
            table = parquet.read(row_groups=None if block is None else range(block.start, block.stop))
        rows, fields = pa.array(range(table.num_rows), pa.int64()), self.fields_in(path)
        if not fields:  # every column (None), or none but those the file's folders give ([])
            return FileRecords(table if fields is None else table.select([]), rows)
        absent = [name for name in fields if name not in table.column_names]
        if absent:
            raise CuratorInputError(
                f"{path}: no column(s) {', '.join(absent)} (it has {', '.join(table.column_names)}); "
                "fix the fields argument or the file"
            )
        table = table.select(fields)
        valid = pa.compute.is_valid(table.column(fields[0]))
        for name in fields[1:]:
            valid = pa.compute.and_(valid, pa.compute.is_valid(table.column(name)))
        nulls = table.num_rows - pa.compute.sum(valid).as_py() if table.num_rows else 0
        if nulls:
            first = pa.compute.index(valid, False).as_py() + (self.rows_before(path, block) if block else 0)
            self.bad_record(path, f"row {first}", f"{nulls} row(s) with null in {', '.join(fields)}")
            table, rows = table.filter(valid), rows.filter(valid)
        return FileRecords(table, rows, nulls)


class ParquetReader(FileReader):
    """Read ``.parquet`` files into DocumentBatches, one per file group."""

    extensions = (".parquet",)
    reader_stage = ParquetReaderStage


class ParquetWriter(FileWriterStage):
    """One ``<task_id>.parquet`` per task."""

    name = "parquet_writer"
    extension = "parquet"

    def serialize(self, table: pa.Table, handle) -> None:
        write_table(table, handle)


def write_table(table: pa.Table, handle, **options: object) -> None:
    """``pq.write_table``, with vector columns (lists) written plain: Parquet's
    defaults try a dictionary for every column and collect min/max statistics
    for every value, which on float vectors, that neither repeat nor
    compress, made writing three to five times slower than the bytes need
    (measured on 256- and 384-d rows). The other columns keep dictionaries
    and statistics."""
    vectors = [field.name for field in table.schema if pa.types.is_list(field.type) or pa.types.is_fixed_size_list(field.type)]
    if vectors:
        others = [name for name in table.column_names if name not in vectors]
        options = {"use_dictionary": others, "write_statistics": others, **options}
    pq.write_table(table, handle, **options)
