"""Removing URLs, which language models would otherwise learn to make up."""

from __future__ import annotations

import re

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier

# http(s):// or www. and everything up to the next whitespace, in any letter case.
_URL = re.compile(r"https?://\S+|www\.\S+", flags=re.IGNORECASE)


class UrlRemover(DocumentModifier):
    """Deletes every URL (``http://``, ``https://`` or ``www.`` up to the next whitespace); the
    surrounding text, its spaces included, stays."""

    def modify_document(self, text: str) -> str:
        return _URL.sub("", text)
