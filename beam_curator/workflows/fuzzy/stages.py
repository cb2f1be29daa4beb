"""The Beam stages of fuzzy deduplication, around the kernels of ``dedup.fuzzy``.

``MinHashStage`` turns one input file's documents into ``(id,
_minhash_signature, file, row)``; ``BandKeysStage`` turns one signature file
into each document's key in every band, routed to the LSH task of its band
range and partition (the one its band's first value picks);
``LSHBucketsStage`` is one such task: it reads its own records from every
band-key file (skipping the row groups of other tasks) and lists the ids of
each bucket holding two or more documents; ``BucketEdgesStage`` turns one
such file into edges. Partitions bound what a task holds: ``1 / partitions``
of the ``(key, id)`` records of ``bands_per_iteration`` bands; and each
record is read by one task, so the LSH phase reads its input about once
whatever the number of tasks.

Connected components beyond memory go in rounds: ``ScatterEdgesStage``
routes each edge file's rows to their keys' buckets, ``StarRoundStage`` runs
one star step on one bucket's rows, ``StarLabelsStage`` reads the groups off
a settled round, and ``LaterMembersStage`` lists every id but its group's least.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from beam_curator.dedup.fuzzy.components import (
    KEY,
    NEIGHBOR,
    both_ways,
    distinct,
    labels_from_bounds,
    large_star_rows,
    merged_bounds,
    settled_bounds,
    small_star_keys,
    small_star_rows,
)
from beam_curator.dedup.fuzzy.lsh import band_keys, buckets, path_edges
from beam_curator.dedup.fuzzy.minhash import signatures
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.parquet import ParquetInput, parquet_files, read_parquet
from beam_curator.tasks import DocumentBatch, FileGroupTask
from beam_curator.workflows.per_file import ROWS_PER_GROUP, HashesWriter, document_places
from beam_curator.workflows.semantic.id_check import BucketWriter, IdBucketTask, bucket_of
from beam_curator.writing import write_atomically

MINHASH_FIELD = "_minhash_signature"  # NeMo Curator's column names
BUCKET_FIELD = "_bucket_id"
BAND_KEY = "_band_key"  # a band's number and values, as one fixed-size binary value
GROUP_FIELD = "_duplicate_group_id"
TO, SETTLED = "_to", "_settled"  # a row's bucket (its key's), and whether its task's input was settled
# The rows a star-round task reads at a time (it holds one such batch, its output, and one row per key).
ROWS_PER_BATCH = 1 << 20


class MinHashStage(ProcessingStage):
    """One input file's documents in, their MinHash signatures out."""

    name = "minhash"

    def __init__(self, text_field: str, id_column: str, seeds: np.ndarray, char_ngrams: int) -> None:
        self.text_field = text_field
        self.id_column = id_column
        self.seeds = seeds
        self.char_ngrams = char_ngrams

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        (source,) = task._metadata["source_files"]  # the workflow reads one file (or one block of it) per partition
        values = signatures(table.column(self.text_field).to_pylist(), self.seeds, self.char_ngrams)
        offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
        result = DocumentBatch(dataset_name=task.dataset_name, data=pa.table({
            self.id_column: table.column(self.id_column),
            MINHASH_FIELD: pa.ListArray.from_arrays(offsets, pa.array(values.ravel())),
            **document_places(source, table.column(self.id_column), self.id_column),
        }))
        result._metadata = dict(task._metadata)
        return result


def band_range_name(first: int, last: int) -> str:
    return f"band_{first}-band_{last}"  # NeMo Curator's folder per band iteration


