"""Cutting web boilerplate (policy and cookie notices) from documents, after Google's C4."""

from __future__ import annotations

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier
from beam_curator.stages.text.utils.constants import policy_substrings
from beam_curator.stages.text.utils.text_utils import get_paragraphs, is_paragraph_indices_in_top_or_bottom_only


class BoilerPlateStringModifier(DocumentModifier):
    """Empties a document holding "lorem ipsum", and deals with paragraphs holding a policy or cookie
    phrase: with ``remove_if_at_top_or_bottom`` (the default) they are cut when they form one run at
    the top or the bottom of the document (and the document is left as it is otherwise); without it,
    any such paragraph empties the document.

    An emptied document is "", for a later filter (such as ``WordCountFilter``) to drop.
    """

    def __init__(self, remove_if_at_top_or_bottom: bool = True) -> None:
        super().__init__()
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom
        self._name = "boilerplate_string_ratio"

    def modify_document(self, text: str) -> str:
        paragraphs = get_paragraphs(text)
        lowered = [paragraph.strip().lower() for paragraph in paragraphs]
        if any("lorem ipsum" in paragraph for paragraph in lowered):
            return ""
        flagged = [index for index, paragraph in enumerate(lowered)
                   if any(phrase in paragraph for phrase in policy_substrings)]
        if not flagged:
            return text
        if not self.remove_if_at_top_or_bottom:
            return ""
        if not is_paragraph_indices_in_top_or_bottom_only(flagged, len(paragraphs)):
            return text
        cut = set(flagged)
        return "\n\n".join(paragraph for index, paragraph in enumerate(paragraphs) if index not in cut)
