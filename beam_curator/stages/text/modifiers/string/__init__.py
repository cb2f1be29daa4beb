"""NeMo Curator's string modifiers, at its ``modifiers.string`` path."""

from beam_curator.stages.text.modifiers.string.c4 import BoilerPlateStringModifier
from beam_curator.stages.text.modifiers.string.line_remover import LineRemover
from beam_curator.stages.text.modifiers.string.markdown_remover import MarkdownRemover
from beam_curator.stages.text.modifiers.string.newline_normalizer import NewlineNormalizer
from beam_curator.stages.text.modifiers.string.quotation_remover import QuotationRemover
from beam_curator.stages.text.modifiers.string.slicer import Slicer
from beam_curator.stages.text.modifiers.string.url_remover import UrlRemover

__all__ = [
    "BoilerPlateStringModifier",
    "LineRemover",
    "MarkdownRemover",
    "NewlineNormalizer",
    "QuotationRemover",
    "Slicer",
    "UrlRemover",
]
