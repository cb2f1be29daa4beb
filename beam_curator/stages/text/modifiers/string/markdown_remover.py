"""Removing Markdown emphasis and link syntax, keeping the words (and a link's address)."""

from __future__ import annotations

import re

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier

# Applied line by line in this order: bold before italic, so "**a**" is not read as two italics.
_MARKUP = (
    (re.compile(r"\*\*(.*?)\*\*"), r"\1"),  # **bold**
    (re.compile(r"\*(.*?)\*"), r"\1"),  # *italic*
    (re.compile(r"_(.*?)_"), r"\1"),  # _underline_
    (re.compile(r"\[.*?\]\((.*?)\)"), r"\1"),  # [text](address) -> address
)


class MarkdownRemover(DocumentModifier):
    """Unwraps ``**bold**``, ``*italic*`` and ``_underline_`` and replaces ``[text](address)`` by the
    address; markup left open (``*italic``) and markup across lines stay as they are."""

    def modify_document(self, text: str) -> str:
        return "\n".join(self._unmark(line) for line in text.split("\n"))

    @staticmethod
    def _unmark(line: str) -> str:
        for pattern, replacement in _MARKUP:
            line = pattern.sub(replacement, line)
        return line
