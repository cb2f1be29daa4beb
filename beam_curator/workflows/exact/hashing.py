"""Phase 1 of exact deduplication: every document reduced to the md5 of its text.

NeMo Curator hashes ``text_field`` with md5 (cudf's ``hash_values(method="md5")``,
the hex digest of the UTF-8 bytes) into ``_exact_duplicate_group``; the same
digest is computed here with ``hashlib``. Only the id, the digest and the
document's place in the input (file, row: which copy is "first") are kept,
so that grouping never holds a text. Each file's rows are written sorted by
digest in small row groups, so that a grouping task reading one digest range
skips, by the row groups' min/max statistics, the rows of other ranges.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from beam_curator.stages import ProcessingStage
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.per_file import document_places

HASH_COLUMN = "_exact_duplicate_group"  # NeMo Curator's name for the digest


def md5_hex(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The hex md5 of each text's UTF-8 bytes, as NeMo Curator computes it."""
    return pa.array([hashlib.md5(text.encode("utf-8")).hexdigest() for text in texts.to_pylist()], pa.string())


class HashTextStage(ProcessingStage):
    """One input file's documents in, ``(id, digest, file, row)`` sorted by digest out."""

    name = "hash_text"

    def __init__(self, text_field: str, id_column: str) -> None:
        self.text_field = text_field
        self.id_column = id_column

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        (source,) = task._metadata["source_files"]  # the workflow reads one file per partition
        hashed = pa.table({
            self.id_column: table.column(self.id_column),
            HASH_COLUMN: md5_hex(table.column(self.text_field)),
            **document_places(source, table.num_rows),
        }).sort_by(HASH_COLUMN)
        result = DocumentBatch(dataset_name=task.dataset_name, data=hashed)
        result._metadata = dict(task._metadata)
        return result
