"""Keeping the part of a document between two positions or two markers."""

from __future__ import annotations

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier


class Slicer(DocumentModifier):
    """Keeps ``text[left:right]``, then strips it when ``strip``.

    Args:
        left: where the kept part starts: an index, or a string whose first occurrence marks it
            (the document becomes "" when it is absent).
        right: where the kept part ends: an index (exclusive), None for the end, or a string whose
            last occurrence marks it (the document becomes "" when it is absent).
        include_left: keep the ``left`` marker itself (string ``left`` only).
        include_right: keep the ``right`` marker itself (string ``right`` only).
        strip: strip whitespace from the result.
    """

    def __init__(self, left: int | str | None = 0, right: int | str | None = None, include_left: bool = True,
                 include_right: bool = True, strip: bool = True) -> None:
        super().__init__()
        self.left = left
        self.right = right
        self.include_left = include_left
        self.include_right = include_right
        self.strip = strip

    def modify_document(self, text: str) -> str:
        start = self.left if isinstance(self.left, int) else 0
        if isinstance(self.left, str):
            found = text.find(self.left)
            if found < 0:
                return ""
            start = found if self.include_left else found + len(self.left)
        end = self.right if isinstance(self.right, int) else len(text)
        if isinstance(self.right, str):
            found = text.rfind(self.right)
            if found < 0:
                return ""
            end = found + len(self.right) if self.include_right else found
        kept = text[start:end]
        return kept.strip() if self.strip else kept
