"""One document as datatrove's rules see it: its text, its language, and the cuts of the text the
rules share (words, lines), each made once, on first use, however many rules ask."""

from __future__ import annotations

from beam_curator.stages.text.filters.datatrove_rules.words import english


class Document:
    """A document's text for a chain of rules. A rule that rewrites the text (``C4QualityFilter``)
    sets ``text``, which forgets the cuts of the old text."""

    __slots__ = ("_text", "_words", "_lines", "language")

    def __init__(self, text: str, language: str | None = None) -> None:
        self._text = text
        self._words: list[str] | None = None
        self._lines: list[str] | None = None
        self.language = language

    @property
    def text(self) -> str:
        return self._text

    @text.setter
    def text(self, text: str) -> None:
        if text != self._text:
            self._text, self._words, self._lines = text, None, None

    @property
    def words(self) -> list[str]:
        """The words as datatrove's English word tokenizer gives them."""
        if self._words is None:
            self._words = english().words(self._text)
        return self._words

    @property
    def lines(self) -> list[str]:
        """``str.splitlines()``: the lines datatrove's Gopher quality and C4 rules look at."""
        if self._lines is None:
            self._lines = self._text.splitlines()
        return self._lines
