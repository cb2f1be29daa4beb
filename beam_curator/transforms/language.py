"""Language identification in a user's own Beam pipeline: ``IdentifyLanguage`` adds each document's
language and score, ``SplitByLanguage`` routes the documents to one output per language.

Both take dicts or schema'd ``beam.Row``s and give the same kind of element, with the two fields
added (or replaced, where a document already has them), so that identified documents can be written
wherever the input could. The decision is ``LanguageIdentifier``'s (``stages.text.language``), with
its models loaded once per worker process in the DoFn's ``setup``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.typehints.row_type import RowTypeConstraint

from beam_curator.stages.text.language.identify import cascade
from beam_curator.stages.text.language.stage import checked_languages, checked_min_score
from beam_curator.transforms.dedup_documents import check_field_names, split_by_tag, text_of

OTHER = "other"  # SplitByLanguage's output for the documents in none of its languages


class IdentifyLanguage(beam.PTransform):
    """Each document with ``language_field`` (its language's code, ``""`` for a text of whitespace
    only) and ``score_field`` (the probability that it is right) added. A document whose
    ``text_field`` is missing or not a string stops the run with an error naming it."""

    def __init__(self, text_field: str = "text", language_field: str = "language",
                 score_field: str = "language_score") -> None:
        super().__init__()
        check_field_names("IdentifyLanguage", text_field=text_field, language_field=language_field,
                          score_field=score_field)
        self.text_field, self.language_field, self.score_field = text_field, language_field, score_field

    def expand(self, documents: beam.PCollection) -> beam.PCollection:
        identified = documents | "Identify" >> beam.ParDo(
            _Identify(self.text_field, self.language_field, self.score_field))
        identified.element_type = _identified_type(documents.element_type, self.language_field, self.score_field)
        return identified


class SplitByLanguage(beam.PTransform):
    """The documents identified (``IdentifyLanguage``) and split by language: a dict of one
    PCollection per code of ``languages``, and ``"other"`` for the rest (other languages, empty
    texts, and scores below ``min_score``).

    The outputs are fixed when the pipeline is built, so the languages are named up front (an unknown
    code is refused, as ``LanguageIdentifier`` refuses it).
    """

    def __init__(self, languages: Iterable[str], min_score: float = 0.0, text_field: str = "text",
                 language_field: str = "language", score_field: str = "language_score") -> None:
        super().__init__()
        self.languages, self.min_score = checked_languages(languages), checked_min_score(min_score)
        if not self.languages:
            raise ValueError("SplitByLanguage needs at least one language to split out")
        self._identify = IdentifyLanguage(text_field, language_field, score_field)

    def expand(self, documents: beam.PCollection) -> dict[str, beam.PCollection]:
        identified = documents | "IdentifyLanguage" >> self._identify
        tagged = identified | "TagByLanguage" >> beam.Map(
            _tagged, set(self.languages), self.min_score, self._identify.language_field, self._identify.score_field)
        outputs = split_by_tag(tagged, [*self.languages, OTHER], "Take")
        for output in outputs.values():
            output.element_type = identified.element_type
        return outputs


class _Identify(beam.DoFn):
    """Identifies one document at a time; the models load in ``setup``, once per worker process
    (the cache in ``models``), not in each bundle."""

    def __init__(self, text_field: str, language_field: str, score_field: str) -> None:
        self.text_field, self.language_field, self.score_field = text_field, language_field, score_field

    def setup(self) -> None:
        cascade()

    def process(self, document: Any) -> Iterator[Any]:
        language, score = cascade().identify(text_of(document, self.text_field, "IdentifyLanguage"))
        fields = dict(document) if isinstance(document, dict) else document._asdict()
        added = {**fields, self.language_field: language, self.score_field: score}
        yield added if isinstance(document, dict) else beam.Row(**added)


def _tagged(document: Any, wanted: set[str], min_score: float, language_field: str, score_field: str
            ) -> tuple[str, Any]:
    """``(output, document)``: its language's output, or ``OTHER``."""
    fields = document if isinstance(document, dict) else document._asdict()
    language, score = fields[language_field], fields[score_field]
    return (language if language in wanted and score >= min_score else OTHER), document


def _identified_type(document_type: Any, language_field: str, score_field: str) -> Any:
    """For schema'd Rows, their schema with the two fields; for dicts, ``Any``."""
    if not isinstance(document_type, RowTypeConstraint):
        return Any
    fields = {**dict(document_type._fields), language_field: str, score_field: float}
    return RowTypeConstraint.from_fields(list(fields.items()))
