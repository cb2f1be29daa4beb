"""datatrove's rule sets (``datatrove.pipeline.filters``) as beam_curator stages, with datatrove 0.10's
class names, parameters, defaults and drop reasons, keeping and dropping the same documents.

Each rule is a stage of its own (put ``GopherQualityFilter()`` in a pipeline as in datatrove's) and a
``DocumentFilter``; ``DatatroveRules`` runs several in one stage, splitting each text into words once.
English words are spaCy's, as datatrove's (``pip install 'beam-curator[datatrove-rules]'``).
"""

from beam_curator.stages.text.filters.datatrove_rules.badwords import C4BadWordsFilter
from beam_curator.stages.text.filters.datatrove_rules.c4 import C4ParagraphFilter, C4QualityFilter
from beam_curator.stages.text.filters.datatrove_rules.chain import DatatroveRules
from beam_curator.stages.text.filters.datatrove_rules.fineweb import FineWebQualityFilter
from beam_curator.stages.text.filters.datatrove_rules.gopher import GopherQualityFilter, GopherRepetitionFilter
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule

__all__ = ["C4BadWordsFilter", "C4ParagraphFilter", "C4QualityFilter", "DatatroveRule", "DatatroveRules",
           "FineWebQualityFilter", "GopherQualityFilter", "GopherRepetitionFilter"]
