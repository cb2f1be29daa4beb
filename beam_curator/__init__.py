"""beam_curator: resumable large-scale text curation on Apache Beam.

Top-level names load on first use, so that the Beam-free layers (tasks,
stages, checkpoint, dedup kernels) can be imported without Apache Beam, e.g.
on a GPU box that only checks the numeric kernels.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
_EXPORTS = {
    "Pipeline": "beam_curator.pipeline",
    "RankingStrategy": "beam_curator.dedup.semantic.ranking",
    "Resources": "beam_curator.stages.resources",
    "RunSummary": "beam_curator.pipeline",
    "SemanticDeduplicationWorkflow": "beam_curator.workflows",
    "TextDuplicatesRemovalWorkflow": "beam_curator.workflows",
    "TextSemanticDeduplicationWorkflow": "beam_curator.workflows",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'beam_curator' has no attribute {name!r}")
