"""How the filters cut a document into words, lines, paragraphs and n-grams.

The cuts are NeMo Curator's (``stages/text/utils/text_utils.py``), so that scores agree: a "sentence"
is a non-blank line, a paragraph is what lies between two newlines in a row, and English words are
what ``str.split`` separates.
"""

from __future__ import annotations

from collections.abc import Callable

WordSplitter = Callable[[str], list[str]]

# Languages written without spaces between words: NeMo Curator segments them with jieba (zh) and
# MeCab (ja), which this package does not ship.
_SEGMENTED_LANGUAGES = {"zh": "Chinese (NeMo Curator segments it with jieba)",
                        "ja": "Japanese (NeMo Curator segments it with MeCab)"}


def split_on_whitespace(text: str) -> list[str]:
    """Words as runs of non-whitespace: every language written with spaces between words."""
    return text.split()


def get_word_splitter(language: str) -> WordSplitter:
    """The word splitter for an ISO 639-1 ``language`` code.

    Raises ``ValueError`` for Chinese and Japanese rather than splitting them on whitespace, which
    would count a whole sentence as one word and keep or drop the wrong documents without a sign.
    """
    language = language.lower()
    if language in _SEGMENTED_LANGUAGES:
        raise ValueError(
            f"lang={language!r}: {_SEGMENTED_LANGUAGES[language]} needs a word segmenter, which beam_curator "
            "does not have yet; only languages written with spaces between words are supported "
            "(any other lang splits words on whitespace)")
    return split_on_whitespace


def get_paragraphs(document: str) -> list[str]:
    """The document cut at each blank line ("\\n\\n"); an empty document is one empty paragraph."""
    return document.split("\n\n")


def get_sentences(document: str) -> list[str]:
    """The document's non-blank lines: the filters' "sentences"."""
    return [line for line in document.split("\n") if line.strip()]


def get_ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    """Every run of ``n`` consecutive words, in order (none when there are fewer than ``n``)."""
    return list(zip(*(words[start:] for start in range(n))))


def is_paragraph_indices_in_top_or_bottom_only(boilerplate_paragraph_indices: list[int], num_paragraphs: int) -> bool:
    """Whether the (ascending) flagged paragraphs form one unbroken run that touches the document's
    first or last paragraph, without being all of it: boilerplate a page wraps around its content,
    which can be cut away leaving the content."""
    indices = boilerplate_paragraph_indices
    if len(indices) == num_paragraphs:
        return False
    unbroken = all(later == earlier + 1 for earlier, later in zip(indices, indices[1:]))
    return unbroken and (indices[0] == 0 or indices[-1] == num_paragraphs - 1)
