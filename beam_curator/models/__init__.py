"""Text-embedding model handlers for Beam's RunInference.

Feed ``str`` elements (or ``(key, str)`` pairs through
``apache_beam.ml.inference.base.KeyedModelHandler``) to
``RunInference(make_embedding_handler(...))`` to get one float32 vector per
text. Engines are imported only when a model loads.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from beam_curator.models.base import EmbeddingModelHandler, EmbeddingOptions, TextEmbedder
from beam_curator.models.resolve import (
    DEFAULT_MODEL,
    RECOMMENDED_GPU_MODEL,
    ModelNotFoundError,
    resolve_model,
)
from beam_curator.models.runtimes import RUNTIMES, check_runtime
from beam_curator.models.sentence_transformers import SentenceTransformerEmbeddingHandler
from beam_curator.models.vllm import VLLMEmbeddingHandler

Backend = Literal["vllm", "sentence-transformers", "auto"]

__all__ = [
    "DEFAULT_MODEL",
    "RECOMMENDED_GPU_MODEL",
    "Backend",
    "EmbeddingModelHandler",
    "EmbeddingOptions",
    "ModelNotFoundError",
    "RUNTIMES",
    "SentenceTransformerEmbeddingHandler",
    "TextEmbedder",
    "VLLMEmbeddingHandler",
    "check_runtime",
    "choose_backend",
    "make_embedding_handler",
    "resolve_model",
]


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
    if runtime == "torch" and importlib.util.find_spec("vllm") is not None:
        import torch

        if torch.cuda.is_available():
            return "vllm"
    return "sentence-transformers"


def make_embedding_handler(
    backend: Backend = "auto", model_identifier: str = DEFAULT_MODEL, **kwargs: Any
) -> EmbeddingModelHandler[Any]:
    """Build the handler for ``backend``; ``kwargs`` go to its constructor.

    See :class:`SentenceTransformerEmbeddingHandler` and
    :class:`VLLMEmbeddingHandler` for the engine-specific arguments.
    """
    chosen = choose_backend() if backend == "auto" else backend
    if chosen == "vllm":
        return VLLMEmbeddingHandler(model_identifier, **kwargs)
    if chosen == "sentence-transformers":
        return SentenceTransformerEmbeddingHandler(model_identifier, **kwargs)
    raise ValueError(
        f"Unknown embedding backend {backend!r}; use 'vllm', 'sentence-transformers' or 'auto'"
    )
