"""Text-embedding model handlers for Beam's RunInference.

Feed ``str`` elements (or ``(key, str)`` pairs through
``apache_beam.ml.inference.base.KeyedModelHandler``) to
``RunInference(make_embedding_handler(...))`` to get one float32 vector per
text. Engines are imported only when a model loads, and the handlers (whose
base class, Beam's ``ModelHandler``, imports torch and scipy) on first use, so
that a run with nothing to embed loads none of them.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal

from beam_curator.models.resolve import (
    DEFAULT_MODEL,
    RECOMMENDED_GPU_MODEL,
    ModelNotFoundError,
    resolve_model,
)
from beam_curator.models.runtimes import RUNTIMES, check_runtime

if TYPE_CHECKING:
    from beam_curator.models.base import EmbeddingModelHandler, EmbeddingOptions, TextEmbedder
    from beam_curator.models.sentence_transformers import SentenceTransformerEmbeddingHandler
    from beam_curator.models.static import StaticEmbeddingHandler
    from beam_curator.models.vllm import VLLMEmbeddingHandler

_LAZY = {
    "EmbeddingModelHandler": "beam_curator.models.base",
    "EmbeddingOptions": "beam_curator.models.base",
    "TextEmbedder": "beam_curator.models.base",
    "SentenceTransformerEmbeddingHandler": "beam_curator.models.sentence_transformers",
    "StaticEmbeddingHandler": "beam_curator.models.static",
    "VLLMEmbeddingHandler": "beam_curator.models.vllm",
    "distill_static_model": "beam_curator.models.distill",
}

Backend = Literal["vllm", "sentence-transformers", "static", "auto"]
BACKENDS = ("auto", "vllm", "sentence-transformers", "static")

__all__ = [
    "DEFAULT_MODEL",
    "RECOMMENDED_GPU_MODEL",
    "BACKENDS",
    "Backend",
    "EmbeddingModelHandler",
    "EmbeddingOptions",
    "ModelNotFoundError",
    "RUNTIMES",
    "SentenceTransformerEmbeddingHandler",
    "StaticEmbeddingHandler",
    "TextEmbedder",
    "VLLMEmbeddingHandler",
    "check_runtime",
    "choose_backend",
    "distill_static_model",
    "make_embedding_handler",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'beam_curator.models' has no attribute {name!r}")


def _torch_may_see_cuda() -> bool:
    """False for a CPU-only torch build (its version ends in ``+cpu``), learnt
    from the package's metadata: importing torch to ask takes seconds."""
    try:
        return not version("torch").endswith("+cpu")
    except PackageNotFoundError:
        return False


def choose_backend(runtime: str = "torch") -> Literal["vllm", "sentence-transformers"]:
    """What ``backend="auto"`` means on this machine, for a model run by ``runtime``.

    vLLM when it is installed and a CUDA GPU is visible: there it batches and
    schedules far better than sentence-transformers. Otherwise
    sentence-transformers, which starts in seconds and on a CPU is also the
    faster engine: 66 vs 12 docs/s for all-MiniLM-L6-v2 on the 2-core
    machine of BENCHMARKS.md, where vLLM's CPU build also spends about 50 s
    starting (engine process, warm-up) before the first vector. A runtime
    other than torch (ONNX Runtime, OpenVINO) is sentence-transformers'.
    """
    if runtime == "torch" and importlib.util.find_spec("vllm") is not None and _torch_may_see_cuda():
        import torch

        if torch.cuda.is_available():
            return "vllm"
    return "sentence-transformers"


def make_embedding_handler(
    backend: Backend = "auto", model_identifier: str = DEFAULT_MODEL, **kwargs: Any
) -> EmbeddingModelHandler[Any]:
    """Build the handler for ``backend``; ``kwargs`` go to its constructor.

    See :class:`SentenceTransformerEmbeddingHandler`,
    :class:`VLLMEmbeddingHandler` and :class:`StaticEmbeddingHandler` (a
    model2vec static model, never chosen by ``"auto"``) for the
    engine-specific arguments.
    """
    chosen = choose_backend() if backend == "auto" else backend
    if chosen == "vllm":
        from beam_curator.models.vllm import VLLMEmbeddingHandler

        return VLLMEmbeddingHandler(model_identifier, **kwargs)
    if chosen == "sentence-transformers":
        from beam_curator.models.sentence_transformers import SentenceTransformerEmbeddingHandler

        return SentenceTransformerEmbeddingHandler(model_identifier, **kwargs)
    if chosen == "static":
        from beam_curator.models.static import StaticEmbeddingHandler

        return StaticEmbeddingHandler(model_identifier, **kwargs)
    raise ValueError(f"Unknown embedding backend {backend!r}; use one of {', '.join(map(repr, BACKENDS))}")
