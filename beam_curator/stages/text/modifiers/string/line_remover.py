"""Removing whole lines that equal given strings (a site's fixed menu or footer lines)."""

from __future__ import annotations

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier


class LineRemover(DocumentModifier):
    """Removes each line equal to one of ``patterns``, character for character (whitespace included);
    a line that only contains a pattern stays."""

    def __init__(self, patterns: list[str]) -> None:
        super().__init__()
        self.patterns = list(patterns)

    def modify_document(self, text: str) -> str:
        unwanted = set(self.patterns)
        return "\n".join(line for line in text.split("\n") if line not in unwanted)
