"""NeMo Curator's string heuristic filters, at its ``filters.heuristic`` path; the repetition
filters are in ``filters.heuristic.repetition``, as there."""

from beam_curator.stages.text.filters.heuristic.string import (
    BoilerPlateStringFilter,
    BulletsFilter,
    CommonEnglishWordsFilter,
    EllipsisFilter,
    LongWordFilter,
    MeanWordLengthFilter,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParenthesesFilter,
    PornographicUrlsFilter,
    PunctuationFilter,
    SubstringFilter,
    SymbolsToWordsFilter,
    UrlsFilter,
    WhiteSpaceFilter,
    WordCountFilter,
    WordsWithoutAlphabetsFilter,
)

__all__ = [
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "CommonEnglishWordsFilter",
    "EllipsisFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "NonAlphaNumericFilter",
    "NumbersFilter",
    "ParenthesesFilter",
    "PornographicUrlsFilter",
    "PunctuationFilter",
    "SubstringFilter",
    "SymbolsToWordsFilter",
    "UrlsFilter",
    "WhiteSpaceFilter",
    "WordCountFilter",
    "WordsWithoutAlphabetsFilter",
]