class BandKeysStage(ProcessingStage):
    """Task ``n``: the ``n``-th group of signature files in, their documents'
    keys in every band out, each record tagged with its LSH task (``_to``:
    band range ``i`` and partition ``p`` make task ``i * partitions + p``)
    and written, sorted by it, to ``<folder>/part.<n>.parquet`` (the step's
    sink), one band range at a time: the task holds one file's signatures
    and the group's records of one band range, and so reads each signature
    file once per band range (four reads of ~1 KB per document at NeMo's
    defaults, where holding every range's records would take four times the memory). Groups of many small files
    keep the band-key files few and large, so that an LSH task finds its
    records in a few row groups of each (``file_groups``)."""

    name = "band_keys"
    is_sink_stage = True
    unit = "group"  # of signature files: one task each

    def __init__(self, groups: list[list[str]], id_column: str, band_ranges: list[range],
                 minhashes_per_band: int, partitions: int, folder: str) -> None:
        self.groups = groups
        self.id_column = id_column
        self.band_ranges = band_ranges
        self.minhashes_per_band = minhashes_per_band
        self.partitions = partitions
        self.folder = folder.rstrip("/")

    def _records(self, url: str, number: int, bands: range) -> pa.Table:
        """The records of one signature file in the bands of range ``number``."""
        table = read_parquet(url, [self.id_column, MINHASH_FIELD])
        column = table.column(MINHASH_FIELD).combine_chunks()
        values = column.values.to_numpy().reshape(len(column), self.band_ranges[-1].stop * self.minhashes_per_band)
        keys, first = band_keys(values, bands, self.minhashes_per_band)
        to = number * self.partitions + (first % self.partitions).astype(np.int64)
        return pa.table({
            BAND_KEY: _as_binary(keys),
            self.id_column: pa.concat_arrays([table.column(self.id_column).combine_chunks()] * len(bands)),
            TO: pa.array(to.astype(np.int32)),
        })

    def _routed(self, records: pa.Table) -> pa.Table:
        """One band range's records sorted by task; with one partition they all go
        to one task already (the sort, a copy of every band key, took a tenth of the step)."""
        return records.sort_by(TO) if self.partitions > 1 else records

    def process(self, task: IdBucketTask) -> FileGroupTask:
        files = self.groups[task.data]
        ranges = (self._routed(pa.concat_tables([self._records(url, number, bands) for url in files]))
                  for number, bands in enumerate(self.band_ranges))
        first = next(ranges)
        return written_in_pieces(self.folder, f"part.{task.data}.parquet", first.schema,
                                 itertools.chain([first], ranges), task.data, "band_keys")


def _as_binary(keys: np.ndarray) -> pa.FixedSizeBinaryArray:
    """Keys viewed as opaque values (``band_keys``'s void dtype) as Arrow's fixed-size binary."""
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(keys.dtype.itemsize), len(keys),
                                                [None, pa.py_buffer(keys.tobytes())])


def file_groups(files: list[str], rows: list[int], limit: int) -> list[list[str]]:
    """Consecutive ``files`` in groups of at most ``limit`` rows (``rows``
    per file; a larger file makes a group of its own)."""
    groups: list[list[str]] = []
    held = limit
    for url, count in zip(files, rows):
        if held + count > limit:
            groups.append([])
            held = 0
        groups[-1].append(url)
        held += count
    return groups


class LSHBucketsStage(ProcessingStage):
    """Task ``n`` is band range ``n // partitions``, partition ``n % partitions``:
    the buckets of two or more documents among the band-key records routed to it."""

    name = "lsh_buckets"

    def __init__(self, band_keys: str, id_column: str, band_ranges: list[range], partitions: int) -> None:
        self.band_keys = band_keys
        self.id_column = id_column
        self.band_ranges = band_ranges
        self.partitions = partitions

    def process(self, task: IdBucketTask) -> DocumentBatch:
        bands = self.band_ranges[task.data // self.partitions]
        columns = [BAND_KEY, self.id_column]
        parts = list(batches_of_bucket(self.band_keys, task.data, ROWS_PER_BATCH, columns))
        records = pa.concat_tables(parts) if parts else _row_schema(self.band_keys, columns).empty_table()
        column, ids = records.column(BAND_KEY).combine_chunks(), records.column(self.id_column).combine_chunks()
        del records  # its chunks, copied into one array each, go before bucketing
        width = column.type.byte_width
        keys = np.frombuffer(column.buffers()[1], np.dtype((np.void, width)), len(column), column.offset * width)
        found_keys, found_ids, offsets = buckets(keys, ids)
        del column, ids, keys
        result = DocumentBatch(dataset_name="lsh_buckets", data=pa.table({
            BUCKET_FIELD: _as_binary(found_keys),
            self.id_column: pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), found_ids),
        }))
        result._metadata = {"bucket": f"{band_range_name(bands.start, bands.stop)}/part.{task.data % self.partitions}"}
        return result


class BucketEdgesStage(ProcessingStage):
    """One bucket file in (task ``n``: the ``n``-th file, by name), its edges ``(<id>_x, <id>_y)`` out."""

    name = "buckets_to_edges"

    def __init__(self, bucket_files: list[str], names: list[str], id_column: str) -> None:
        self.bucket_files = bucket_files
        self.names = names
        self.id_column = id_column

    def process(self, task: IdBucketTask) -> DocumentBatch:
        lists = read_parquet(self.bucket_files[task.data], [self.id_column]).column(0).combine_chunks()
        x, y = path_edges(lists.values, lists.offsets.to_numpy())
        result = DocumentBatch(dataset_name="edges", data=pa.table({f"{self.id_column}_x": x, f"{self.id_column}_y": y}))
        result._metadata = {"bucket": self.names[task.data]}
        return result


