"""Ids must be unique across the whole input, not just within a file:
removal by a repeated id would drop every record that carries it.

The check runs on Beam workers, so that no process ever holds every id:
while drawing the k-means sample, each task also writes its ids into
buckets chosen by a hash of the id (``bucket_of``), so that copies of an id
meet in one bucket; then one task per bucket finds the ids it holds more
than once and writes them down, and the driver reads only those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.dedup.semantic.ranking import uniform_by_id
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import ParquetWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.tasks import DocumentBatch, Task

# Ids a checking task holds (64 MB of integer ids).
IDS_PER_BUCKET = 1 << 23
_BUCKET_SALT = 0x1D5


def bucket_count(total_rows: int) -> int:
    return max(1, -(-total_rows // IDS_PER_BUCKET))


def bucket_of(ids: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each id, from the id alone."""
    return np.minimum((uniform_by_id(ids, _BUCKET_SALT) * buckets).astype(np.int64), buckets - 1)


def bucket_folder(root: str, bucket: int) -> str:
    return f"{root}/bucket={bucket}"


@dataclass
class IdBucketTask(Task[int]):
    """One bucket of ids; the id names the bucket, so it is stable across runs."""

    def get_deterministic_id(self) -> str:
        return f"idbucket{self.data}"


class ListIdBucketsStage(ProcessingStage):
    """The source of the check: one task per bucket."""

    name = "list_id_buckets"
    is_source_stage = True

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets

    def process(self, task: Task) -> list[IdBucketTask]:
        return [IdBucketTask(dataset_name="id_buckets", data=bucket) for bucket in range(self.buckets)]


class RepeatedIdsStage(ProcessingStage):
    """The ids one bucket holds more than once, and how often."""

    name = "repeated_ids"

    def __init__(self, root: str, id_column: str) -> None:
        self.root = root
        self.id_column = id_column

    def process(self, task: IdBucketTask) -> DocumentBatch:
        paths = parquet_files(bucket_folder(self.root, task.data))
        found = pa.table({"id": pa.array([], pa.null()), "count": pa.array([], pa.int64())})
        if paths:
            counts = pc.value_counts(pa.chunked_array([read_parquet(path, [self.id_column]).column(0) for path in paths]))
            repeated = pc.greater(counts.field("counts"), 1)
            found = pa.table({"id": counts.field("values").filter(repeated), "count": counts.field("counts").filter(repeated)})
        result = DocumentBatch(dataset_name="repeated_ids", data=found)
        result._metadata = {"bucket": task.data}
        return result


class BucketWriter(ParquetWriter):
    """One parquet file per bucket (``task._metadata["bucket"]``), named by
    ``stem``'s ``{bucket}``: a replayed bucket overwrites its own file.
    ``unit`` names what a row is, for the progress bar (see ``ProcessingStage``)."""

    name = "bucket_writer"

    def __init__(self, path: str, stem: str = "bucket_{bucket}", unit: str = "doc") -> None:
        super().__init__(path)
        self.stem = stem
        self.unit = unit

    def file_stem(self, task: DocumentBatch) -> str:
        return self.stem.format(bucket=task._metadata["bucket"])


def raise_if_repeated(folder: str, id_column: str) -> None:
    """The error naming repeated ids, if the check found any."""
    tables = [read_parquet(path) for path in parquet_files(folder)]
    found = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if found is None or found.num_rows == 0:
        return
    examples = sorted(found.column("id").to_pylist())[:5]
    raise CuratorInputError(
        f"{found.num_rows} id(s) in {id_column!r} occur more than once across the input, e.g. {examples}; "
        "ids must be unique (leave id_field unset to generate ids)"
    )
