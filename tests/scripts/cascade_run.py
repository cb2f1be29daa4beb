"""Run the verify cascade as a user would; the kill test stops it while it embeds candidates.

Usage: ``cascade_run.py INPUT OUTPUT CACHE [FULL_MODEL]``. The screening model is the
bundled MiniLM reading only each text's first characters (cheap, and blind to
edits further on); the full model is the same MiniLM reading everything.
"""

from __future__ import annotations

import json
import logging
import sys

from beam_curator.workflows import TextSemanticDeduplicationWorkflow

EPS, SCREENING_EPS, SCREENING_CHARS = 0.02, 0.2, 60


def workflow(input_path: str, output_path: str, cache_path: str, **changes: object) -> TextSemanticDeduplicationWorkflow:
    """The run under test; ``changes`` replace its settings."""
    settings = dict(
        embedding_backend="sentence-transformers", id_field="doc_id", n_clusters=4, eps=EPS,
        screening_model_identifier="sentence-transformers/all-MiniLM-L6-v2", screening_max_chars=SCREENING_CHARS,
        screening_eps=SCREENING_EPS, runner="local", input_filetype="jsonl", output_filetype="jsonl",
    )
    return TextSemanticDeduplicationWorkflow(input_path, output_path, cache_path, **{**settings, **changes})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", force=True)
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    full = {"model_identifier": sys.argv[4]} if len(sys.argv) > 4 else {}
    print(json.dumps(workflow(*sys.argv[1:4], **full).run().metadata, default=str))
