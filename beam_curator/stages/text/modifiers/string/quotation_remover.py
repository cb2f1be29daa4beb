"""Unwrapping documents that are one quotation (generated text often comes quoted)."""

from __future__ import annotations

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier


class QuotationRemover(DocumentModifier):
    """Removes the double quotes that open and close a document of more than 2 characters (leading
    or trailing whitespace prevents it), unless its first line of several itself ends in a quote,
    which is a quoted first line rather than a quoted document."""

    def modify_document(self, text: str) -> str:
        if len(text.strip()) > 2 and text.startswith('"') and text.endswith('"'):
            quoted_first_line = "\n" in text.strip() and text.split("\n")[0].endswith('"')
            if not quoted_first_line:
                return text[1:-1]
        return text
