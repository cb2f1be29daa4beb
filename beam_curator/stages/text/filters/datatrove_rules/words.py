"""English words and sentences cut exactly as datatrove 0.10 cuts them, many times faster.

datatrove splits English text with spaCy's rule-based tokenizer (``spacy.blank("en")``, no model),
running its whole pipeline and a sentencizer for every call, in every filter. Its tokenizer cuts the
text at whitespace first and then splits each whitespace-free chunk on its own (punctuation, "n't",
"e.g." and so on), so a chunk's tokens never depend on its neighbours. We therefore ask spaCy once
per distinct chunk and remember the answer: natural text repeats its chunks so much that almost
every chunk is found in memory, and the tokens are spaCy's own, so the words are identical.

spaCy is an optional dependency (``pip install 'beam-curator[datatrove-rules]'``), as it is for
datatrove's English filters.
"""

from __future__ import annotations

import threading
import unicodedata
from itertools import chain

# Chunks remembered per process before the memory is emptied and refilled: a few hundred MB at most,
# and enough for the chunks a language uses often.
MAX_REMEMBERED_CHUNKS = 1_000_000

ENGLISH_CODES = frozenset({"en", "eng", "eng_Latn"})


class EnglishTokenizer:
    """spaCy's English tokenizer behind a per-chunk memory; see the module's docstring."""

    def __init__(self) -> None:
        try:
            import spacy
            from spacy.pipeline import Sentencizer
        except ImportError as error:
            raise ImportError(
                "datatrove's rules split English words with spaCy's rule-based tokenizer (no model is "
                "downloaded); install it with `pip install 'beam-curator[datatrove-rules]'` or `pip install spacy`"
            ) from error
        self._nlp = spacy.blank("en")
        self._punct_chars = frozenset(Sentencizer.default_punct_chars)
        self._chunks: dict[str, tuple[str, ...]] = {}
        self._punct: dict[str, bool] = {}
        # The local runner's threads share this tokenizer; spaCy's memory zones are not thread-safe (a zone
        # closing in one thread frees the strings another thread's tokens still name), so one thread asks spaCy
        # at a time. The memory of chunks is read without the lock.
        self._spacy = threading.Lock()

    def words(self, text: str) -> list[str]:
        """The text's words, as datatrove's ``split_into_words(text, "eng")`` gives them."""
        chunks = text.split()
        try:
            return list(chain.from_iterable(map(self._chunks.__getitem__, chunks)))
        except KeyError:
            with self._spacy:  # also keeps another thread from emptying the memory before the chunks are read
                self._learn(chunks)
                return list(chain.from_iterable(map(self._chunks.__getitem__, chunks)))

    def sentences(self, text: str) -> list[str]:
        """The text cut into sentences as datatrove's ``split_into_sentences(text, "eng")`` cuts it:
        spaCy's tokenizer and sentencizer find where each sentence ends, and the pieces run from one
        end to the next (so they keep the whitespace between sentences), the last to the text's end;
        an empty text is one empty piece."""
        with self._spacy, self._nlp.memory_zone():
            doc = self._nlp.tokenizer(text)
            starts = self._sentence_starts([token.text for token in doc])
            ends = [doc[start - 1].idx + len(doc[start - 1].text) for start in starts[1:]]
        bounds = [0, *ends, len(text)]
        return [text[start:end] for start, end in zip(bounds, bounds[1:])]

    def sentence_count(self, line: str) -> int:
        """``len(self.sentences(line))``, without asking spaCy where the line's chunks are remembered
        and single spaces separate them: spaCy then makes no whitespace tokens, so the remembered
        tokens are the line's tokens."""
        if " ".join(line.split()) != line:
            return len(self.sentences(line))
        return max(1, len(self._sentence_starts(self.words(line))))

    def _sentence_starts(self, tokens: list[str]) -> list[int]:
        """Where spaCy's sentencizer starts sentences: at the first token, and at each token after a
        sentence-ending character that is neither one of those characters nor punctuation."""
        if not tokens:
            return []
        starts, after_end = [0], False
        for index, token in enumerate(tokens):
            if token in self._punct_chars:
                after_end = True
            elif after_end and not self._is_punct(token):
                starts.append(index)
                after_end = False
        return starts

    def _is_punct(self, token: str) -> bool:
        """spaCy's ``Token.is_punct``: every character is in a Unicode punctuation category."""
        found = self._punct.get(token)
        if found is None:
            found = self._punct[token] = all(unicodedata.category(char).startswith("P") for char in token)
        return found

    def forget(self) -> None:
        """Empty the memory of chunks: when it is full, and to time a cold start."""
        self._chunks.clear()
        self._punct.clear()

    def _learn(self, chunks: list[str]) -> None:
        """Tokenize the chunks not yet remembered, all in one call to spaCy, and remember them.

        Joined by single spaces, each chunk's last token is the one spaCy marks as followed by
        whitespace; the memory zone lets spaCy forget the new strings afterwards.
        """
        missing = list(dict.fromkeys(chunk for chunk in chunks if chunk not in self._chunks))
        if not missing:  # another thread learned them while this one waited for the lock
            return
        if len(self._chunks) + len(missing) > MAX_REMEMBERED_CHUNKS:
            self.forget()
            missing = list(dict.fromkeys(chunks))  # the caller reads all of them back from the memory
        with self._nlp.memory_zone():
            tokens: list[str] = []
            found = iter(missing)
            for token in self._nlp.tokenizer(" ".join(missing)):
                tokens.append(token.text)
                if token.whitespace_:
                    self._chunks[next(found)] = tuple(tokens)
                    tokens = []
            self._chunks[next(found)] = tuple(tokens)


_ENGLISH: EnglishTokenizer | None = None


def english() -> EnglishTokenizer:
    """The process's English tokenizer, made on first use (after the stages reach their worker), so
    that every rule and stage of a worker shares one memory of chunks."""
    global _ENGLISH
    if _ENGLISH is None:
        _ENGLISH = EnglishTokenizer()
    return _ENGLISH


def check_language(language: str) -> None:
    """Refuse a language whose words datatrove splits with another tokenizer, rather than splitting
    it the English way and keeping or dropping other documents than datatrove would."""
    if language not in ENGLISH_CODES:
        raise ValueError(
            f"language={language!r}: only English word splitting (datatrove's default, 'eng') is ported; "
            "datatrove splits other languages with per-language tokenizers not carried here")
