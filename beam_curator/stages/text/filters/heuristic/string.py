"""The string heuristics of NeMo Curator (``filters/heuristic/string.py``), mostly from Gopher (Rae et
al., 2021) and Google's C4: character, word and line statistics with NeMo Curator's defaults, score
names and keep decisions.

Where NeMo Curator's filter would divide by zero (a document without words or lines), the document
scores as if it failed, as NeMo Curator scores an empty document in its character ratios: empty text
is dropped rather than stopping the run.
"""

from __future__ import annotations

import re
from typing import Literal

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.heuristic.words import WordsFilter, share
from beam_curator.stages.text.utils.constants import (
    bullet_list,
    common_english_words,
    ellipsis_marks,
    end_marks,
    policy_substrings,
    regex_alpha,
    regex_alphanum,
    regex_digit,
    regex_hash,
    regex_paren,
    regex_url,
    white_space_list,
)
from beam_curator.stages.text.utils.text_utils import get_paragraphs, get_sentences, split_on_whitespace

UrlRegex = re.Pattern | str | None


def _url_pattern(url_regex: UrlRegex) -> re.Pattern:
    """A given pattern as it is, a string compiled, or the package's URL pattern for None."""
    return re.compile(url_regex) if isinstance(url_regex, str) else (url_regex or regex_url)


