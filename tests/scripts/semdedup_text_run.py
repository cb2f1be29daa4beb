"""Run TextSemanticDeduplicationWorkflow as a user would; the embedding kill test stops it midway.

Usage: ``semdedup_text_run.py INPUT OUTPUT CACHE``.
"""

from __future__ import annotations

import json
import logging
import sys

from beam_curator.workflows import TextSemanticDeduplicationWorkflow


def workflow(input_path: str, output_path: str, cache_path: str) -> TextSemanticDeduplicationWorkflow:
    """The run under test; the test builds its uninterrupted reference from the same settings."""
    return TextSemanticDeduplicationWorkflow(
        input_path, output_path, cache_path, embedding_backend="sentence-transformers", n_clusters=4, eps=0.05,
        runner="local", input_filetype="jsonl", output_filetype="jsonl",
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", force=True)
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    print(json.dumps(workflow(*sys.argv[1:4]).run().metadata, default=str))
