"""``exact_id_generator.json``: which generated ids each input file received.

NeMo Curator saves its id generator's state as ``{"next_id": n,
"batch_registry": {key: [min_id, max_id]}}``, the key being
``uuid5(NAMESPACE_URL, ";".join(files))`` of a batch of files, and its
tests map ids back to documents with ``get_batch_range(files)``. Ids here are
``file_number << 32 | row`` (see ``semantic/ids.py``): each file is a batch
of its own whose ids run from ``min_id`` to ``max_id``, so the same lookup
works on this file.
"""

from __future__ import annotations

import json
import uuid

import pyarrow.compute as pc

from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.workflows.semantic.ids import FILE_COLUMN, GENERATED_ID
from beam_curator.writing import write_atomically

FILENAME = "exact_id_generator.json"


def batch_key(files: list[str]) -> str:
    """NeMo Curator's key of a batch of files."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, ";".join(files)))


def write_id_generator(hashes: str, url: str) -> None:
    """The id range of every input file, from the digest files (one per input
    file, holding its ids and its path), read one at a time."""
    registry: dict[str, list[int]] = {}
    for part in parquet_files(hashes):
        table = read_parquet(part, [GENERATED_ID, FILE_COLUMN])
        if table.num_rows:
            bounds = pc.min_max(table.column(GENERATED_ID)).as_py()
            registry[batch_key([table.column(FILE_COLUMN)[0].as_py()])] = [bounds["min"], bounds["max"]]
    next_id = max((high for _, high in registry.values()), default=-1) + 1
    payload = json.dumps({"next_id": next_id, "batch_registry": registry}, indent=1).encode()
    write_atomically(url, lambda handle: handle.write(payload))