class NonAlphaNumericFilter(DocumentFilter):
    """Drops a document whose share of characters other than ASCII letters, digits, newlines and
    ``?!,.`` exceeds ``max_non_alpha_numeric_to_text_ratio``. Meant for English."""

    def __init__(self, max_non_alpha_numeric_to_text_ratio: float = 0.25) -> None:
        super().__init__()
        self.max_non_alpha_numeric_to_text_ratio = max_non_alpha_numeric_to_text_ratio
        self._name = "alpha_numeric"

    def score_document(self, text: str) -> float:
        return share(len(text) - len(regex_alphanum.findall(text)), len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_non_alpha_numeric_to_text_ratio


class SymbolsToWordsFilter(WordsFilter):
    """Drops a document whose share of symbol words exceeds ``max_symbol_to_word_ratio``: a word that
    is an ellipsis mark, or whose runs of ``#`` number more than half its length (so "#" and "#a"
    count, "##" does not)."""

    def __init__(self, max_symbol_to_word_ratio: float = 0.1, lang: str = "en") -> None:
        super().__init__(lang)
        self.max_symbol_to_word_ratio = max_symbol_to_word_ratio
        self._name = "symbol_to_word"

    def score_document(self, text: str) -> float:
        words = [word.strip() for word in self.words(text)]
        symbols = sum(1 for word in words
                      if word in ellipsis_marks or len(regex_hash.findall(word)) / len(word) > 0.5)
        return share(symbols, len(words), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_symbol_to_word_ratio


class NumbersFilter(DocumentFilter):
    """Drops a document whose share of digit characters exceeds ``max_number_to_text_ratio``."""

    def __init__(self, max_number_to_text_ratio: float = 0.15) -> None:
        super().__init__()
        self.max_number_to_text_ratio = max_number_to_text_ratio
        self._name = "numbers_ratio"

    def score_document(self, text: str) -> float:
        return share(len(regex_digit.findall(text)), len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_number_to_text_ratio


class UrlsFilter(DocumentFilter):
    """Drops a document whose share of characters inside URLs exceeds ``max_url_to_text_ratio``.

    ``url_regex`` (a pattern or its text) replaces the default http(s) URL pattern, for a corpus where
    it is too strict or too loose."""

    def __init__(self, max_url_to_text_ratio: float = 0.2, url_regex: UrlRegex = None) -> None:
        super().__init__()
        self.max_url_to_text_ratio = max_url_to_text_ratio
        self._url_regex = _url_pattern(url_regex)
        self._name = "urls_ratio"

    def score_document(self, text: str) -> float:
        url_characters = sum(len(url) for url in self._url_regex.findall(text))
        return share(url_characters, len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_url_to_text_ratio


class BulletsFilter(DocumentFilter):
    """Drops a document whose share of non-blank lines opening with a bullet exceeds
    ``max_bullet_lines_ratio``."""

    def __init__(self, max_bullet_lines_ratio: float = 0.9) -> None:
        super().__init__()
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self._name = "bullet_ratio"

    def score_document(self, text: str) -> float:
        lines = get_sentences(text)
        bulleted = sum(1 for line in lines if line.strip()[:1] in bullet_list)
        return share(bulleted, len(lines), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_bullet_lines_ratio


class WhiteSpaceFilter(DocumentFilter):
    """Drops a document whose share of tabs, newlines, carriage returns, backspaces and spaces
    (leading and trailing ones included) exceeds ``max_white_space_ratio``."""

    def __init__(self, max_white_space_ratio: float = 0.25) -> None:
        super().__init__()
        self.max_white_space_ratio = max_white_space_ratio
        self._name = "white_space"

    def score_document(self, text: str) -> float:
        return share(sum(1 for character in text if character in white_space_list), len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_white_space_ratio


class ParenthesesFilter(DocumentFilter):
    """Drops a document whose share of bracket characters (``()[]{}⟨⟩``) exceeds
    ``max_parentheses_ratio``."""

    def __init__(self, max_parentheses_ratio: float = 0.1) -> None:
        super().__init__()
        self.max_parentheses_ratio = max_parentheses_ratio
        self._name = "parentheses_ratio"

    def score_document(self, text: str) -> float:
        return share(len(regex_paren.findall(text)), len(text), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_parentheses_ratio


class LongWordFilter(WordsFilter):
    """Drops a document with a word longer than ``max_word_length`` characters (from C4; it catches
    minified code with no spaces). The score is the longest word's length, 0 without words."""

    def __init__(self, max_word_length: int = 1000, lang: str = "en") -> None:
        super().__init__(lang)
        self.max_word_length = max_word_length
        self._name = "max_word_length"

    def score_document(self, text: str) -> int:
        return max((len(word) for word in self.words(text)), default=0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_word_length


class WordCountFilter(WordsFilter):
    """Keeps a document of ``min_words`` to ``max_words`` words, both included."""

    def __init__(self, min_words: int = 50, max_words: int = 100000, lang: str = "en") -> None:
        super().__init__(lang)
        self.min_words = min_words
        self.max_words = max_words
        self._name = "word_count"

    def score_document(self, text: str) -> int:
        return len(self.words(text))

    def keep_document(self, score: float) -> bool:
        return self.min_words <= score <= self.max_words


class BoilerPlateStringFilter(DocumentFilter):
    """Drops a document whose share of paragraphs holding a policy or cookie phrase exceeds
    ``max_boilerplate_string_ratio``, and any document holding "lorem ipsum" (score 1.0). From C4.

    ``remove_if_at_top_or_bottom`` is accepted as NeMo Curator accepts it; the score does not depend
    on it (``BoilerPlateStringModifier`` is what cuts boilerplate from the top or bottom).
    """

    def __init__(self, remove_if_at_top_or_bottom: bool = True, max_boilerplate_string_ratio: float = 0.4) -> None:
        super().__init__()
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom
        self.max_boilerplate_string_ratio = max_boilerplate_string_ratio
        self._name = "boilerplate_string_ratio"

    def score_document(self, text: str) -> float:
        paragraphs = [paragraph.strip().lower() for paragraph in get_paragraphs(text)]
        if any("lorem ipsum" in paragraph for paragraph in paragraphs):
            return 1.0
        flagged = sum(1 for paragraph in paragraphs if any(phrase in paragraph for phrase in policy_substrings))
        return flagged / len(paragraphs)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_boilerplate_string_ratio


class MeanWordLengthFilter(WordsFilter):
    """Keeps a document whose mean word length is from ``min_mean_word_length`` to
    ``max_mean_word_length`` characters, both included (0 without words, so dropped)."""

    def __init__(self, min_mean_word_length: int = 3, max_mean_word_length: int = 10, lang: str = "en") -> None:
        super().__init__(lang)
        self.min_mean_word_length = min_mean_word_length
        self.max_mean_word_length = max_mean_word_length
        self._name = "mean_word_length"

    def score_document(self, text: str) -> float:
        lengths = [len(word) for word in self.words(text) if word]
        return share(sum(lengths), len(lengths), when_empty=0.0)

    def keep_document(self, score: float) -> bool:
        return self.min_mean_word_length <= score <= self.max_mean_word_length


class PunctuationFilter(DocumentFilter):
    """Drops a document whose share of non-blank lines not ending in ``. ? ! " '`` exceeds
    ``max_num_sentences_without_endmark_ratio``. From C4."""

    def __init__(self, max_num_sentences_without_endmark_ratio: float = 0.85) -> None:
        super().__init__()
        self.max_num_sentences_without_endmark_ratio = max_num_sentences_without_endmark_ratio
        self._name = "punctuation"

    def score_document(self, text: str) -> float:
        lines = get_sentences(text)
        unended = sum(1 for line in lines if not line.strip().endswith(end_marks))
        return share(unended, len(lines), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_num_sentences_without_endmark_ratio


class EllipsisFilter(DocumentFilter):
    """Drops a document whose share of non-blank lines ending in an ellipsis ("...", "…", "read more"
    and the like) exceeds ``max_num_lines_ending_with_ellipsis_ratio``. From C4."""

    def __init__(self, max_num_lines_ending_with_ellipsis_ratio: float = 0.3) -> None:
        super().__init__()
        self.max_num_lines_ending_with_ellipsis_ratio = max_num_lines_ending_with_ellipsis_ratio
        self._name = "ellipsis"

    def score_document(self, text: str) -> float:
        lines = get_sentences(text)
        trailing = sum(1 for line in lines if line.strip().lower().endswith(tuple(ellipsis_marks)))
        return share(trailing, len(lines), when_empty=1.0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_num_lines_ending_with_ellipsis_ratio


class CommonEnglishWordsFilter(DocumentFilter):
    """Keeps a document with at least ``min_num_common_words`` of a few very common English words,
    matched in lower case only, so that text in capitals scores low.

    With ``stop_at_false`` (the default) counting stops once the minimum is reached, so the score is
    at most ``min_num_common_words``. Words are always split on whitespace: the list is English.
    """

    def __init__(self, min_num_common_words: int = 2, stop_at_false: bool = True) -> None:
        super().__init__()
        self.min_num_common_words = min_num_common_words
        self.stop_at_false = stop_at_false
        self._name = "common_english_words"

    def score_document(self, text: str) -> int:
        found = 0
        for word in split_on_whitespace(text.strip()):
            found += word in common_english_words
            if self.stop_at_false and found >= self.min_num_common_words:
                break
        return found

    def keep_document(self, score: int) -> bool:
        return score >= self.min_num_common_words


class WordsWithoutAlphabetsFilter(WordsFilter):
    """Keeps a document in which the share of words holding at least one letter (Unicode Alphabetic)
    is at least ``min_words_with_alphabets`` (0 without words, so dropped). From Gopher."""

    def __init__(self, min_words_with_alphabets: float = 0.8, lang: str = "en") -> None:
        super().__init__(lang)
        self.min_words_with_alphabets = min_words_with_alphabets
        self._name = "words_without_alphabets"

    def score_document(self, text: str) -> float:
        words = self.words(text)
        return share(sum(1 for word in words if regex_alpha.search(word)), len(words), when_empty=0.0)

    def keep_document(self, score: float) -> bool:
        return score >= self.min_words_with_alphabets


class PornographicUrlsFilter(DocumentFilter):
    """Drops a document with a URL containing "porn" (score 1, else 0). ``url_regex`` replaces the
    default URL pattern, as for ``UrlsFilter``."""

    def __init__(self, url_regex: UrlRegex = None) -> None:
        super().__init__()
        self._url_regex = _url_pattern(url_regex)

    def score_document(self, text: str) -> int:
        return int(any("porn" in url for url in self._url_regex.findall(text)))

    def keep_document(self, score: int) -> bool:
        return score != 1


class SubstringFilter(DocumentFilter):
    """Keeps a document holding ``substring`` at its start ("prefix"), its end ("suffix") or anywhere
    ("any"): score 1 where it does, 0 where not."""

    def __init__(self, substring: str, position: Literal["prefix", "suffix", "any"]) -> None:
        super().__init__()
        if position not in ("prefix", "suffix", "any"):
            raise ValueError(f"Invalid position: {position!r}; it must be 'prefix', 'suffix' or 'any'")
        self.substring = substring
        self.position = position

    def score_document(self, text: str) -> int:
        if self.position == "prefix":
            return int(text.startswith(self.substring))
        if self.position == "suffix":
            return int(text.endswith(self.substring))
        return int(self.substring in text)

    def keep_document(self, score: int) -> bool:
        return score == 1
