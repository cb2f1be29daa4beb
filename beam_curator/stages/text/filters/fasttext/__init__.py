"""fastText filters at NeMo Curator's ``stages.text.filters.fasttext`` path."""

from beam_curator.stages.text.filters.fasttext.lang_id import FastTextLangId

__all__ = ["FastTextLangId"]
