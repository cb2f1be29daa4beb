"""The document filter interface: a score per document, and a decision on the score.

Scoring and deciding are separate so that a score can be kept as a column (``Score``,
``ScoreFilter(score_field=...)``) and the decision taken later, or again with another threshold,
without rescoring (``Filter``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class DocumentFilter(ABC):
    """A filter of single documents, as NeMo Curator's ``DocumentFilter``.

    A subclass implements ``score_document`` and ``keep_document``, and may set ``self._name`` in its
    ``__init__`` (after ``super().__init__()``): the stage that runs a single filter is named after it.
    Filters are pickled to the workers, so they should hold settings, not per-document state.
    """

    def __init__(self) -> None:
        self._name = type(self).__name__

    @abstractmethod
    def score_document(self, text: str) -> Any:
        """The document's score: a number, or any value ``keep_document`` understands."""

    @abstractmethod
    def keep_document(self, score: Any) -> bool:
        """Whether a document with this score (from ``score_document``) is kept."""

    @property
    def name(self) -> str:
        """The filter's name: the stage's name and a natural score column name."""
        return getattr(self, "_name", type(self).__name__)
