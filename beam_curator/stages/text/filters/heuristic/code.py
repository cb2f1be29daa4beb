"""The code heuristics of NeMo Curator (``filters/heuristic/code``), mostly from StarCoder (Li et al.,
2023): comment shares, line counts, tokenizer fertility, XML and data files, boilerplate HTML and
per-extension line and character limits, with NeMo Curator's parameters, defaults, score names and
keep decisions.

Three of them need packages of the ``code`` extra (``pip install 'beam-curator[code]'``):
``GeneralCommentToCodeFilter`` (comment-parser, and python-magic to guess a document's type),
``TokenizerFertilityFilter`` (sentencepiece) and ``HTMLBoilerplateFilter`` (beautifulsoup4). They are
imported as the filter is built, which raises an ImportError naming the extra where one is missing, so
this module imports without them. A filter holds settings only: it is pickled to the workers, and its
attributes are its checkpoint fingerprint, so the SentencePiece model is loaded once per process and
kept here, not on the filter.

Where NeMo Curator's filter would divide by zero (an empty text) or raise on a text, the document
scores as failing the filter, so it is dropped rather than stopping the run.
"""

from __future__ import annotations

import ast
import csv
import functools
import importlib
import io
import logging
import os
import tokenize
from types import ModuleType
from typing import Any, NamedTuple

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.heuristic.words import share
from beam_curator.stages.text.utils.constants import regex_alpha, regex_alphanum

logger = logging.getLogger(__name__)

EXTRA = "pip install 'beam-curator[code]'"


def _package(module: str, package: str, needed_by: str) -> ModuleType:
    """The module ``module`` (of the PyPI ``package``), or an ImportError naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"{needed_by} needs {package}, which cannot be imported ({error}): {EXTRA}") from error


# --- comments ---

# The nodes whose docstrings NeMo Curator counts; an ``async def``'s docstring is not among them.
_DOCUMENTED_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef)


def python_natural_text_length(source: str) -> int | None:
    """The characters of the docstrings (as ``ast.get_docstring`` cleans them, joined by newlines) and
    of the ``#`` comments (the ``#`` included) of Python ``source``; None when it does not parse."""
    try:
        docstrings = [docstring for node in ast.walk(ast.parse(source))
                      if isinstance(node, _DOCUMENTED_NODES) and (docstring := ast.get_docstring(node))]
        comments = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
                    if token.type == tokenize.COMMENT]
    except Exception:  # noqa: BLE001 - whatever stops the parser or the tokenizer, the text is not Python
        return None
    return len("\n".join(docstrings)) + sum(len(comment) for comment in comments)


class _CommentRatioFilter(DocumentFilter):
    """What the two comment filters share: a share of comment characters, kept from
    ``min_comment_to_code_ratio`` to ``max_comment_to_code_ratio``, both included."""

    def __init__(self, min_comment_to_code_ratio: float, max_comment_to_code_ratio: float) -> None:
        super().__init__()
        self._min_threshold = min_comment_to_code_ratio
        self._max_threshold = max_comment_to_code_ratio

    def keep_document(self, score: float) -> bool:
        return self._min_threshold <= score <= self._max_threshold


class PythonCommentToCodeFilter(_CommentRatioFilter):
    """Keeps Python code whose share of comment and docstring characters is from
    ``min_comment_to_code_ratio`` to ``max_comment_to_code_ratio`` (both included): code with no
    explanation teaches a model little prose, and a file of nothing but comments is no code.

    Text that Python cannot parse or tokenize scores 0, as in NeMo Curator, and so does an empty text
    (which NeMo Curator divides by zero on): both are dropped unless the minimum is 0.
    """

    def __init__(self, min_comment_to_code_ratio: float = 0.01, max_comment_to_code_ratio: float = 0.85) -> None:
        super().__init__(min_comment_to_code_ratio, max_comment_to_code_ratio)
        self._name = "python_comment_ratio"

    def score_document(self, text: str) -> float:
        length = python_natural_text_length(text)
        return 0.0 if length is None else share(length, len(text), when_empty=0.0)


# What a text the comment parser fails on scores: NeMo Curator's value, above any sensible maximum.
UNPARSED_COMMENT_RATIO = 9999.0


