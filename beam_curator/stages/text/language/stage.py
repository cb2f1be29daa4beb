"""``LanguageIdentifier``: the language and its score on every document of a batch, and optionally
only the documents in some languages."""

from __future__ import annotations

from collections.abc import Iterable

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.columns import column_values, keep_rows, put_column, with_table
from beam_curator.stages.text.language.identify import cascade, identify_language
from beam_curator.tasks import DocumentBatch


class LanguageIdentifier(ProcessingStage):
    """Writes each document's language (``language_field``: an ISO 639-1 code such as ``"en"``, or
    lid.176's code for a language without one) and the probability that it is right
    (``score_field``, 0 to 1); a text of whitespace only, or a null, gets ``""`` and 0.0.

    Needs no download: the models come in the ``langid`` extra's wheels (``identify``). They are
    loaded once per worker process, in ``setup``.

    Args:
        text_field: the column identified.
        languages: keep only the documents in these languages (codes as written to
            ``language_field``); None keeps every language.
        min_score: keep only the documents whose score is at least this.
        language_field, score_field: the columns written.
        name: the stage's name.
    """

    def __init__(self, text_field: str = "text", languages: Iterable[str] | None = None, min_score: float = 0.0,
                 language_field: str = "language", score_field: str = "language_score",
                 name: str = "language_identifier") -> None:
        self.text_field = text_field
        self.languages = None if languages is None else checked_languages(languages)
        self.min_score = checked_min_score(min_score)
        self.language_field = language_field
        self.score_field = score_field
        self.name = name

    def setup(self) -> None:
        """Load the models before the first batch, so that no batch's time includes it."""
        cascade()

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        found = [identify_language(text) for text in column_values(table, self.text_field)]
        table = put_column(table, self.language_field, [language for language, _ in found])
        table = put_column(table, self.score_field, [score for _, score in found])
        if self.languages is not None or self.min_score > 0:
            wanted = set(self.languages) if self.languages is not None else None
            table = keep_rows(table, [(wanted is None or language in wanted) and score >= self.min_score
                                      for language, score in found])
        return with_table(task, table)


def checked_languages(languages: Iterable[str]) -> list[str]:
    """The ``languages`` setting, sorted without repeats, each a code the identifier can answer; a
    string alone (``"en"``) is refused rather than read as the languages ``e`` and ``n``."""
    if isinstance(languages, str):
        raise TypeError(f"languages is a list of codes, such as [{languages!r}], not a string")
    codes = list(languages)
    unknown = sorted(set(codes) - set(cascade().languages()))
    if unknown:
        raise ValueError(f"languages {unknown} are not codes the identifier answers; it knows "
                         f"{', '.join(cascade().languages())}")
    return sorted(set(codes))


def checked_min_score(min_score: float) -> float:
    """The ``min_score`` setting: a probability."""
    if not 0.0 <= min_score <= 1.0:
        raise ValueError(f"min_score is a probability, from 0 to 1, not {min_score!r}")
    return float(min_score)
