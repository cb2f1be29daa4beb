"""NeMo Curator's Unicode repair, at its ``modifiers.unicode`` path."""

from beam_curator.stages.text.modifiers.unicode.unicode_reformatter import UnicodeReformatter

__all__ = ["UnicodeReformatter"]