class GeneralCommentToCodeFilter(_CommentRatioFilter):
    """Keeps code in ``language`` whose share of comment text is from ``min_comment_to_code_ratio`` to
    ``max_comment_to_code_ratio`` (both included), as ``PythonCommentToCodeFilter`` for the languages
    comment-parser reads. The comment markers (``//``, ``/* */``) are not counted; the comments are
    joined by spaces.

    Args:
        language: the MIME type comment-parser reads the code as ("text/x-c", "text/x-c++",
            "text/x-java-source", "application/javascript", "text/x-go", "text/x-ruby",
            "text/x-shellscript", "text/html"...); empty to have libmagic guess each document's type.
            A type comment-parser does not read is refused as the filter is built (NeMo Curator scores
            every document 9999 then, dropping them all with a warning each).

    A document the parser fails on scores ``UNPARSED_COMMENT_RATIO`` (9999), as in NeMo Curator, and an
    empty one 0: both are dropped.
    """

    def __init__(self, language: str, min_comment_to_code_ratio: float = 0.01,
                 max_comment_to_code_ratio: float = 0.85) -> None:
        super().__init__(min_comment_to_code_ratio, max_comment_to_code_ratio)
        parser = _package("comment_parser.comment_parser", "comment-parser", "GeneralCommentToCodeFilter")
        if not language:
            _package("magic", "python-magic (and the libmagic library)", "GeneralCommentToCodeFilter(language='')")
        elif language not in parser.MIME_MAP:
            raise ValueError(f"GeneralCommentToCodeFilter: comment-parser reads no {language!r}; "
                             f"it reads {', '.join(sorted(parser.MIME_MAP))}")
        self._lang = language
        self._name = "comment_ratio"

    def score_document(self, text: str) -> float:
        from comment_parser import comment_parser

        try:
            comments = comment_parser.extract_comments_from_str(text, mime=self._lang)
        except Exception:  # noqa: BLE001 - each parser raises its own errors; any failure scores as in NeMo Curator
            return UNPARSED_COMMENT_RATIO
        return share(len(" ".join(comment.text() for comment in comments)), len(text), when_empty=0.0)


# --- length and tokens ---


class NumberOfLinesOfCodeFilter(DocumentFilter):
    """Keeps a file of ``min_lines`` to ``max_lines`` lines (both included). Lines are counted as
    newlines plus one, so an empty text is one line."""

    def __init__(self, min_lines: int = 10, max_lines: int = 20000) -> None:
        super().__init__()
        self._min_lines = min_lines
        self._max_lines = max_lines
        self._name = "num_lines"

    def score_document(self, text: str) -> int:
        return text.count("\n") + 1

    def keep_document(self, score: int) -> bool:
        return self._min_lines <= score <= self._max_lines


@functools.lru_cache(maxsize=None)
def sentencepiece_model(path: str) -> Any:
    """The SentencePiece model at ``path``, loaded once per process and path."""
    sentencepiece = _package("sentencepiece", "sentencepiece", "TokenizerFertilityFilter")
    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except (OSError, RuntimeError) as error:
        raise ValueError(f"TokenizerFertilityFilter: {path} is not a SentencePiece model file ({error})") from error


class TokenizerFertilityFilter(DocumentFilter):
    """Keeps a document with at least ``min_char_to_token_ratio`` characters per SentencePiece piece:
    text the tokenizer cuts into many short pieces (data, encoded blobs, languages it was not trained
    on) is a poor fit for the model it serves.

    Args:
        path_to_tokenizer: the SentencePiece model file (``.model``); required. A missing file or one
            that is not a model is an error as the filter is built.
        min_char_to_token_ratio: the fewest characters per piece a kept document has.

    A text with no pieces (an empty one) scores -1, as in NeMo Curator. The model is loaded once per
    worker process (``load_model``, which the stages call in ``setup``) and never pickled with the filter.
    """

    def __init__(self, path_to_tokenizer: str | os.PathLike | None = None, min_char_to_token_ratio: float = 2.5) -> None:
        super().__init__()
        if path_to_tokenizer is None:
            raise ValueError("TokenizerFertilityFilter needs path_to_tokenizer: the path of a SentencePiece model file")
        _package("sentencepiece", "sentencepiece", "TokenizerFertilityFilter")
        self._path_to_tokenizer = os.fspath(path_to_tokenizer)
        if not os.path.isfile(self._path_to_tokenizer):
            raise FileNotFoundError(f"TokenizerFertilityFilter: no SentencePiece model file at {self._path_to_tokenizer}")
        self._threshold = min_char_to_token_ratio
        self._name = "tokenizer_fertility"
        self.load_model()

    def load_model(self) -> None:
        """Load the model into this process's cache, if no filter has yet."""
        sentencepiece_model(self._path_to_tokenizer)

    def score_document(self, text: str) -> float:
        pieces = sentencepiece_model(self._path_to_tokenizer).encode_as_pieces(text)
        return share(len(text), len(pieces), when_empty=-1.0)

    def keep_document(self, score: float) -> bool:
        return score >= self._threshold


