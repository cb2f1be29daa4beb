"""Embeddings with a static model (model2vec), through Beam's RunInference.

A static model embeds a text as the mean of precomputed token vectors (see
:mod:`beam_curator.models.distill`, which makes and caches them): tens of
thousands of documents a second on a CPU, against tens for the transformer
it was distilled from. RunInference owns batching, as for every engine.

Threads: model2vec's own ``use_multiprocessing`` pool is never used. The
tokenizer already encodes a batch on every core (Rust), and model2vec sets
``TOKENIZERS_PARALLELISM=false`` for the whole process when its pool runs,
which would leave every later batch on one core.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from beam_curator.models.base import EmbeddingModelHandler, EmbeddingOptions
from beam_curator.models.distill import TABLE_DTYPE, distill_static_model, static_model_folder
from beam_curator.models.resolve import DEFAULT_MODEL

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["StaticEmbedder", "StaticEmbeddingHandler", "distill_static_model"]


class StaticEmbedder:
    """A loaded model2vec ``StaticModel``, its token vectors held as ``TABLE_DTYPE``; vectors come back
    L2-normalised, float32."""

    def __init__(self, folder: str | Path) -> None:
        from model2vec import StaticModel

        self._model = StaticModel.from_pretrained(str(folder), quantize_to=TABLE_DTYPE)

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(texts, normalize=True, use_multiprocessing=False, show_progress_bar=False)
        return vectors.astype(np.float32, copy=False)


class StaticEmbeddingHandler(EmbeddingModelHandler[StaticEmbedder]):
    """RunInference handler embedding ``str`` elements with a static model.

    Args:
        model_identifier: a static model folder, or a sentence-transformers
            model that is distilled on first use (see :func:`static_model_folder`).
        distill_cache_dir: where distilled models are cached (default
            ``~/.cache/beam_curator/static``).
        options: the shared :class:`~beam_curator.models.base.EmbeddingOptions`;
            ``share_across_processes`` is False by default here: a static model
            is small (15 MB for MiniLM at 256 dimensions), so each worker
            process loads its own rather than sending every batch to one process.
    """

    def __init__(self, model_identifier: str = DEFAULT_MODEL, *, distill_cache_dir: str | None = None,
                 **options: Unpack[EmbeddingOptions]) -> None:
        options.setdefault("share_across_processes", False)
        super().__init__(model_identifier, **options)
        self._distill_cache_dir = distill_cache_dir
        self.table_dtype = TABLE_DTYPE  # part of ``vector_identity``: vectors pooled otherwise are not reused

    def load_model(self) -> StaticEmbedder:
        folder = static_model_folder(self._model_identifier, self._model_cache_dir, self._distill_cache_dir)
        # Not under ``loading_model``: model2vec loads a local folder without transformers or torchvision, and
        # importing transformers to hush its bars cost a second, a third of a run of 10,000 documents.
        return StaticEmbedder(folder)
