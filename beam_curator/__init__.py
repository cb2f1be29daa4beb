"""beam_curator: resumable large-scale text curation on Apache Beam."""

from beam_curator.pipeline import Pipeline, RunSummary

__all__ = [
    "Pipeline",
    "RunSummary",
    "SemanticDeduplicationWorkflow",
    "TextDuplicatesRemovalWorkflow",
    "TextSemanticDeduplicationWorkflow",
]


def __getattr__(name: str):
    """Workflows load on first use: they pull in torch and the model handlers."""
    if name in __all__:
        from beam_curator import workflows

        return getattr(workflows, name)
    raise AttributeError(f"module 'beam_curator' has no attribute {name!r}")