# --- files that are not what their extension says ---


class XMLHeaderFilter(DocumentFilter):
    """Drops a file holding ``<?xml version=`` in its first ``char_prefix_search_length`` characters
    (score 1, else 0): XML saved under a code file's extension, which StarCoder found common."""

    def __init__(self, char_prefix_search_length: int = 100) -> None:
        super().__init__()
        self._char_prefix_search_length = char_prefix_search_length
        self._name = "xml_header"

    def score_document(self, text: str) -> int:
        return int("<?xml version=" in text[:self._char_prefix_search_length])

    def keep_document(self, score: int) -> bool:
        return score != 1


class AlphaFilter(DocumentFilter):
    """Keeps a file whose share of letters (Unicode Alphabetic) is at least ``min_alpha_ratio``: a
    file with few letters is mostly numbers or symbols, such as a tensor or a table pasted into code
    (from StarCoder). An empty text scores 0."""

    def __init__(self, min_alpha_ratio: float = 0.25) -> None:
        super().__init__()
        self._min_alpha_ratio = min_alpha_ratio
        self._name = "alpha_filter"

    def score_document(self, text: str) -> float:
        return share(len(regex_alpha.findall(text)), len(text), when_empty=0.0)

    def keep_document(self, score: float) -> bool:
        return score >= self._min_alpha_ratio


class HTMLBoilerplateFilter(DocumentFilter):
    """Keeps an HTML file whose visible text (outside ``<script>`` and ``<style>``, as Beautiful Soup's
    ``html.parser`` finds it) is at least ``min_lang_content_ratio`` of its characters and at least
    ``min_lang_content_num_chars`` characters long: a page of markup around little text is boilerplate.

    A page with less visible text than the minimum scores 0, as in NeMo Curator. So does markup the
    parser rejects, and an empty text, on which NeMo Curator's filter raises: both are dropped.
    """

    def __init__(self, min_lang_content_ratio: float = 0.2, min_lang_content_num_chars: int = 100) -> None:
        super().__init__()
        _package("bs4", "beautifulsoup4", "HTMLBoilerplateFilter")
        self._min_lang_content_ratio = min_lang_content_ratio
        self._min_lang_content_num_chars = min_lang_content_num_chars
        self._name = "html_boilerplate"

    def score_document(self, text: str) -> float:
        from bs4 import BeautifulSoup, ParserRejectedMarkup

        try:
            soup = BeautifulSoup(text, features="html.parser")
        except (TypeError, UnboundLocalError, ParserRejectedMarkup):
            return 0.0
        for element in soup(["script", "style"]):
            element.extract()
        visible = soup.get_text()
        if len(visible) < self._min_lang_content_num_chars:
            return 0.0
        return share(len(visible), len(text), when_empty=0.0)

    def keep_document(self, score: float) -> bool:
        return score >= self._min_lang_content_ratio


# --- limits per language and extension ---

METADATA_COLUMNS = ("language", "extension", "Include", "Long_line_threshold", "Alphanum_threshold", "Alpha filter")


class ExtensionRules(NamedTuple):
    """One metadata row's limits; None (an empty or non-numeric cell) or 0 sets no limit."""

    include: bool
    max_line_length: int | None
    max_mean_line_length: int | None  # 100 wherever a longest-line limit is set, as NeMo Curator sets it
    min_alphanum_fraction: float | None
    min_alpha_fraction: float | None


def _number(cell: str | None, kind: type) -> Any:
    """``kind(cell)``, or None for a cell that holds no such number ("", "remove", a missing cell)."""
    try:
        return kind(cell)
    except (TypeError, ValueError):
        return None


