"""FineWeb's own quality rules (Penedo et al. 2024, "The FineWeb Datasets") as datatrove 0.10 applies
them, with its class name, parameters, defaults and drop reasons."""

from __future__ import annotations

from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.stages.text.filters.datatrove_rules.gopher import repeated
from beam_curator.stages.text.filters.datatrove_rules.punctuation import TERMINAL_PUNCTUATION
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule, refuse_exclusion_writer
from beam_curator.stages.text.filters.datatrove_rules.words import check_language


class FineWebQualityFilter(DatatroveRule):
    """Drops documents whose non-blank lines too seldom end in sentence-ending punctuation, are mostly
    short, repeat too many characters, or that have too many newlines per word (lists).

    ``stop_chars`` are the line endings counted as ending a sentence (by default the Unicode
    sentence terminals, as datatrove's).
    """

    def __init__(self, exclusion_writer: None = None, line_punct_thr: float = 0.12,
                 line_punct_exclude_zero: bool = False, stop_chars: tuple[str, ...] | None = None,
                 short_line_thr: float = 0.67, short_line_length: int = 30, char_duplicates_ratio: float = 0.01,
                 new_line_ratio: float = 0.3, language: str = "eng", text_field: str = "text",
                 reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        check_language(language)
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.stop_chars = tuple(sorted(TERMINAL_PUNCTUATION)) if stop_chars is None else tuple(stop_chars)
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.language = language
        # single-character stops (the default's 159) are checked by set lookup rather than 159 comparisons
        self._single_stops = frozenset(self.stop_chars) if all(len(stop) == 1 for stop in self.stop_chars) else None

    def check(self, doc: Document) -> str | None:
        text = doc.text
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return "empty"
        ratio = self._ending_sentences(lines) / len(lines)
        if ratio < self.line_punct_thr and not (ratio == 0 and self.line_punct_exclude_zero):
            return "line_punct_ratio"
        if sum(len(line) <= self.short_line_length for line in lines) / len(lines) > self.short_line_thr:
            return "short_line_ratio"
        if repeated(lines)[1] / (len(text) - text.count("\n")) > self.char_duplicates_ratio:
            return "char_dup_ratio"
        if text.count("\n") / len(doc.words) > self.new_line_ratio:
            return "list_ratio"
        return None

    def _ending_sentences(self, lines: list[str]) -> int:
        """How many (non-empty) lines end with one of ``stop_chars``."""
        if self._single_stops is not None:
            return sum(line[-1] in self._single_stops for line in lines)
        return sum(line.endswith(self.stop_chars) for line in lines)
