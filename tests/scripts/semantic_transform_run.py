"""A user's pipeline with ``SemanticDedup`` and an embedding cache; the kill test stops it while it embeds.

Usage: ``semantic_transform_run.py INPUT_JSONL_FOLDER CACHE_PATH OUTPUT_FOLDER [MAX_CHARS]``. Each removed
document goes to ``OUTPUT_FOLDER/<doc_id>.json`` with the id it duplicates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import apache_beam as beam

from beam_curator.models import make_embedding_handler
from beam_curator.transforms import embedding_cache
from beam_curator.runners import pipeline_options
from beam_curator.transforms import SemanticDedup


def write_removed(document: dict, folder: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{document['doc_id']}.json").write_text(json.dumps(document["duplicate_of"]))


if __name__ == "__main__":
    # A cache file every second: the kill test then finds the cache partly written whatever this machine's
    # speed (the runner splits the 496 texts between its threads, and each thread's share is under FLUSH_ROWS).
    embedding_cache.FLUSH_SECONDS = 1.0
    input_folder, cache_path, output = sys.argv[1:4]
    max_chars = int(sys.argv[4]) if len(sys.argv) > 4 else None
    handler = make_embedding_handler("sentence-transformers", max_chars=max_chars, max_batch_size=16)
    with beam.Pipeline(options=pipeline_options("local")) as pipeline:
        result = (pipeline
                  | beam.io.ReadFromText(f"{input_folder}/*.jsonl")
                  | beam.Map(json.loads)
                  | SemanticDedup(handler, id_field="doc_id", n_clusters=4, eps=0.02, cache_path=cache_path))
        _ = result.removed | beam.Map(write_removed, output)
