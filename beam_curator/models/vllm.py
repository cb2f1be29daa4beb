"""Embeddings with vLLM's pooling runner, in process: the fast path on GPUs.

Beam's own vLLM handlers start an OpenAI-compatible server and only do
completions; this one embeds through ``vllm.LLM(runner="pooling").embed``.
vLLM is imported only when a model loads, so the package works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from beam_curator.models.base import EmbeddingModelHandler, EmbeddingOptions, loading_model
from beam_curator.models.resolve import DEFAULT_MODEL

if TYPE_CHECKING:
    from typing_extensions import Unpack

# On CPU, vLLM's gpu_memory_utilization is the share of RAM it reserves for
# its KV cache; a small embedding model needs very little of it.
CPU_MEMORY_UTILIZATION = 0.05


class VLLMEmbedder:
    """A ``vllm.LLM`` that truncates prompts instead of rejecting them."""

    def __init__(self, model_dir: str, init_kwargs: dict[str, Any], max_tokens: int | None, pretokenize: bool = False) -> None:
        import vllm
        from vllm.platforms import current_platform

        kwargs = dict(init_kwargs)
        if current_platform.is_cpu():
            kwargs.setdefault("gpu_memory_utilization", CPU_MEMORY_UTILIZATION)
        self._llm = vllm.LLM(model=model_dir, runner="pooling", **kwargs)
        model_max = self._llm.llm_engine.model_config.max_model_len
        if max_tokens is not None and max_tokens > model_max:
            raise ValueError(
                f"max_tokens={max_tokens} exceeds the model's maximum length of {model_max} "
                f"tokens ({model_dir}); pass max_tokens <= {model_max} or leave it unset"
            )
        # vLLM refuses prompts longer than the model's length unless asked to truncate.
        self._tokenization_kwargs = {"truncation": True, "max_length": max_tokens or model_max}
        self._tokenizer = self._llm.get_tokenizer() if pretokenize else None

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._tokenizer is not None:
            # Token ids go straight to the engine, which then skips its own input processing.
            encoded = self._tokenizer(texts, **self._tokenization_kwargs)["input_ids"]
            prompts: list = [{"prompt_token_ids": ids} for ids in encoded]
            outputs = self._llm.embed(prompts, use_tqdm=False)
        else:
            outputs = self._llm.embed(texts, tokenization_kwargs=self._tokenization_kwargs, use_tqdm=False)
        return np.array([output.outputs.embedding for output in outputs], dtype=np.float32)


class VLLMEmbeddingHandler(EmbeddingModelHandler[VLLMEmbedder]):
    """RunInference handler embedding ``str`` elements with vLLM.

    Start-up takes about a minute on CPU (engine process, compilation,
    warm-up), so prefer sentence-transformers there; see
    :func:`beam_curator.models.make_embedding_handler`.

    Args:
        model_identifier: model name or directory (see
            :func:`~beam_curator.models.resolve.resolve_model`).
        vllm_init_kwargs: extra ``vllm.LLM`` arguments (``dtype``,
            ``gpu_memory_utilization``, ``tensor_parallel_size``...). On CPU
            ``gpu_memory_utilization`` defaults to ``0.05``.
        max_tokens: tokens kept per text; defaults to the model's maximum
            length.
        pretokenize: tokenise (and truncate) in the handler with the model's
            tokenizer and hand vLLM token ids (NeMo Curator's
            ``embedding_pretokenize``).
        options: the shared :class:`~beam_curator.models.base.EmbeddingOptions`.
    """

    def __init__(
        self,
        model_identifier: str = DEFAULT_MODEL,
        *,
        vllm_init_kwargs: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        pretokenize: bool = False,
        **options: Unpack[EmbeddingOptions],
    ) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")
        super().__init__(model_identifier, **options)
        self._vllm_init_kwargs = dict(vllm_init_kwargs or {})
        self._max_tokens = max_tokens
        self._pretokenize = pretokenize

    def load_model(self) -> VLLMEmbedder:
        with loading_model():
            return VLLMEmbedder(self.model_path(), self._vllm_init_kwargs, self._max_tokens, self._pretokenize)
