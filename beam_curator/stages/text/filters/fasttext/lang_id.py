"""``FastTextLangId``: NeMo Curator's language filter, for a fastText model file of the user's own
(``lid.176.bin``, GlotLID). Its parameters, score and decisions are NeMo Curator's, so a ported
pipeline keeps and drops the same documents; ``LanguageIdentifier`` (``stages.text.language``) is
the one that needs no model file.
"""

from __future__ import annotations

import ast
import os

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.language.models import fasttext_model


class FastTextLangId(DocumentFilter):
    """Scores a document as the string ``"[score, 'code']"`` of the model's top language (a string,
    as NeMo Curator writes it, so that the column survives any dataframe backend) and keeps it when
    the score is at least ``min_langid_score`` and, if ``lang`` is given, the language matches.

    ``lang`` matches case-insensitively: a bare language (``"srp"``) matches it in any script
    (``"srp_Cyrl"``, ``"srp_Latn"``), a language with its script (``"srp_Latn"``) only that label.
    The model is loaded once per worker process (``load_model``, which the stages call in ``setup``),
    and never pickled with the filter.
    """

    def __init__(self, model_path: str | None = None, min_langid_score: float = 0.3, lang: str | None = None) -> None:
        super().__init__()
        if model_path is None:
            raise ValueError("FastTextLangId needs model_path: the path of a fastText language model file "
                             "(lid.176.bin, GlotLID's model.bin)")
        self._model_path = os.fspath(model_path)
        self._lang_code = lang.casefold() if lang else None
        self._cutoff = min_langid_score
        self._name = "lang_id"

    def model_check_or_download(self) -> None:
        """Fail early on a missing model file; nothing is downloaded."""
        if not os.path.exists(self._model_path):
            raise FileNotFoundError(f"Model file {self._model_path} not found")

    def load_model(self) -> None:
        """Load the model into this worker process's cache, if no stage has yet."""
        fasttext_model(self._model_path)

    def score_document(self, text: str) -> str:
        # One text at a time: fasttext-predict's list form returns no scores.
        labels, scores = fasttext_model(self._model_path).predict(text.strip().replace("\n", " "), k=1)
        return str([float(scores[0]), labels[0].removeprefix("__label__")])

    def keep_document(self, score: str) -> bool:
        if not isinstance(score, str):
            raise TypeError(f"FastTextLangId's score is the string of a [score, language] list, not {score!r}")
        value, language = ast.literal_eval(score)
        if self._lang_code is None:
            return value >= self._cutoff
        language = language.casefold()
        if "_" not in self._lang_code:
            language = language.split("_", maxsplit=1)[0]
        return value >= self._cutoff and language == self._lang_code
