"""Phase 2 of exact deduplication: group equal digests, list all but one copy.

The digests are split into ``buckets`` ranges of equal width; one Beam task
per range reads, from every file of digests, only that range, so a task holds
``1 / buckets`` of the ``(digest, id, file, row)`` records (about 60 bytes
each), never a text, and copies of a text always meet in one task. The copy
with the smallest id is kept (``beam_curator.dedup.exact``, the rule the
``ExactDedup`` transform follows); generated ids rank as a fresh run numbers
them, files by path then rows, so that a rerun after files were added keeps
what a fresh run keeps. The others' ids are written, sorted, to
``part.<bucket>.parquet`` in a single column named like the id, as NeMo
Curator writes ``ExactDuplicateIds/``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.dedup.exact import HASH_COLUMN, later_copies
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.semantic.id_check import IdBucketTask
from beam_curator.workflows.semantic.ids import FILE_COLUMN, GENERATED_ID, ROW_COLUMN

# Digest records a grouping task holds (about 250 MB).
RECORDS_PER_BUCKET = 1 << 22
_SPAN = 1 << 32  # digests are bucketed by their first 8 hex digits

DUPLICATE_IDS_STEM = "part.{bucket}"  # NeMo Curator's file names in ExactDuplicateIds/ (see BucketWriter)


def bucket_count(total_rows: int) -> int:
    return max(1, -(-total_rows // RECORDS_PER_BUCKET))


def digest_range(bucket: int, buckets: int) -> list[tuple[str, str, str]]:
    """The parquet filter selecting the digests of ``bucket``."""
    low = [(HASH_COLUMN, ">=", f"{bucket * _SPAN // buckets:08x}")] if bucket else []
    high = [(HASH_COLUMN, "<", f"{(bucket + 1) * _SPAN // buckets:08x}")] if bucket + 1 < buckets else []
    return low + high


def kept_order(id_column: str) -> list[str]:
    """The columns ranking the copies of a digest: the id, or for generated
    ids the file's rank by path and the row (the id a fresh run gives)."""
    return [FILE_COLUMN, ROW_COLUMN] if id_column == GENERATED_ID else [id_column]


def removal_ids(table: pa.Table, id_column: str) -> pa.Array:
    """All ids but the kept one of each digest, sorted."""
    later, _ = later_copies(table, kept_order(id_column))
    ids = table.column(id_column).take(later).combine_chunks()
    return ids.take(pc.sort_indices(ids))


class DuplicateIdsStage(ProcessingStage):
    """One digest range in, the ids of its later copies out."""

    name = "exact_duplicate_ids"

    def __init__(self, hashes: str, buckets: int, id_column: str) -> None:
        self.hashes = hashes
        self.buckets = buckets
        self.id_column = id_column

    def process(self, task: IdBucketTask) -> DocumentBatch:
        where = digest_range(task.data, self.buckets) or None
        parts = []
        for url in parquet_files(self.hashes):
            parts.append(read_parquet(url, filters=where))
        # Files are ranked by path; each file of digests holds one input file's documents.
        paths = [part.column(FILE_COLUMN)[0].as_py() if part.num_rows else "" for part in parts]
        rank = {path: number for number, path in enumerate(sorted(paths))}
        table = pa.concat_tables([
            part.set_column(part.schema.get_field_index(FILE_COLUMN), FILE_COLUMN,
                            pa.array([rank[path]] * part.num_rows, pa.int32()))
            for part, path in zip(parts, paths)
        ], promote_options="permissive")
        result = DocumentBatch(dataset_name="exact_duplicate_ids",
                               data=pa.table({self.id_column: removal_ids(table, self.id_column)}))
        result._metadata = {"bucket": task.data}
        return result

