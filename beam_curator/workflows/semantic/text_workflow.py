"""``TextSemanticDeduplicationWorkflow``: embed, cluster, score, identify, remove."""

from __future__ import annotations

import logging
import time
from typing import Any

from beam_curator.models import DEFAULT_MODEL, choose_backend, make_embedding_handler
from beam_curator.stages.io import ParquetWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.transforms.embedding import EmbeddingStage
from beam_curator.workflows.semantic.clustering import count_rows
from beam_curator.workflows.semantic.phases import digest
from beam_curator.workflows.semantic.removal import (
    TextDuplicatesRemovalWorkflow,
    file_formats,
    id_reading_stages,
    input_listing,
)
from beam_curator.workflows.semantic.layout import parquet_files
from beam_curator.workflows.semantic.workflow import SemanticDeduplicationWorkflow, WorkflowResult

logger = logging.getLogger(__name__)


class TextSemanticDeduplicationWorkflow:
    """Semantic deduplication of text, from raw files to a clean dataset.

    Parameters follow NeMo Curator's workflow of the same name. The embedding
    phase is checkpointed per input partition, k-means results are reused
    while the embeddings do not change, pairwise scoring is checkpointed per
    cluster and removal per input partition: interrupt it anywhere and rerun.
    """

    def __init__(
        self,
        input_path: str | list[str],
        output_path: str,
        cache_path: str,
        input_filetype: str = "jsonl",
        text_field: str = "text",
        id_field: str | None = None,
        on_bad_record: str = "raise",
        model_identifier: str = DEFAULT_MODEL,
        embedding_backend: str = "auto",
        embedding_pretokenize: bool = False,
        embedding_vllm_init_kwargs: dict[str, Any] | None = None,
        embedding_max_chars: int | None = None,
        embedding_max_tokens: int | None = None,
        embedding_batch_size: int | None = None,
        model_cache_dir: str | None = None,
        files_per_partition: int = 1,
        n_clusters: int = 100,
        kmeans_max_iter: int = 300,
        kmeans_tol: float = 1e-4,
        kmeans_max_sample_bytes: int = 2 << 30,
        kmeans_backend: str = "auto",
        eps: float | None = 0.01,
        which_to_keep: str = "hard",
        distance_metric: str = "cosine",
        pairwise_batch_size: int = 1024,
        cross_cluster: bool = False,
        cross_cluster_margin: float | None = None,
        recall_sample: int | None = None,
        perform_removal: bool = True,
        output_filetype: str | None = None,
        seed: int = 42,
        runner: str | None = "local",
        beam_args: list[str] | None = None,
        **runner_settings: object,
    ) -> None:
        file_formats(input_filetype)
        self.input_path = input_path
        self.output_path = output_path.rstrip("/")
        self.cache_path = cache_path.rstrip("/")
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype or input_filetype
        self.text_field = text_field
        self.id_field = id_field
        self.on_bad_record = on_bad_record
        self.files_per_partition = files_per_partition
        self.perform_removal = perform_removal
        # The backend is resolved now, so that vLLM-only options go only to vLLM
        # ("auto" on a machine without a GPU picks sentence-transformers).
        self.embedding = {
            "backend": choose_backend() if embedding_backend == "auto" else embedding_backend,
            "model_identifier": model_identifier, "max_chars": embedding_max_chars,
            "model_cache_dir": model_cache_dir, "max_batch_size": embedding_batch_size,
        }
        vllm_options = {"vllm_init_kwargs": embedding_vllm_init_kwargs, "max_tokens": embedding_max_tokens,
                        "pretokenize": embedding_pretokenize or None}
        if self.embedding["backend"] == "vllm":
            self.embedding.update(vllm_options)
        elif embedding_backend == "sentence-transformers" and any(vllm_options.values()):
            raise ValueError(
                "embedding_vllm_init_kwargs, embedding_max_tokens and embedding_pretokenize apply to the vLLM "
                "backend; use embedding_backend='vllm' or drop them"
            )
        self.runner = {"runner": runner, "beam_args": list(beam_args or []), **runner_settings}
        self.semantic = SemanticDeduplicationWorkflow(
            f"{self.cache_path}/embeddings", self.output_path, self.cache_path,
            id_field=id_field or "_curator_dedup_id", n_clusters=n_clusters, kmeans_max_iter=kmeans_max_iter,
            kmeans_tol=kmeans_tol, kmeans_max_sample_bytes=kmeans_max_sample_bytes, kmeans_backend=kmeans_backend,
            eps=eps, which_to_keep=which_to_keep, distance_metric=distance_metric,
            pairwise_batch_size=pairwise_batch_size, cross_cluster=cross_cluster,
            cross_cluster_margin=cross_cluster_margin, recall_sample=recall_sample, seed=seed, **self.runner,
        )

    def run(self) -> WorkflowResult:
        started = time.monotonic()
        book = self.semantic.book
        with book.timed("embedding"):
            self._embed()
        embeddings = f"{self.cache_path}/embeddings"
        metadata = {
            "embedding_time": book.times["embedding"], "embeddings_path": embeddings,
            "num_documents": count_rows(parquet_files(embeddings), self.semantic.id_field, "embedding"),
        }
        metadata.update(self.semantic.run_phases())
        metadata["final_output_path"] = None
        if self.perform_removal and self.semantic.eps is not None:
            removal = TextDuplicatesRemovalWorkflow(
                self.input_path, self.semantic.layout.duplicates, self.semantic.layout.deduplicated, self.cache_path,
                self.input_filetype, self.output_filetype, self.id_field, "id", self.files_per_partition,
                on_bad_record=self.on_bad_record, **self.runner,
            ).run()
            metadata.update(removal)
            metadata["num_documents_kept"] = metadata["num_documents"] - removal["num_duplicates_removed"]
        metadata.setdefault("removal_time", 0.0)
        metadata["total_time"] = time.monotonic() - started
        if self.semantic.eps is None:
            logger.info("semantic dedup scored %d documents in %.1f s; choose eps from %s",
                        metadata["num_documents"], metadata["total_time"], metadata.get("analysis_path"))
        else:
            logger.info(
                "semantic dedup finished in %.1f s: %s duplicates, %s removed, output %s",
                metadata["total_time"], metadata.get("num_duplicates"), metadata.get("num_duplicates_removed"),
                metadata["final_output_path"],
            )
        return WorkflowResult(metadata)

    def _embed(self) -> None:
        key = digest([
            input_listing(self.input_path, self.input_filetype), self.text_field, self.id_field, self.embedding,
            self.files_per_partition,
        ])
        book = self.semantic.book
        if book.is_done("embedding", key):
            logger.info("embedding: complete for this input and model, nothing to do")
            return
        fields = [self.text_field] + ([self.id_field] if self.id_field else [])
        reading, id_column = id_reading_stages(
            self.input_path, self.input_filetype, self.files_per_partition, self.id_field, self.cache_path, fields,
            self.on_bad_record,
        )
        settings = dict(self.embedding)
        handler = make_embedding_handler(settings.pop("backend"), settings.pop("model_identifier"),
                                         **{k: v for k, v in settings.items() if v is not None})
        book.run_stages("embedding", [
            *reading,
            EmbeddingStage(handler, self.text_field),
            ParquetWriter(f"{self.cache_path}/embeddings", fields=[id_column, "embedding"]),
        ], f"{self.cache_path}/checkpoints/embedding")
        if not parquet_files(f"{self.cache_path}/embeddings"):  # every input file was empty
            raise CuratorInputError(
                f"input {self.input_path!r} holds no records to deduplicate; check input_path and input_filetype"
            )
        book.mark_done("embedding", key)
