"""What the heuristic filters share: splitting a document into words by its language, and ratios
that give a set value where there is nothing to divide by."""

from __future__ import annotations

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.utils.text_utils import get_word_splitter


class WordsFilter(DocumentFilter):
    """A filter that looks at words: it takes NeMo Curator's ``lang`` setting, which chooses how words
    are split (on whitespace for "en" and every language written with spaces)."""

    def __init__(self, lang: str = "en") -> None:
        super().__init__()
        self.lang = lang
        self._split_words = get_word_splitter(lang)

    def words(self, text: str) -> list[str]:
        """The document's words, leading and trailing whitespace aside."""
        return self._split_words(text.strip())


def share(count: float, total: float, when_empty: float) -> float:
    """``count / total``, or ``when_empty`` when there is no total: the score that drops a document
    with nothing in it (NeMo Curator's choice for its character ratios, and ours where its filters
    would divide by zero)."""
    return count / total if total else when_empty
