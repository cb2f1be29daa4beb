"""What every text-embedding engine shares when run by Beam's RunInference.

RunInference owns batching (``beam.BatchElements`` sized by
:meth:`~EmbeddingModelHandler.batch_elements_kwargs`) and model sharing
(``share_model_across_processes``); a handler only loads an engine and turns
one batch of texts into vectors. Each engine's ``load_model`` returns a small
*embedder*: an object whose ``embed(texts)`` returns a ``(len(texts), dim)``
array. Keeping the model behind that one method matters because a shared
model lives in one process and is reached by the others through Beam's
``multi_process_shared`` proxy, which forwards method calls only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar

import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from beam_curator.logs import model_loading
from beam_curator.models.resolve import resolve_model

if TYPE_CHECKING:
    from typing_extensions import Unpack


class BrokenTorchvisionError(ImportError):
    """An installed torchvision that does not load beside the installed torch."""


@contextmanager
def loading_model() -> Iterator[None]:
    """Every model load: without the model libraries' bars unless verbose, and
    with a torchvision that does not load explained (``torchvision_explained``)."""
    with model_loading(), torchvision_explained():
        yield


@contextmanager
def torchvision_explained() -> Iterator[None]:
    """Turn the failure of a torchvision built for another torch into an error that says so.

    transformers imports torchvision whenever it is installed; a build that
    does not match torch (PyPI's torchvision beside a ``+cpu`` torch, which
    vLLM's CPU build pulls in) fails deep inside it, and the user sees only
    "Could not import module 'PreTrainedModel'".
    """
    try:
        yield
    except Exception as error:
        cause: BaseException | None = error
        while cause is not None and "torchvision::" not in str(cause):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        import torch

        raise BrokenTorchvisionError(
            f"torchvision is installed but does not load beside torch {torch.__version__} ({cause}), and "
            "transformers imports it whenever it is present. Nothing here needs it: remove it with "
            "`pip uninstall -y torchvision torchaudio torchcodec`, or install the build that matches torch "
            "(for a +cpu torch: --extra-index-url https://download.pytorch.org/whl/cpu); see Install in docs/getting-started.md"
        ) from error


class TextEmbedder(Protocol):
    """A loaded engine: one call embeds one batch, in order."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


M = TypeVar("M", bound=TextEmbedder)


class EmbeddingOptions(TypedDict, total=False):
    """Keyword options every engine's handler accepts (see EmbeddingModelHandler)."""

    max_chars: int | None
    model_cache_dir: str | None
    min_batch_size: int | None
    max_batch_size: int | None
    model_copies: int | None
    share_across_processes: bool


class EmbeddingModelHandler(ModelHandler[str, PredictionResult, M]):
    """Embeds texts into one float32 vector each, not normalised.

    Like Beam's own handlers, each text comes back as a ``PredictionResult``:
    ``example`` the text, ``inference`` its vector (a float32 array),
    ``model_id`` the model identifier. Vectors are returned as the engine
    produces them; the dedup kernel normalises, so the handler does not spend
    a pass over the batch on it.

    Args:
        model_identifier: a model name or local directory, resolved with
            :func:`~beam_curator.models.resolve.resolve_model` when the model
            is loaded (on the worker, whose files are the ones that count).
        max_chars: cut every text to its first ``max_chars`` characters
            before tokenising (the ``embedding_max_chars`` setting). Engines
            truncate tokens anyway; cutting characters first bounds the
            tokenizer's work on huge documents.
        model_cache_dir: extra place to look for the model, see
            :func:`~beam_curator.models.resolve.resolve_model`.
        min_batch_size: lower bound for RunInference's ``BatchElements``;
            unset means Beam's adaptive batching.
        max_batch_size: upper bound for RunInference's ``BatchElements``;
            unset means Beam's adaptive batching.
        model_copies: how many copies of the model one machine loads (Beam
            routes batches between them); ``None`` means one.
        share_across_processes: True (default) loads one model per machine,
            reached by every SDK worker process there; False loads one per
            worker process, which a host with one pinned GPU per process
            wants (see docs/gpu.md).
    """

    def __init__(
        self,
        model_identifier: str,
        *,
        max_chars: int | None = None,
        model_cache_dir: str | None = None,
        min_batch_size: int | None = None,
        max_batch_size: int | None = None,
        model_copies: int | None = None,
        share_across_processes: bool = True,
    ) -> None:
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"max_chars must be a positive number of characters, got {max_chars}")
        super().__init__(
            min_batch_size=min_batch_size,
            max_batch_size=max_batch_size,
            model_copies=model_copies,
        )
        self._model_identifier = model_identifier
        self._model_cache_dir = model_cache_dir
        self._max_chars = max_chars
        self._share = share_across_processes

    def share_model_across_processes(self) -> bool:
        """Share by default: embedding models are large on GPUs (vLLM also
        pre-allocates most of the device's memory), so a copy per worker
        process would not fit on a host with one GPU and several processes."""
        return self._share

    def update_model_path(self, model_path: str | None = None) -> None:
        """Follow Beam's model refresh (``watch_model_pattern``/side input)."""
        if model_path:
            self._model_identifier = model_path

    def model_path(self) -> str:
        """The local directory the model is loaded from."""
        return resolve_model(self._model_identifier, self._model_cache_dir)

    def vector_identity(self) -> str:
        """A digest of what this handler's vectors depend on: its class, its
        settings and every file of its model folder (resolved here), so that
        vectors kept by a cache are never reused for another model, another
        copy of its files, or other settings."""
        from beam_curator.models.model_cache import build_key

        settings = {name: value for name, value in vars(self).items()
                    if isinstance(value, (str, int, float, bool, type(None)))}
        return build_key(self.model_path(), {"handler": type(self).__qualname__, **settings})

    def validate_inference_args(self, inference_args: dict[str, Any] | None) -> None:
        if inference_args:
            raise ValueError(
                f"{type(self).__name__} takes no inference_args (got {sorted(inference_args)}); "
                "pass engine options to the handler's constructor instead"
            )

    def run_inference(
        self,
        batch: Sequence[str],
        model: M,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[PredictionResult]:
        texts = [self._truncate(text, position) for position, text in enumerate(batch)]
        vectors = np.asarray(model.embed(texts), dtype=np.float32)
        if vectors.shape[0] != len(texts):
            raise RuntimeError(
                f"{type(self).__name__}: the engine returned {vectors.shape[0]} vectors "
                f"for a batch of {len(texts)} texts"
            )
        return [PredictionResult(text, vector, self._model_identifier) for text, vector in zip(batch, vectors)]

    def get_num_bytes(self, batch: Sequence[str]) -> int:
        # Counting characters is cheaper than Beam's default of pickling the batch.
        return sum(len(text) for text in batch)

    def _truncate(self, text: Any, position: int) -> str:
        if not isinstance(text, str):
            raise TypeError(
                f"{type(self).__name__} embeds strings, but batch element {position} is a "
                f"{type(text).__name__}: {text!r:.80}. Map records to their text first, "
                "or wrap the handler in KeyedModelHandler for (key, text) pairs."
            )
        return text if self._max_chars is None else text[: self._max_chars]


_PROGRESS_STEP = 256  # texts per call of the text handler, after each of which ``on_progress`` hears of them


class TextListHandler(ModelHandler[list, np.ndarray, Any]):
    """Adapts a handler of single texts (returning ``PredictionResult``s) to
    examples that are lists of texts, returning one (n, dim) array per list;
    ``on_progress`` is told how many texts are embedded every few hundred."""

    def __init__(self, text_handler: ModelHandler, on_progress: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.text_handler = text_handler
        self.on_progress = on_progress

    def load_model(self) -> Any:
        return self.text_handler.load_model()

    def share_model_across_processes(self) -> bool:
        return self.text_handler.share_model_across_processes()

    def model_copies(self) -> int:
        return self.text_handler.model_copies()

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 1, "max_batch_size": 1}

    def run_inference(self, batch: Sequence[list], model: Any, inference_args=None) -> Iterable[np.ndarray]:
        flat = [text for texts in batch for text in texts]
        vectors = []
        for start in range(0, len(flat), _PROGRESS_STEP):  # a whole file is one example: report as it goes
            chunk = flat[start : start + _PROGRESS_STEP]
            vectors += [result.inference for result in self.text_handler.run_inference(chunk, model, inference_args)]
            if self.on_progress is not None:
                self.on_progress(len(chunk))
        out, start = [], 0
        for texts in batch:
            out.append(np.asarray(vectors[start : start + len(texts)], dtype=np.float32).reshape(len(texts), -1))
            start += len(texts)
        return out

    def get_num_bytes(self, batch: Sequence[list]) -> int:
        return sum(len(text) for texts in batch for text in texts)
