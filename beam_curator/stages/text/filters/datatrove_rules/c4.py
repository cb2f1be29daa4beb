"""C4's quality and paragraph rules (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", section 2.2; mC4's paragraph rule) as datatrove 0.10
applies them, with its class names, parameters, defaults and drop reasons."""

from __future__ import annotations

import re

from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule, refuse_exclusion_writer
from beam_curator.stages.text.filters.datatrove_rules.words import check_language, english

# Wikipedia's citation marks: "[12]", "[]", "[edit]", "[citation needed]".
_CITATIONS = re.compile(r"\[(?:\d*|edit|citation needed)\]")
_SENTENCE_ENDS = (".", "?", "!", '"', "'")
# Lines about cookies and terms of use, which C4's code drops.
_POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


class C4QualityFilter(DatatroveRule):
    """C4's rules: keeps only the lines (or, with ``split_paragraph=False``, sentences) that end in
    sentence-ending punctuation (not an ellipsis), have ``min_words_per_line`` words, no word over
    ``max_word_length`` characters, and no mention of javascript or cookie and terms-of-use phrases;
    removes Wikipedia citation marks; drops documents with "lorem ipsum" or a curly bracket on a line
    it would keep, or with fewer than ``min_num_sentences`` sentences left. -1 turns a count off.

    As a stage it writes the kept documents' remaining lines back as their text, as datatrove does.
    """

    def __init__(self, exclusion_writer: None = None, split_paragraph: bool = True, remove_citations: bool = True,
                 filter_no_terminal_punct: bool = True, min_num_sentences: int = 5, min_words_per_line: int = 3,
                 max_word_length: int = 1000, filter_lorem_ipsum: bool = True, filter_javascript: bool = True,
                 filter_curly_bracket: bool = True, filter_policy: bool = True, language: str = "eng",
                 text_field: str = "text", reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        check_language(language)
        self.split_paragraph = split_paragraph
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.min_num_sentences = min_num_sentences
        self.min_words_per_line = min_words_per_line
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_javascript = filter_javascript
        self.filter_curly_bracket = filter_curly_bracket
        self.filter_policy = filter_policy
        self.language = language

    def check(self, doc: Document) -> str | None:
        tokenizer = english()
        pieces = doc.lines if self.split_paragraph else tokenizer.sentences(doc.text)
        sentences = 0
        kept = []
        for line in pieces:
            line = line.strip()
            words = line.split()
            if (self.max_word_length != -1 and len(line) > self.max_word_length
                    and any(len(word) > self.max_word_length for word in words)):
                continue
            if self.remove_citations and "[" in line:
                line = _CITATIONS.sub("", line)
            if self.filter_no_terminal_punct and (not line.endswith(_SENTENCE_ENDS) or line.endswith("...")):
                continue
            if len(words) < self.min_words_per_line:
                continue
            lowered = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lowered:
                return "lorem_ipsum"
            if self.filter_javascript and "javascript" in lowered:
                continue
            if self.filter_curly_bracket and "{" in line:
                return "curly_bracket"
            if self.filter_policy and any(phrase in lowered for phrase in _POLICY_PHRASES):
                continue
            # Only whether the count reaches min_num_sentences matters, so counting stops there.
            if sentences < self.min_num_sentences:
                sentences += tokenizer.sentence_count(line) if self.split_paragraph else 1
            kept.append(line)
        if sentences < self.min_num_sentences:
            return "too_few_sentences"
        doc.text = ("\n" if self.split_paragraph else " ").join(kept).strip()
        return None


class C4ParagraphFilter(DatatroveRule):
    """mC4's paragraph rule: drops documents without three lines ("paragraphs") of at least 200
    characters. As in datatrove, the numbers are fixed, not parameters."""

    def __init__(self, exclusion_writer: None = None, text_field: str = "text",
                 reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        self.min_paragraphs = 3
        self.min_paragraph_len = 200
        self.line_delimiter = "\n"

    def check(self, doc: Document) -> str | None:
        long_lines = 0
        # Too short to hold the long lines and the delimiters between them: no need to split it.
        if len(doc.text) >= self.min_paragraphs * (self.min_paragraph_len + len(self.line_delimiter)) - 1:
            long_lines = sum(len(line) >= self.min_paragraph_len for line in doc.text.split(self.line_delimiter))
        if long_lines < self.min_paragraphs:
            return f"< {self.min_paragraphs} paragraphs"
        return None
