"""Run SemanticDeduplicationWorkflow on an embeddings folder; the interrupt-and-resume test kills it.

Many clusters and ``pairwise_batch_size=1`` make the pairwise phase long
enough to stop midway; a small ROWS_PER_RANGE makes one range per cluster, so
that the grouping and pairwise phases have a partition per cluster.
Usage: ``semdedup_resume_run.py EMBEDDINGS OUTPUT CACHE [ROWS_PER_RANGE]``.
"""

from __future__ import annotations

import json

import sys

from beam_curator.logs import configure_logging
from beam_curator.workflows import SemanticDeduplicationWorkflow
from beam_curator.workflows.semantic import grouping

N_CLUSTERS = 200


def workflow(embeddings: str, output_path: str, cache_path: str) -> SemanticDeduplicationWorkflow:
    """The run under test; the test builds its uninterrupted reference from the same settings."""
    return SemanticDeduplicationWorkflow(
        embeddings, output_path, cache_path, id_field="id", n_clusters=N_CLUSTERS, eps=0.05,
        pairwise_batch_size=1, runner="local",
    )


if __name__ == "__main__":
    configure_logging()
    if len(sys.argv) > 4:
        grouping._ROWS_PER_RANGE = int(sys.argv[4])
    print(json.dumps(workflow(*sys.argv[1:4]).run().metadata, default=str))
