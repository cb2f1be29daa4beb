"""Collapsing runs of blank lines, which carry no meaning and skew paragraph counts."""

from __future__ import annotations

import re

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier

_UNIX_RUN = re.compile(r"\n{3,}")
_WINDOWS_RUN = re.compile(r"(?:\r\n){3,}")


class NewlineNormalizer(DocumentModifier):
    """Replaces 3 or more newlines in a row by 2 (one blank line), for Unix ("\\n") and Windows
    ("\\r\\n") line ends alike."""

    def modify_document(self, text: str) -> str:
        return _WINDOWS_RUN.sub("\r\n\r\n", _UNIX_RUN.sub("\n\n", text))
