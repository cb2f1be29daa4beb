"""Ready-made workflows built from stages and Beam transforms."""

from beam_curator.workflows.exact import ExactDeduplicationWorkflow
from beam_curator.workflows.fuzzy import FuzzyDeduplicationWorkflow
from beam_curator.workflows.semantic import (
    RankingStrategy,
    SemanticDeduplicationWorkflow,
    TextDuplicatesRemovalWorkflow,
    TextSemanticDeduplicationWorkflow,
    WorkflowResult,
)

__all__ = [
    "ExactDeduplicationWorkflow",
    "FuzzyDeduplicationWorkflow",
    "RankingStrategy",
    "SemanticDeduplicationWorkflow",
    "TextDuplicatesRemovalWorkflow",
    "TextSemanticDeduplicationWorkflow",
    "WorkflowResult",
]
