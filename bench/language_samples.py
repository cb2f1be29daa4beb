"""Debian's translated package descriptions as a language-identification test set, whole and as
short snippets, for ``bench_langid.py`` and ``tests/test_language.py`` (which must measure the same).

A description's language is the DDTP file it came from (Debian's code: ``pt_BR``, ``zh_CN``); its
ISO 639-1 part (``pt``, ``zh``) is what an identifier should answer.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

MULTILINGUAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "debian-descriptions-multilingual.jsonl.gz"  # ../shared/data


def labelled_descriptions(path: Path = MULTILINGUAL) -> list[dict]:
    """Each description as ``{"package", "lang", "text", "expected"}``, ``expected`` the ISO 639-1 code."""
    with gzip.open(path, "rt") as lines:
        documents = [json.loads(line) for line in lines]
    return [{**document, "expected": document["lang"].split("_")[0]} for document in documents]


def snippet(text: str, rng: random.Random, shortest: int = 20, longest: int = 100) -> str:
    """A piece of ``text`` between ``shortest`` and ``longest`` characters (the whole text if it is
    shorter), starting at a word and ending before a cut word where the text has spaces, as short
    texts in a crawl (titles, captions, comments) begin and end."""
    words = " ".join(text.split())
    length = rng.randint(shortest, longest)
    if len(words) <= length:
        return words
    start = rng.randrange(len(words) - length + 1)
    start = words.rfind(" ", 0, start) + 1  # back to the start of a word (0 where there is no space)
    piece = words[start:start + length]
    cut = piece.rfind(" ")
    return piece[:cut] if cut >= shortest else piece


def labelled_snippets(documents: list[dict], seed: int = 0) -> list[dict]:
    """One snippet of each document, with its ``expected`` language; the same for the same seed."""
    rng = random.Random(seed)
    return [{"text": snippet(document["text"], rng), "expected": document["expected"]} for document in documents]


def accuracy_by_language(expected: list[str], found: list[str]) -> dict[str, tuple[int, float]]:
    """Each expected language's document count and the share identified as it."""
    totals: dict[str, list[int]] = {}
    for want, got in zip(expected, found):
        counts = totals.setdefault(want, [0, 0])
        counts[0] += 1
        counts[1] += want == got
    return {language: (count, right / count) for language, (count, right) in sorted(totals.items())}
