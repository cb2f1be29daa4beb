"""Which language a text is in: fastText's ``lid.176.ftz`` first, and py3langid's second opinion
only where fastText is known to go wrong.

Measured on Debian's translated package descriptions (``bench/bench_langid.py``), fastText alone is
fast but mistakes Slovak for Czech and Danish for Norwegian, and is unsure of short texts; py3langid
tells those apart but is several times slower. So fastText decides, except where its top language
belongs to a group of close languages (``CONFUSABLE``) and it is not sure of it, or where it is
unsure of any language: then py3langid, restricted to those candidates (the group, or the groups of
fastText's top few), picks among them. Restricting matters: unrestricted, py3langid brings errors of
its own (Chinese as Wu, Portuguese as Galician) into documents fastText had right.
"""

from __future__ import annotations

import functools
from typing import Any

from beam_curator.stages.text.language.models import (
    bundled_fasttext_model,
    fasttext_model,
    langid_among,
    langid_languages,
)

# Close languages that fastText confuses with each other, in its codes ("sh": Serbo-Croatian).
CONFUSABLE = (
    frozenset({"cs", "sk"}),
    frozenset({"da", "no", "nn"}),
    frozenset({"hr", "sr", "bs", "sh"}),
    frozenset({"id", "ms"}),
    frozenset({"es", "gl", "pt"}),
)
UNSURE = 0.5  # fastText's top score below which its top CANDIDATES languages are all reconsidered
SURE_IN_GROUP = 0.9  # fastText's top score from which a member of a CONFUSABLE group is kept as it is
CANDIDATES = 3
SECOND_OPINION_CHARS = 1000  # py3langid reads this much: its cost grows with length, its accuracy barely
_LABEL = "__label__"


class LanguageCascade:
    """The two models, loaded once per process (``cascade()``), and the decision between them."""

    def __init__(self) -> None:
        self._fasttext = fasttext_model(str(bundled_fasttext_model()))
        self._second = langid_languages()
        self._group = {language: group for group in CONFUSABLE for language in group}

    def languages(self) -> list[str]:
        """Every language code the identifier can answer, sorted."""
        labels, _ = self._fasttext.predict("", k=-1, threshold=-1.0)  # every label, even of probability 0
        return sorted(label.removeprefix(_LABEL) for label in labels)

    def identify(self, text: str) -> tuple[str, float]:
        """``(language, score)`` of ``text``: the language's code (ISO 639-1 where it has one, as
        lid.176 names it) and an estimate of the probability that it is right; ``("", 0.0)`` for a
        text of whitespace only. Whitespace runs become single spaces, as fastText reads one line."""
        line = " ".join(text.split())
        if not line:
            return "", 0.0
        labels, scores = self._fasttext.predict(line, k=CANDIDATES)
        languages = [label.removeprefix(_LABEL) for label in labels]
        best, score = languages[0], min(float(scores[0]), 1.0)  # the compressed model's softmax can pass 1
        doubtful = score < UNSURE or (best in self._group and score < SURE_IN_GROUP)
        if not doubtful or best not in self._second:  # py3langid cannot second a language it does not know
            return best, score
        considered = languages if score < UNSURE else languages[:1]
        candidates = frozenset().union(*(self._group.get(language, {language}) for language in considered))
        known = candidates & self._second
        if len(known) < 2:
            return best, score
        language, share = langid_among(known).classify(line[:SECOND_OPINION_CHARS])
        mass = sum(float(value) for name, value in zip(languages, scores) if name in candidates)
        return language, min(mass, 1.0) * share


@functools.lru_cache(maxsize=None)
def cascade() -> LanguageCascade:
    """The process's one ``LanguageCascade``; the first call loads the models."""
    return LanguageCascade()


def identify_language(text: Any) -> tuple[str, float]:
    """``(language, score)`` of one text; ``None`` counts as empty, as a null in a column does."""
    return cascade().identify(text or "")
