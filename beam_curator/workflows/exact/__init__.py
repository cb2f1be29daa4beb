"""Exact deduplication: documents whose texts are byte-for-byte equal."""

from beam_curator.workflows.exact.workflow import ExactDeduplicationWorkflow

__all__ = ["ExactDeduplicationWorkflow"]
