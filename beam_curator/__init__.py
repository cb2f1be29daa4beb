"""beam_curator: resumable large-scale text curation on Apache Beam.

Top-level names load on first use, so that the Beam-free layers (tasks,
stages, checkpoint, dedup kernels) can be imported without Apache Beam, e.g.
on a GPU box that only checks the numeric kernels.

Importing the package (before Apache Beam) keeps other libraries' notes off
the terminal and makes an uncaught Ctrl-C of a run print one line (see
``beam_curator.logs`` and ``beam_curator.interrupts``).
"""

from __future__ import annotations

import importlib
from typing import Any

from beam_curator.interrupts import install_interrupt_hook
from beam_curator.logs import silence_library_noise

__version__ = "0.1.0"
silence_library_noise()
install_interrupt_hook()
_EXPORTS = {
    "Pipeline": "beam_curator.pipeline",
    "RankingStrategy": "beam_curator.dedup.semantic.ranking",
    "Resources": "beam_curator.stages.resources",
    "RunSummary": "beam_curator.running.summary",
    "SemanticDeduplicationWorkflow": "beam_curator.workflows",
    "TextDuplicatesRemovalWorkflow": "beam_curator.workflows",
    "TextSemanticDeduplicationWorkflow": "beam_curator.workflows",
    "unwrap_errors": "beam_curator.logs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'beam_curator' has no attribute {name!r}")
