"""The Beam stages of fuzzy deduplication, around the kernels of ``dedup.fuzzy``.

``MinHashStage`` turns one input file's documents into ``(id,
_minhash_signature, file, row)``; ``LSHBucketsStage`` is one task per (band
range, partition): it reads every signature file, keeps the buckets of its
bands whose first value falls in its partition, and lists the ids of each
bucket holding two or more documents; ``BucketEdgesStage`` turns one such
file into edges. Partitions bound what a task holds: ``1 / partitions`` of
the ``(key, id)`` records of ``bands_per_iteration`` bands.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from beam_curator.dedup.fuzzy.lsh import band_keys, buckets, path_edges
from beam_curator.dedup.fuzzy.minhash import signatures
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.per_file import document_places
from beam_curator.workflows.semantic.id_check import IdBucketTask
from beam_curator.workflows.semantic.layout import parquet_files, read_parquet

MINHASH_FIELD = "_minhash_signature"  # NeMo Curator's column names
BUCKET_FIELD = "_bucket_id"
GROUP_FIELD = "_duplicate_group_id"


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
        (source,) = task._metadata["source_files"]  # the workflow reads one file per partition
        values = signatures(table.column(self.text_field).to_pylist(), self.seeds, self.char_ngrams)
        offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
        result = DocumentBatch(dataset_name=task.dataset_name, data=pa.table({
            self.id_column: table.column(self.id_column),
            MINHASH_FIELD: pa.ListArray.from_arrays(offsets, pa.array(values.ravel())),
            **document_places(source, table.num_rows),
        }))
        result._metadata = dict(task._metadata)
        return result


def band_range_name(first: int, last: int) -> str:
    return f"band_{first}-band_{last}"  # NeMo Curator's folder per band iteration


class LSHBucketsStage(ProcessingStage):
    """Task ``n`` is band range ``n // partitions``, partition ``n % partitions``."""

    name = "lsh_buckets"

    def __init__(self, minhashes: str, id_column: str, band_ranges: list[range], minhashes_per_band: int,
                 partitions: int) -> None:
        self.minhashes = minhashes
        self.id_column = id_column
        self.band_ranges = band_ranges
        self.minhashes_per_band = minhashes_per_band
        self.partitions = partitions

    def process(self, task: IdBucketTask) -> DocumentBatch:
        bands = self.band_ranges[task.data // self.partitions]
        partition = task.data % self.partitions
        keys, ids = [], []
        for url in parquet_files(self.minhashes):
            table = read_parquet(url, [self.id_column, MINHASH_FIELD])
            column = table.column(MINHASH_FIELD).combine_chunks()
            values = column.values.to_numpy().reshape(len(column), -1)
            file_keys, first = band_keys(values, bands, self.minhashes_per_band)
            mine = first % self.partitions == partition
            keys.append(file_keys[mine])
            ids.append(pa.concat_arrays([table.column(self.id_column).combine_chunks()] * len(bands)).filter(pa.array(mine)))
        found_keys, found_ids, offsets = buckets(np.concatenate(keys), pa.concat_arrays(ids))
        width = found_keys.dtype.itemsize
        result = DocumentBatch(dataset_name="lsh_buckets", data=pa.table({
            BUCKET_FIELD: pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(width), len(found_keys), [None, pa.py_buffer(found_keys.tobytes())]),
            self.id_column: pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), found_ids),
        }))
        result._metadata = {"bucket": f"{band_range_name(bands.start, bands.stop)}/part.{partition}"}
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
