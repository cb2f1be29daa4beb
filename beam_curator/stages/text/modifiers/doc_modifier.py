"""The document modifier interface: a new value computed from a document's field(s)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class DocumentModifier(ABC):
    """A modifier of single documents, as NeMo Curator's ``DocumentModifier``.

    ``modify_document`` takes one field's value (``Modify`` with one input field), or each of several
    fields as a keyword argument named after the field (``Modify(input_fields=[["title", "body"]])``),
    and returns the new value. A subclass may set ``self._name`` after ``super().__init__()``: the
    stage that runs a single modifier is named after it. Modifiers are pickled to the workers, so they
    should hold settings, not per-document state.
    """

    def __init__(self) -> None:
        self._name = type(self).__name__

    @abstractmethod
    def modify_document(self, *args: Any, **kwargs: Any) -> Any:
        """The modified value of the given field value(s)."""

    @property
    def name(self) -> str:
        """The modifier's name, which names the stage that runs it alone."""
        return getattr(self, "_name", type(self).__name__)