def _routed(table: pa.Table, buckets: int, settled_input: bool) -> pa.Table:
    """Rows tagged with their key's bucket and sorted by it (see ``RoundWriter``)."""
    to = bucket_of(table[KEY].combine_chunks().to_numpy(zero_copy_only=False), buckets).astype(np.int32)
    table = table.append_column(TO, pa.array(to)).append_column(SETTLED, pa.array(np.full(len(to), settled_input)))
    return table.sort_by(TO)


def _task_result(table: pa.Table, name: str, bucket: object) -> DocumentBatch:
    result = DocumentBatch(dataset_name=name, data=table)
    result._metadata = {"bucket": bucket}
    return result


class ScatterEdgesStage(ProcessingStage):
    """One edge file in (task ``n``: the ``n``-th), its edges both ways, routed to their keys' buckets, out."""

    name = "scatter_edges"

    def __init__(self, edge_files: list[str], buckets: int) -> None:
        self.edge_files = edge_files
        self.buckets = buckets

    def process(self, task: IdBucketTask) -> DocumentBatch:
        edges = read_parquet(self.edge_files[task.data])
        table = distinct(both_ways(edges.column(0).combine_chunks(), edges.column(1).combine_chunks()))
        return _task_result(_routed(table, self.buckets, False), "star_round", task.data)


def batches_of_bucket(folder: str, bucket: int, rows_per_batch: int,
                      columns: Sequence[str] = (KEY, NEIGHBOR)) -> Iterator[pa.Table]:
    """The ``columns`` of the rows routed to ``bucket`` (default: a star
    round's ``(key, neighbor)``) from every file in ``folder``, at most
    ``rows_per_batch`` at a time; row groups whose ``_to`` range leaves
    ``bucket`` out are not read. The reader decodes up to a row group
    (``ROWS_PER_GROUP`` rows, as ``RoundWriter``, the star steps and
    ``BandKeysStage`` write them) at a time before keeping the bucket's rows."""
    for url in parquet_files(folder):
        with ParquetInput(url) as parquet:
            file = parquet.file
            column = file.schema_arrow.get_field_index(TO)
            groups = [i for i in range(file.num_row_groups)
                      if _may_hold(file.metadata.row_group(i).column(column), bucket)]
            if not groups:
                continue
            read = max(rows_per_batch, ROWS_PER_GROUP)
            for batch in parquet.iter_batches(read, groups, [*columns, TO]):
                rows = pa.Table.from_batches([batch])
                mine = rows.filter(pc.equal(rows[TO], bucket)).select(list(columns))
                for start in range(0, mine.num_rows, rows_per_batch):
                    yield mine.slice(start, rows_per_batch)


def _may_hold(chunk: pq.ColumnChunkMetaData, bucket: int) -> bool:
    stats = chunk.statistics
    return stats is None or not stats.has_min_max or stats.min <= bucket <= stats.max


def _row_schema(folder: str, columns: Sequence[str] = (KEY, NEIGHBOR)) -> pa.Schema:
    """``columns`` as the files of ``folder`` type them (for a task with no rows)."""
    for url in parquet_files(folder):
        with ParquetInput(url) as parquet:
            found = parquet.file.schema_arrow
            return pa.schema([found.field(name) for name in columns])
    return pa.schema([(name, pa.int64()) for name in columns])


def written_in_pieces(folder: str, name: str, schema: pa.Schema, pieces: Iterable[pa.Table], bucket: object,
                      dataset: str) -> FileGroupTask:
    """A sink's file ``<folder>/<name>``: ``pieces`` (each sorted by ``_to``)
    written as they come, in row groups of ``ROWS_PER_GROUP`` rows, so that a
    reader of one bucket skips the others; written atomically (a replay
    rewrites it whole, so the checkpoint stays exact). The task records it.

    Only ``_to`` gets a dictionary and statistics, the readers' one use of
    either: on band keys and ids, which hardly repeat and are never filtered
    on, Parquet's defaults took 60% of the writing time (1.3M band keys)."""
    records = 0

    def write(handle) -> None:
        nonlocal records
        with pq.ParquetWriter(handle, schema, use_dictionary=[TO], write_statistics=[TO]) as writer:  # no rows: no groups
            for piece in pieces:
                writer.write_table(piece.cast(schema), row_group_size=ROWS_PER_GROUP)
                records += piece.num_rows

    size = write_atomically(f"{folder}/{name}", write)
    result = FileGroupTask(dataset_name=dataset, data=[f"{folder}/{name}"])
    result._metadata = {"bucket": bucket, "num_records": records, "written": [[name, size, records]]}
    return result


