"""Ready-made workflows built from stages and Beam transforms."""

from beam_curator.workflows.semantic import (
    SemanticDeduplicationWorkflow,
    TextDuplicatesRemovalWorkflow,
    TextSemanticDeduplicationWorkflow,
    WorkflowResult,
)

__all__ = [
    "SemanticDeduplicationWorkflow",
    "TextDuplicatesRemovalWorkflow",
    "TextSemanticDeduplicationWorkflow",
    "WorkflowResult",
]
