"""C4's bad-words rule as datatrove 0.10 applies it, reading the word lists from local files.

datatrove downloads the lists of the "List of Dirty, Naughty, Obscene, and Otherwise Bad Words"
project (LDNOOBW, CC BY 4.0) at run time; here they are read from ``badwords_path``, and a missing
list is named with the address to fetch it from. The language codes and the two commits below are
datatrove's, so that the same files give the same decisions.
"""

from __future__ import annotations

import re
from pathlib import Path

from numpy.random import default_rng

from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule, refuse_exclusion_writer

_LDNOOBW = "https://raw.githubusercontent.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words"
_ENGLISH_COMMIT, _OTHERS_COMMIT = "25e679f03d96baa721cde20db9944649e8d0a844", "5faf2ba42d7b1c0977169ec3611df25a3c08eb13"
LANGUAGES = frozenset("ar cs da de en eo es fa fi fil fr fr-CA-u-sd-caqc hi hu it ja kab ko nl no pl pt ru sv th "
                      "tlh tr zh".split())
# Common parts of words in languages written without spaces, which C4 allows: each would drop over a
# tenth of its language's documents. datatrove takes them out of every language's list.
_ALLOWED = frozenset({"sm", "\u30b0\u30ed", "\u5973\u306e\u5b50", "\u6027"})
# Languages matched anywhere in the text, not only between non-word characters.
_UNSPACED = frozenset({"ja", "th", "zh"})

_PATTERNS: dict[tuple[str, str], re.Pattern[str]] = {}


def list_address(language: str) -> str:
    """Where datatrove downloads the list of ``language`` from."""
    return f"{_LDNOOBW}/{_ENGLISH_COMMIT if language == 'en' else _OTHERS_COMMIT}/{language}"


class C4BadWordsFilter(DatatroveRule):
    """Drops documents holding a word of their language's bad-words list (C4's rule); with
    ``keep_fraction``, keeps that share of them at random (``seed`` fixes the draws, one per such
    document, in the order a worker meets them).

    Args:
        keep_fraction, fail_on_missing_language, seed, default_language, exclusion_writer: datatrove's.
        badwords_path: a folder holding LDNOOBW's lists named by language code (``en``, ``de``...),
            or one file, the list for ``default_language``.
        language_field: the column with each document's language (datatrove's ``language``
            metadata); documents without it, or batches without the column, are ``default_language``.
    """

    language_field: str | None = "language"

    def __init__(self, keep_fraction: float = 0.0, fail_on_missing_language: bool = True, seed: int | None = None,
                 default_language: str = "en", exclusion_writer: None = None, badwords_path: str | None = None,
                 language_field: str = "language", text_field: str = "text", reason_field: str | None = None) -> None:
        super().__init__(text_field, reason_field)
        refuse_exclusion_writer(exclusion_writer)
        if badwords_path is None:
            raise ValueError(f"C4BadWordsFilter needs badwords_path: a folder of LDNOOBW's word lists named by language "
                             f"code (datatrove downloads them; English from {list_address('en')})")
        self.keep_fraction = keep_fraction
        self.fail_on_missing_language = fail_on_missing_language
        self.seed = seed
        self.default_language = default_language
        self.badwords_path = str(badwords_path)
        self.language_field = language_field
        self._random = default_rng(seed)

    def check(self, doc: Document) -> str | None:
        language = doc.language or self.default_language
        pattern = self._pattern(language)
        if pattern is None or pattern.search(doc.text.lower()) is None:
            return None
        if self.keep_fraction > 0.0 and self._random.uniform() < self.keep_fraction:
            return None
        return "document_removed_with_badwords"

    def _pattern(self, language: str) -> re.Pattern[str] | None:
        """The language's list as one pattern, read once per process; None for a language without a
        list when ``fail_on_missing_language`` is off."""
        if language not in LANGUAGES:
            if self.fail_on_missing_language:
                raise ValueError(f"there is no bad-words list for language {language!r} (LDNOOBW has "
                                 f"{sorted(LANGUAGES)}); set fail_on_missing_language=False to keep such documents")
            return None
        key = (self.badwords_path, language)
        if key not in _PATTERNS:
            with self._list_file(language).open(encoding="utf-8") as lines:
                words = sorted({line.strip() for line in lines} - _ALLOWED)
            alternatives = "|".join(map(re.escape, words))
            _PATTERNS[key] = re.compile(alternatives if language in _UNSPACED else rf"(?:\W|^)({alternatives})(?:\W|$)")
        return _PATTERNS[key]

    def _list_file(self, language: str) -> Path:
        path = Path(self.badwords_path)
        if path.is_file() and language == self.default_language:
            return path
        if path.is_dir() and (path / language).is_file():
            return path / language
        raise FileNotFoundError(f"no bad-words list for {language!r} at {path / language if path.is_dir() else path}: "
                                f"download it from {list_address(language)} (LDNOOBW, CC BY 4.0) into the folder "
                                "badwords_path names, as a file named by the language code")
