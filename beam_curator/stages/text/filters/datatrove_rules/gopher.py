"""Gopher's quality and repetition rules (Rae et al. 2021, "Scaling Language Models: Methods,
Analysis & Insights from Training Gopher", appendix A.1) as datatrove 0.10 applies them, with its
class names, parameters, defaults and drop reasons."""

from __future__ import annotations

import re
from collections import Counter
from operator import itemgetter

from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.stages.text.filters.datatrove_rules.punctuation import SYMBOLS
from beam_curator.stages.text.filters.datatrove_rules.ratios import above, below
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule, refuse_exclusion_writer
from beam_curator.stages.text.filters.datatrove_rules.words import check_language

# datatrove's default stop words: a document needs ``min_stop_words`` of them to be prose.
DEFAULT_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")

_SYMBOL_CHARS = "".join(sorted(SYMBOLS))


class GopherQualityFilter(DatatroveRule):
    """Drops documents too short or too long, with too short or too long words on average, too many
    "#" or ellipses, mostly bullet lines or lines ending in ellipses, too few words with letters,
    or too few stop words. A threshold set to None (or 0) turns its check off.

    Words are datatrove's (spaCy's English tokenizer); the length checks count only words with a
    character outside datatrove's punctuation set.
    """

    def __init__(self, min_doc_words: int | None = 50, max_doc_words: int | None = 100000,
                 min_avg_word_length: int | None = 3, max_avg_word_length: int | None = 10,
                 max_symbol_word_ratio: float | None = 0.1, max_bullet_lines_ratio: float | None = 0.9,
                 max_ellipsis_lines_ratio: float | None = 0.3, max_non_alpha_words_ratio: float | None = 0.8,
                 min_stop_words: int | None = 2, stop_words: list[str] | None = None, exclusion_writer: None = None,
                 language: str = "eng", text_field: str = "text", reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        check_language(language)
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio  # datatrove's name: the least share of words with a letter
        self.min_stop_words = min_stop_words
        self.stop_words = frozenset(DEFAULT_STOP_WORDS if stop_words is None else stop_words)
        self.language = language

    def check(self, doc: Document) -> str | None:
        text, words = doc.text, doc.words
        n_words = len(words)
        lengths = [len(word) for word in words if word.strip(_SYMBOL_CHARS)]
        if self.min_doc_words and len(lengths) < self.min_doc_words:
            return "gopher_short_doc"
        if self.max_doc_words and len(lengths) > self.max_doc_words:
            return "gopher_long_doc"
        # datatrove's numpy mean of no words is NaN, which passes both length checks
        if lengths:
            mean_length = sum(lengths) / len(lengths)
            if self.min_avg_word_length and mean_length < self.min_avg_word_length:
                return "gopher_below_avg_threshold"
            if self.max_avg_word_length and mean_length > self.max_avg_word_length:
                return "gopher_above_avg_threshold"
        if self.max_symbol_word_ratio:
            if above(text.count("#"), n_words, self.max_symbol_word_ratio):
                return "gopher_too_many_hashes"
            if above(text.count("...") + text.count("\u2026"), n_words, self.max_symbol_word_ratio):
                return "gopher_too_many_ellipsis"
        lines = doc.lines
        if self.max_bullet_lines_ratio and above(
                sum(line.lstrip().startswith(("\u2022", "-")) for line in lines), len(lines),
                self.max_bullet_lines_ratio):
            return "gopher_too_many_bullets"
        if self.max_ellipsis_lines_ratio and above(
                sum(line.rstrip().endswith(("...", "\u2026")) for line in lines), len(lines),
                self.max_ellipsis_lines_ratio):
            return "gopher_too_many_end_ellipsis"
        if self.max_non_alpha_words_ratio and below(
                sum(word.isalpha() or any(char.isalpha() for char in word) for word in words), n_words,
                self.max_non_alpha_words_ratio):
            return "gopher_below_alpha_threshold"
        if self.min_stop_words and len(self.stop_words.intersection(words)) < self.min_stop_words:
            return "gopher_enough_stop_words"  # datatrove's name for too few of them
        return None


class GopherRepetitionFilter(DatatroveRule):
    """Drops documents that repeat themselves: too many repeated paragraphs or lines (as a share of
    them, or of the characters), a most frequent 2-, 3- or 4-gram covering too many characters, or
    repeated 5- to 10-grams covering too many. Each pair is ``(n, largest share of characters)``.
    """

    def __init__(self, dup_line_frac: float | None = 0.3, dup_para_frac: float | None = 0.3,
                 dup_line_char_frac: float | None = 0.2, dup_para_char_frac: float | None = 0.2,
                 top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16)),
                 dup_n_grams: tuple[tuple[int, float], ...] = (
                     (5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
                 exclusion_writer: None = None, language: str = "eng", text_field: str = "text",
                 reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        check_language(language)
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = tuple(tuple(pair) for pair in top_n_grams)
        self.dup_n_grams = tuple(tuple(pair) for pair in dup_n_grams)
        self.language = language

    def check(self, doc: Document) -> str | None:
        text = doc.text
        if not text:
            return "empty"
        paragraphs = _PARAGRAPH_BREAK.split(text.strip())
        repeats, repeated_chars = repeated(paragraphs)
        if self.dup_para_frac and repeats / len(paragraphs) > self.dup_para_frac:
            return "dup_para_frac"
        if self.dup_para_char_frac and repeated_chars / len(text) > self.dup_para_char_frac:
            return "dup_para_char_frac"
        lines = _LINE_BREAKS.split(text)
        repeats, repeated_chars = repeated(lines)
        if self.dup_line_frac and repeats / len(lines) > self.dup_line_frac:
            return "dup_line_frac"
        if self.dup_line_char_frac and repeated_chars / len(text) > self.dup_line_char_frac:
            return "dup_line_char_frac"
        words = doc.words
        for n, largest_share in self.top_n_grams:
            if len(words) >= n and top_ngram_chars(words, n) / len(text) > largest_share:
                return f"top_{n}_gram"
        for n, largest_share in self.dup_n_grams:
            if repeated_ngram_chars(words, n) / len(text) > largest_share:
                return f"duplicated_{n}_n_grams"
        return None


_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_LINE_BREAKS = re.compile(r"\n+")


def repeated(items: list[str]) -> tuple[int, int]:
    """How many items equal an earlier one, and their characters."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def top_ngram_chars(words: list[str], n: int) -> int:
    """The characters of the most frequent n-gram (words joined by spaces) times its count; of equally
    frequent ones, the first in the text, as ``Counter.most_common`` picks. Words hold no spaces, so
    tuples of words are equal exactly when their joined strings are."""
    counts = Counter(zip(*(words[start:] for start in range(n))))
    gram, count = max(counts.items(), key=itemgetter(1))
    return (sum(map(len, gram)) + n - 1) * count


def repeated_ngram_chars(words: list[str], n: int) -> int:
    """The characters of the repeated n-grams, each joined without spaces, scanning from the start:
    an n-gram seen before counts and the scan jumps past it, otherwise it steps one word on.

    Most texts repeat no n-gram at all, which a set of all of them shows without the scan.
    """
    grams = list(map("".join, zip(*(words[start:] for start in range(n)))))
    if len(set(grams)) == len(grams):
        return 0
    seen: set[str] = set()
    chars = index = 0
    while index < len(grams):
        gram = grams[index]
        if gram in seen:
            chars += len(gram)
            index += n
        else:
            seen.add(gram)
            index += 1
    return chars
