"""Phase 1 of exact deduplication: every document reduced to the md5 of its text.

The digest is NeMo Curator's (``beam_curator.dedup.exact``). Only the id, the
digest and the document's place in the input (file, row: the rank of a
generated id, and the id generator's ranges) are kept, so that grouping never
holds a text. Each file's rows are written sorted by
digest in small row groups, so that a grouping task reading one digest range
skips, by the row groups' min/max statistics, the rows of other ranges.
"""

from __future__ import annotations

import pyarrow as pa

from beam_curator.dedup.exact import HASH_COLUMN, md5_hex_array
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.per_file import document_places


class HashTextStage(ProcessingStage):
    """One input file's documents in, ``(id, digest, file, row)`` sorted by digest out."""

    name = "hash_text"

    def __init__(self, text_field: str, id_column: str) -> None:
        self.text_field = text_field
        self.id_column = id_column

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        (source,) = task._metadata["source_files"]  # the workflow reads one file (or one block of it) per partition
        hashed = pa.table({
            self.id_column: table.column(self.id_column),
            HASH_COLUMN: md5_hex_array(table.column(self.text_field)),
            **document_places(source, table.column(self.id_column), self.id_column),
        }).sort_by(HASH_COLUMN)
        result = DocumentBatch(dataset_name=task.dataset_name, data=hashed)
        result._metadata = dict(task._metadata)
        return result
