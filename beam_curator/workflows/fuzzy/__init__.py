"""Fuzzy deduplication: documents whose character n-grams mostly agree (MinHash LSH)."""

from beam_curator.workflows.fuzzy.workflow import FuzzyDeduplicationWorkflow

__all__ = ["FuzzyDeduplicationWorkflow"]
