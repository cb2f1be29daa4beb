"""``HistogramFilter``: NeMo Curator's filter that drops a document whose characters are mostly
outside the set seen in trusted text of its expected language (NLLB's cheap check of a language
label), with its parameters, file layout and decisions.

The histograms are fairseq's (one file per language, a character at the start of each line, most
frequent first, up to a line that starts with ``threshold_char``). NeMo Curator downloads them on
first use; nothing is downloaded here, so a missing file is an error, as the filter is built, that
says where to get it and where to put it.
"""

from __future__ import annotations

import os

from beam_curator.stages.text.filters.doc_filter import DocumentFilter

HISTOGRAMS_URL = "https://dl.fbaipublicfiles.com/m2m_100/histograms.tar.gz"
# Where fairseq's archive keeps the files, below the folder it is extracted into.
_IN_ARCHIVE = ("checkpoint", "edunov", "cc60_multilingual", "clean_hists")


class HistogramFilter(DocumentFilter):
    """Scores a document 1 when more than ``threshold`` of its characters are in the histogram of
    ``lang``, else 0, and keeps the documents scored 1.

    Args:
        lang: the expected language: the name of the histogram file read ("en", "zh", ...).
        threshold: the share of characters that must be in the histogram.
        cache_dir: the folder holding ``histograms/`` (fairseq's archive extracted there); by default
            the user's cache folder, as in NeMo Curator.
        threshold_char: the first character of the line that ends the histogram's characters.
    """

    def __init__(self, lang: str | None = "en", threshold: float | None = 0.8, cache_dir: str | None = "",
                 threshold_char: str | None = "]") -> None:
        super().__init__()
        self._lang = lang
        self._threshold = threshold
        self._cache_dir = cache_dir or _user_cache_dir()
        self._threshold_char = threshold_char
        self._name = "histogram"
        # Read here, in the driver: a missing file fails before any work, and the characters travel
        # with the filter, so that a changed histogram file is a changed pipeline to a checkpoint.
        self._histogram = self._read_histogram()

    def _read_histogram(self) -> frozenset[str]:
        folder = os.path.join(self._cache_dir, "histograms")
        path = os.path.join(folder, *_IN_ARCHIVE, str(self._lang))
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"HistogramFilter(lang={self._lang!r}): no histogram file at {path}, and nothing is downloaded "
                f"here. Where the internet is reachable, fetch {HISTOGRAMS_URL} and extract it into {folder} "
                f"(mkdir -p {folder} && tar -xzf histograms.tar.gz -C {folder}), or pass cache_dir=PARENT "
                "where PARENT/histograms holds it")
        characters = set()
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line[0] == self._threshold_char:
                    break
                characters.add(line[0])
        return frozenset(characters)

    def score_document(self, text: str) -> int:
        """1 if the share of the text's characters in the histogram (leading and trailing whitespace
        not counted as in, but counted in the length, as NeMo Curator counts) exceeds ``threshold``;
        0 otherwise, and for an empty text, which NeMo Curator divides by zero on."""
        if not text:
            return 0
        inside = sum(character in self._histogram for character in text.strip())
        return 1 if inside / len(text) > self._threshold else 0

    def keep_document(self, score: int) -> bool:
        return score == 1


def _user_cache_dir() -> str:
    from platformdirs import user_cache_dir

    return user_cache_dir()
