"""Run the text SemDeDup workflow with the vLLM engine and print its metadata as JSON.

A script, not a test body: vLLM starts engine processes by spawning, which
re-imports ``__main__``; the work must therefore sit under the main guard.
Usage: ``semdedup_vllm_run.py INPUT OUTPUT CACHE``; prints ``METADATA <json>``.
"""

from __future__ import annotations

import json

import sys

from beam_curator.logs import configure_logging
from beam_curator.workflows import TextSemanticDeduplicationWorkflow


def main(input_path: str, output_path: str, cache_path: str) -> None:
    configure_logging()
    result = TextSemanticDeduplicationWorkflow(
        input_path, output_path, cache_path, id_field="doc_id", embedding_backend="vllm", input_filetype="jsonl", output_filetype="jsonl",
        embedding_vllm_init_kwargs={"gpu_memory_utilization": 0.05}, embedding_max_tokens=128, embedding_pretokenize=True,
        n_clusters=3, eps=0.01, runner="local",
    ).run()
    # vLLM writes to stdout too (also while shutting down), so the line is tagged.
    print("METADATA " + json.dumps(result.metadata, default=str), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