def csv_language(lang: str) -> str:
    """A dataset's language name as the metadata file writes it: "C#" is "c-sharp", "F#" "f-sharp", any
    other lower-cased with hyphens for spaces ("Common Lisp" is "common-lisp")."""
    return {"C#": "c-sharp", "F#": "f-sharp"}.get(lang, lang.lower().replace(" ", "-"))


def read_extension_rules(path: str, language: str) -> dict[str, ExtensionRules]:
    """The rules of ``language`` (as the file writes it) in the metadata CSV at ``path``, by extension."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"PerExtensionFilter: no metadata file {path}: it needs a CSV with a row per language and extension "
            f"and the columns {', '.join(METADATA_COLUMNS)} (as NeMo Curator's utils/code_meta.csv)")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in METADATA_COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"PerExtensionFilter: {path} lacks the column(s) {', '.join(missing)}; "
                             f"it needs {', '.join(METADATA_COLUMNS)}")
        rules = {}
        for row in reader:
            if row["language"] == language:
                line_max = _number(row["Long_line_threshold"], int)
                rules[row["extension"]] = ExtensionRules(
                    row["Include"] == "1", line_max, 100 if line_max else None,
                    _number(row["Alphanum_threshold"], float), _number(row["Alpha filter"], float))
    if not rules:
        raise ValueError(f"PerExtensionFilter: {path} has no rows for the language {language!r}")
    return rules


def line_statistics(text: str) -> tuple[int, float]:
    """The longest line's length and the mean line length, lines being what newlines separate (so a
    trailing newline adds an empty line, and an empty text is one empty line)."""
    lengths = [len(line) for line in text.split("\n")]
    return max(lengths), sum(lengths) / len(lengths)


class PerExtensionFilter(DocumentFilter):
    """Keeps a file (score 1, else 0) by the limits the metadata CSV sets for its language and
    extension, StarCoder's cleaning: the row must say ``Include`` 1; its longest line must not exceed
    ``Long_line_threshold`` and, where that is set, its mean line length 100; its share of ASCII
    letters, digits, newlines and ``?!,.`` must reach ``Alphanum_threshold``, and its share of letters
    (``str.isalpha``) ``Alpha filter``. An empty or non-numeric cell sets no limit.

    Args:
        lang: the files' language, as the metadata writes it ("c++", "c-sharp") or as a dataset names
            it ("C#", "Common Lisp"); NeMo Curator converts a dataset's name for its lookup only, so
            there such a name finds no rows.
        extension: the files' extension, without the dot; None for files without one (an empty cell).
        metadata_file: the CSV (NeMo Curator's ``utils/code_meta.csv`` has the columns; none is bundled).

    The file is read as the filter is built: a missing file, missing columns or no rows for the
    language are errors then. An extension without a row drops every file, as in NeMo Curator (which
    says so once a document; here a warning says so once). An empty text has no alphanumeric share,
    on which NeMo Curator divides by zero: it scores 0 where that limit is set.
    """

    def __init__(self, lang: str, extension: str | None, metadata_file: str | os.PathLike = "code_meta.csv") -> None:
        super().__init__()
        self._metadata_file = os.fspath(metadata_file)
        self._lang = lang
        self._extension = extension
        # The row's limits, not the whole file, so that the fingerprint changes when the row does.
        rules = read_extension_rules(self._metadata_file, csv_language(lang))
        self._rules = rules.get(extension if extension is not None else "")
        if self._rules is None:
            logger.warning("PerExtensionFilter: %s has no row for language %r and extension %r; every document "
                           "is dropped", self._metadata_file, csv_language(lang), extension)
        self._name = "per_extension_filter"

    def score_document(self, text: str) -> int:
        rules = self._rules
        if rules is None or not rules.include:
            return 0
        longest, mean = line_statistics(text)
        fails = ((rules.max_line_length and longest > rules.max_line_length)
                 or (rules.max_mean_line_length and mean > rules.max_mean_line_length)
                 or (rules.min_alphanum_fraction and share(len(regex_alphanum.findall(text)), len(text),
                                                           when_empty=0.0) < rules.min_alphanum_fraction)
                 or (rules.min_alpha_fraction and sum(map(str.isalpha, text)) < rules.min_alpha_fraction * len(text)))
        return 0 if fails else 1

    def keep_document(self, score: int | None) -> bool:
        return score is not None and score != 0
