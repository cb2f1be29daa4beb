"""Document filters and the stages that run them, at NeMo Curator's ``stages.text.filters`` path.

The heuristic filters are in ``beam_curator.stages.text.filters.heuristic`` and its ``repetition``
module, as in NeMo Curator.
"""

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.score_filter import Filter, Score, ScoreFilter

__all__ = ["DocumentFilter", "Filter", "Score", "ScoreFilter"]
