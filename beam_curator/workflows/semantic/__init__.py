"""Semantic deduplication (SemDeDup) workflows."""

from beam_curator.dedup.semantic.ranking import RankingStrategy
from beam_curator.workflows.semantic.removal import TextDuplicatesRemovalWorkflow
from beam_curator.workflows.semantic.text_workflow import TextSemanticDeduplicationWorkflow
from beam_curator.workflows.semantic.workflow import SemanticDeduplicationWorkflow, WorkflowResult

__all__ = [
    "RankingStrategy",
    "SemanticDeduplicationWorkflow",
    "TextDuplicatesRemovalWorkflow",
    "TextSemanticDeduplicationWorkflow",
    "WorkflowResult",
]
