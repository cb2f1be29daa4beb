"""Document modifiers and the ``Modify`` stage that runs them, at NeMo Curator's
``stages.text.modifiers`` path; the modifiers are also at ``modifiers.string`` and
``modifiers.unicode``, as there."""

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier
from beam_curator.stages.text.modifiers.modifier import Modify
from beam_curator.stages.text.modifiers.string import (
    BoilerPlateStringModifier,
    LineRemover,
    MarkdownRemover,
    NewlineNormalizer,
    QuotationRemover,
    Slicer,
    UrlRemover,
)
from beam_curator.stages.text.modifiers.unicode import UnicodeReformatter

__all__ = [
    "BoilerPlateStringModifier",
    "DocumentModifier",
    "LineRemover",
    "MarkdownRemover",
    "Modify",
    "NewlineNormalizer",
    "QuotationRemover",
    "Slicer",
    "UnicodeReformatter",
    "UrlRemover",
]
