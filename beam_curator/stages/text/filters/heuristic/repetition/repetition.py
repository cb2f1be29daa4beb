"""The repetition heuristics of Gopher (Rae et al., 2021) as NeMo Curator implements them
(``filters/heuristic/repetition``): how much of a document repeated lines, paragraphs or n-grams
account for, with NeMo Curator's defaults, score names and keep decisions.

The line and paragraph filters score the share that remains after removing duplicates (keep at or
above the cutoff); the n-gram filters score the share of characters the repetition covers (keep at
or below it). Where NeMo Curator's filter would divide by zero (no lines), the document scores as if
it failed.
"""

from __future__ import annotations

from collections import Counter

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.heuristic.words import WordsFilter, share
from beam_curator.stages.text.utils.text_utils import get_ngrams, get_paragraphs, get_sentences


def _distinct_share(parts: list[str]) -> float:
    """Distinct parts over all parts (0.0 without parts)."""
    return share(len(set(parts)), len(parts), when_empty=0.0)


def _distinct_characters_share(parts: list[str]) -> float:
    """Characters in the distinct parts over characters in all parts (0.0 without characters)."""
    return share(sum(map(len, set(parts))), sum(map(len, parts)), when_empty=0.0)


class RepeatedLinesFilter(DocumentFilter):
    """Keeps a document whose distinct non-blank lines are at least ``max_repeated_line_fraction`` of
    its non-blank lines."""

    def __init__(self, max_repeated_line_fraction: float = 0.7) -> None:
        super().__init__()
        self.max_repeated_line_fraction = max_repeated_line_fraction
        self._name = "repeated_lines"

    def score_document(self, text: str) -> float:
        return _distinct_share(get_sentences(text))

    def keep_document(self, score: float) -> bool:
        return score >= self.max_repeated_line_fraction


class RepeatedParagraphsFilter(DocumentFilter):
    """Keeps a document whose distinct paragraphs are at least ``max_repeated_paragraphs_ratio`` of
    its paragraphs."""

    def __init__(self, max_repeated_paragraphs_ratio: float = 0.7) -> None:
        super().__init__()
        self.max_repeated_paragraphs_ratio = max_repeated_paragraphs_ratio
        self._name = "repeated_paragraphs"

    def score_document(self, text: str) -> float:
        return _distinct_share(get_paragraphs(text))

    def keep_document(self, score: float) -> bool:
        return score >= self.max_repeated_paragraphs_ratio


class RepeatedLinesByCharFilter(DocumentFilter):
    """Keeps a document whose distinct non-blank lines hold at least ``max_repeated_lines_char_ratio``
    of its non-blank lines' characters."""

    def __init__(self, max_repeated_lines_char_ratio: float = 0.8) -> None:
        super().__init__()
        self.max_repeated_lines_char_ratio = max_repeated_lines_char_ratio
        self._name = "repeated_lines_char"

    def score_document(self, text: str) -> float:
        return _distinct_characters_share(get_sentences(text))

    def keep_document(self, score: float) -> bool:
        return score >= self.max_repeated_lines_char_ratio


class RepeatedParagraphsByCharFilter(DocumentFilter):
    """Keeps a document whose distinct paragraphs hold at least ``max_repeated_paragraphs_char_ratio``
    of its paragraphs' characters."""

    def __init__(self, max_repeated_paragraphs_char_ratio: float = 0.8) -> None:
        super().__init__()
        self.max_repeated_paragraphs_char_ratio = max_repeated_paragraphs_char_ratio
        self._name = "repeated_paragraphs_char"

    def score_document(self, text: str) -> float:
        return _distinct_characters_share(get_paragraphs(text))

    def keep_document(self, score: float) -> bool:
        return score >= self.max_repeated_paragraphs_char_ratio


class RepeatingTopNGramsFilter(WordsFilter):
    """Drops a document in which the most frequent word ``n``-gram, joined by single spaces, covers
    more than ``max_repeating_ngram_ratio`` of the characters (its non-overlapping occurrences in the
    text). A document of fewer than ``n`` words scores 1.0.

    Among n-grams equally frequent, the first in the document is taken. NeMo Curator takes whichever
    its set of n-grams yields first, which changes with Python's string hashing from run to run; so
    its score for a document without a single most frequent n-gram can differ between its own runs.
    """

    def __init__(self, n: int = 2, max_repeating_ngram_ratio: float = 0.2, lang: str = "en") -> None:
        super().__init__(lang)
        self.n = n
        self.max_repeating_ngram_ratio = max_repeating_ngram_ratio
        self._name = f"repeating_top_{n}grams"

    def score_document(self, text: str) -> float:
        words = self.words(text)
        if len(words) < self.n:
            return 1.0
        # Counter keeps first-seen order, and most_common is stable: ties go to the earliest n-gram.
        (top, _), = Counter(get_ngrams(words, self.n)).most_common(1)
        phrase = " ".join(top)
        return share(text.count(phrase) * len(phrase), len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_repeating_ngram_ratio


class RepeatingDuplicateNGramsFilter(WordsFilter):
    """Drops a document in which the word ``n``-grams seen before cover more than
    ``max_repeating_duplicate_ngram_ratio`` of its characters. A document of fewer than ``n`` words
    scores 1.0.

    Each repeated n-gram adds its words' characters and the single spaces between them, counting a
    word that an overlapping repeat just before it already counted only once.
    """

    def __init__(self, n: int = 2, max_repeating_duplicate_ngram_ratio: float = 0.2, lang: str = "en") -> None:
        super().__init__(lang)
        self.n = n
        self.max_repeating_duplicate_ngram_ratio = max_repeating_duplicate_ngram_ratio
        self._name = f"repeating_dup_{n}gram"

    def score_document(self, text: str) -> float:
        words = self.words(text)
        if len(words) < self.n:
            return 1.0
        seen: set[tuple[str, ...]] = set()
        covered = 0
        counted = 0  # how many leading words of the current n-gram a repeat before it already covered
        for ngram in get_ngrams(words, self.n):
            if ngram in seen:
                covered += sum(len(word) for word in ngram[counted:]) + min(self.n - counted, self.n - 1)
                counted = self.n
            seen.add(ngram)
            counted = max(counted - 1, 0)
        return share(covered, len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_repeating_duplicate_ngram_ratio
