"""How the filters cut a document into words, lines, paragraphs and n-grams.

The cuts are NeMo Curator's (``stages/text/utils/text_utils.py``), so that scores agree: a "sentence"
is a non-blank line, a paragraph is what lies between two newlines in a row, and English words are
what ``str.split`` separates.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable

WordSplitter = Callable[[str], list[str]]

# Languages written without spaces between words: NeMo Curator splits Chinese with jieba and Japanese
# with MeCab, here with unidic-lite, a MeCab dictionary that installs from the package index. Both come
# with the ``cjk`` extra. Each language: its name, and the packages it needs (one of each tuple's modules).
_SEGMENTED = {"zh": ("Chinese", {"jieba": ("jieba",)}),
              "ja": ("Japanese", {"mecab-python3": ("MeCab",), "unidic-lite": ("unidic_lite", "unidic")})}
_taggers = threading.local()  # a MeCab tagger per thread: one parses one text at a time


def split_on_whitespace(text: str) -> list[str]:
    """Words as runs of non-whitespace: every language written with spaces between words."""
    return text.split()


def split_chinese(text: str) -> list[str]:
    """jieba's words, without the whitespace it returns between them (as ``str.split`` drops it)."""
    import jieba

    if not jieba.dt.initialized:
        jieba.setLogLevel(logging.WARNING)  # it announces loading its dictionary on stderr, in every worker
    return [word for word in jieba.cut(text) if word.strip()]


def split_japanese(text: str) -> list[str]:
    """MeCab's morphemes: the surface form that starts each line of its output, up to ``EOS``."""
    tagger = getattr(_taggers, "tagger", None)
    if tagger is None:
        import MeCab

        tagger = _taggers.tagger = MeCab.Tagger()
    lines = tagger.parse(text).strip().split("\n")
    return [line.split("\t")[0] for line in lines if line and line != "EOS"]


def get_word_splitter(language: str) -> WordSplitter:
    """The word splitter for an ISO 639-1 ``language`` code: jieba for "zh", MeCab for "ja", whitespace
    for every other language. A module-level function, so that a filter holding it pickles to workers.

    Raises ``ImportError`` naming the ``cjk`` extra when Chinese or Japanese is asked for without it,
    as the filter is built, before any document is read (splitting them on whitespace would count a
    whole sentence as one word and keep or drop the wrong documents without a sign).
    """
    language = language.lower()
    if language not in _SEGMENTED:
        return split_on_whitespace
    name, packages = _SEGMENTED[language]
    missing = [package for package, modules in packages.items()
               if not any(importlib.util.find_spec(module) for module in modules)]
    if missing:
        raise ImportError(
            f"lang={language!r}: {name} is split into words with {' and '.join(packages)}, as NeMo Curator does, "
            f"and {', '.join(missing)} is not installed: pip install 'beam-curator[cjk]'")
    return split_chinese if language == "zh" else split_japanese


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