def bucket_bounds(folder: str, bucket: int, seen: Callable[[pa.Table], pa.Table] = lambda table: table) -> pa.Table:
    """Each key of ``bucket`` and its least and greatest neighbour, folded over
    the bucket's rows ``ROWS_PER_BATCH`` at a time (``seen`` is shown each table held)."""
    bounds = merged_bounds(None, _row_schema(folder).empty_table())
    for rows in batches_of_bucket(folder, bucket, ROWS_PER_BATCH):
        bounds = seen(merged_bounds(bounds, seen(rows)))
    return bounds


class StarRoundStage(ProcessingStage):
    """Task ``j``: the rows of bucket ``j`` from the previous round, a large-
    or small-star step on them, the result routed for the next round and
    written (the round's sink) to ``<folder>/part.<j>.parquet``.

    Two passes over the rows, ``ROWS_PER_BATCH`` at a time: the first folds
    them into each key's least and greatest neighbour (whether the input is
    settled follows from those), the second turns each batch into its output
    rows, which go to the file as they come (``dedup/fuzzy/components.py``
    says why batches need not be distinct from one another). A task holds
    one row per distinct key of its bucket, one batch and that batch's
    output, never all the rows of one key: a giant component's centre is
    read through like any other key. ``largest_table`` is the most rows any
    one table of the last task held (the bound, for tests to check).
    A replay rewrites the file whole (written atomically), so the round's
    checkpoint stays exact."""

    name = "star_round"
    is_sink_stage = True

    def __init__(self, previous: str, large: bool, buckets: int, folder: str) -> None:
        self.previous = previous
        self.large = large
        self.buckets = buckets
        self.folder = folder.rstrip("/")
        self.largest_table = 0

    def _held(self, table: pa.Table) -> pa.Table:
        self.largest_table = max(self.largest_table, table.num_rows)
        return table

    def process(self, task: IdBucketTask) -> FileGroupTask:
        self.largest_table = 0
        schema = _row_schema(self.previous)
        bounds = bucket_bounds(self.previous, task.data, self._held)
        settled_input = settled_bounds(bounds)
        step = large_star_rows if self.large else small_star_rows
        routed_schema = schema.append(pa.field(TO, pa.int32())).append(pa.field(SETTLED, pa.bool_()))
        pieces = (step(rows, bounds) for rows in batches_of_bucket(self.previous, task.data, ROWS_PER_BATCH))
        routed = (self._held(_routed(distinct(piece.cast(schema)), self.buckets, settled_input))
                  for piece in itertools.chain(pieces, [] if self.large else [small_star_keys(bounds)]))
        return written_in_pieces(self.folder, f"part.{task.data}.parquet", routed_schema, routed, task.data,
                                 "star_round")


class StarLabelsStage(ProcessingStage):
    """Task ``j``: the ids of bucket ``j`` in a settled round and their groups
    (the least id of each), from each key's least neighbour folded over the
    rows ``ROWS_PER_BATCH`` at a time: a task holds one row per key and one batch."""

    name = "star_labels"

    def __init__(self, previous: str, id_column: str) -> None:
        self.previous = previous
        self.id_column = id_column

    def process(self, task: IdBucketTask) -> DocumentBatch:
        labels = labels_from_bounds(bucket_bounds(self.previous, task.data))
        return _task_result(labels.rename_columns([self.id_column, GROUP_FIELD]), "components", task.data)


class LaterMembersStage(ProcessingStage):
    """Task ``j``: from components file ``j``, the ids that are not their group's least id."""

    name = "later_members"

    def __init__(self, components: str, id_column: str) -> None:
        self.components = components
        self.id_column = id_column

    def process(self, task: IdBucketTask) -> DocumentBatch:
        table = read_parquet(f"{self.components}/part.{task.data}.parquet")
        later = table.filter(pc.not_equal(table[self.id_column], table[GROUP_FIELD]))[self.id_column]
        return _task_result(pa.table({self.id_column: later.take(pc.sort_indices(later))}), "duplicates", task.data)


class RoundWriter(BucketWriter, HashesWriter):
    """A round's file per task, in row groups small enough for a reader of one bucket to skip the others."""

    name = "round_writer"
