"""``TokenCountFilter``: NeMo Curator's filter on a document's length in a Hugging Face tokenizer's
tokens, with its parameters and decisions. Nothing is downloaded: ``hf_model_name`` is found where
``beam_curator.models.resolve_model`` looks (a local folder, the Hugging Face cache, the bundled
all-MiniLM-L6-v2), so that a filter on an offline cluster fails as it is built, not in a worker.
"""

from __future__ import annotations

from typing import Any

from beam_curator.models.resolve import resolve_model
from beam_curator.stages.text.filters.doc_filter import DocumentFilter


class TokenCountFilter(DocumentFilter):
    """Keeps a document with ``min_tokens`` to ``max_tokens`` tokens (both included), counted by the
    tokenizer's ``encode``, special tokens included, as NeMo Curator counts them.

    Args:
        tokenizer: a loaded tokenizer (anything with ``encode``), pickled to the workers with the filter.
        hf_model_name: instead of ``tokenizer``: a model name or folder whose tokenizer each worker
            loads once (``load_tokenizer``), from local files only.
        hf_token: accepted as NeMo Curator's, and unused: nothing is downloaded (nor recorded in the
            checkpoint's settings).
        min_tokens: the least tokens a kept document has (0: no least).
        max_tokens: the most tokens a kept document has (infinity: no most).
        transformers_init_kwargs: passed to ``AutoTokenizer.from_pretrained``; its ``cache_dir`` is
            searched for ``hf_model_name`` too. ``local_files_only`` is refused, as in NeMo Curator.
    """

    def __init__(  # noqa: PLR0913 (NeMo Curator's parameters)
        self,
        tokenizer: Any | None = None,
        hf_model_name: str | None = None,
        hf_token: str | None = None,
        min_tokens: int = 0,
        max_tokens: int | float = float("inf"),
        transformers_init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if (tokenizer is None) == (hf_model_name is None):
            raise ValueError("TokenCountFilter needs one of tokenizer (a loaded tokenizer) and hf_model_name "
                             f"(a model name or folder), not {'both' if tokenizer is not None else 'neither'}")
        options = dict(transformers_init_kwargs or {})
        if "local_files_only" in options:
            raise ValueError("TokenCountFilter: transformers_init_kwargs may not set local_files_only; "
                             "the tokenizer is always read from local files")
        self._token_count_filter_tokenizer = tokenizer
        # What the checkpoint's settings record of a loaded tokenizer, which they would name by type alone.
        self._tokenizer_source = getattr(tokenizer, "name_or_path", None) if tokenizer is not None else None
        self._hf_model_name = hf_model_name
        self._min_tokens = min_tokens
        self._max_tokens = max_tokens
        self._transformers_init_kwargs = options
        self._name = "token_count"
        self.model_check_or_download()

    def model_check_or_download(self) -> None:
        """Fail early, naming every place searched, when ``hf_model_name`` is nowhere on this machine."""
        if self._hf_model_name is not None:
            resolve_model(self._hf_model_name, self._transformers_init_kwargs.get("cache_dir"))

    def load_tokenizer(self) -> None:
        """Load the tokenizer of ``hf_model_name`` in this worker process, if no stage has yet."""
        if self._hf_model_name is not None:
            self._loaded()

    def _loaded(self) -> Any:
        """The tokenizer given, or the one of ``hf_model_name`` loaded once per process."""
        if self._token_count_filter_tokenizer is not None:
            return self._token_count_filter_tokenizer
        key = (self._hf_model_name, repr(sorted(self._transformers_init_kwargs.items())))
        tokenizer = _loaded_tokenizers.get(key)
        if tokenizer is None:
            from transformers import AutoTokenizer

            options = dict(self._transformers_init_kwargs)
            folder = resolve_model(self._hf_model_name, options.pop("cache_dir", None))
            tokenizer = _loaded_tokenizers[key] = AutoTokenizer.from_pretrained(folder, local_files_only=True, **options)
        return tokenizer

    def score_document(self, text: str) -> int:
        return len(self._loaded().encode(text))

    def keep_document(self, score: int) -> bool:
        return self._min_tokens <= score <= self._max_tokens


# Tokenizers loaded in this process, by model name and options: a worker loads each once, however
# many filters and bundles use it, and the filters pickled to workers carry none.
_loaded_tokenizers: dict[tuple[str | None, str], Any] = {}
