"""Embeddings with sentence-transformers: starts in seconds, right for CPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from beam_curator.models.base import EmbeddingModelHandler, EmbeddingOptions
from beam_curator.models.resolve import DEFAULT_MODEL

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SentenceTransformerEmbedder:
    """A loaded ``SentenceTransformer`` that embeds exactly the batch it is given."""

    def __init__(self, model_dir: str, device: str) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model_dir, device=device, local_files_only=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        # batch_size=len(texts): RunInference already chose the batch.
        return self._model.encode(
            texts,
            batch_size=max(len(texts), 1),
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )


class SentenceTransformerEmbeddingHandler(EmbeddingModelHandler[SentenceTransformerEmbedder]):
    """RunInference handler embedding ``str`` elements with sentence-transformers.

    Args:
        model_identifier: model name or directory (see
            :func:`~beam_curator.models.resolve.resolve_model`).
        device: torch device; ``None`` picks ``cuda`` when a GPU is visible,
            else ``cpu``.
        options: the shared :class:`~beam_curator.models.base.EmbeddingOptions`.
    """

    def __init__(
        self,
        model_identifier: str = DEFAULT_MODEL,
        *,
        device: str | None = None,
        **options: Unpack[EmbeddingOptions],
    ) -> None:
        super().__init__(model_identifier, **options)
        self._device = device

    def load_model(self) -> SentenceTransformerEmbedder:
        device = self._device
        if device is None:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return SentenceTransformerEmbedder(self.model_path(), device)
