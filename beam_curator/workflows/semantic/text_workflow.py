"""``TextSemanticDeduplicationWorkflow``: embed, cluster, score, identify, remove."""

from __future__ import annotations

import logging
import os
import time
from functools import partial
from typing import Any

from beam_curator.errors import store_outages_named
from beam_curator.dedup.semantic.ranking import RankingStrategy
from beam_curator.models import BACKENDS, DEFAULT_MODEL, check_runtime, choose_backend, make_embedding_handler
from beam_curator.models.distill import static_model_folder, static_model_key
from beam_curator.stages.io import ParquetWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.transforms.embedding import EmbeddingStage
from beam_curator.stages.io.fingerprint import check_mode
from beam_curator.workflows.phases import digest
from beam_curator.workflows.semantic.cascade import (
    CandidateRowsStage,
    collect_candidates,
    default_screening_eps,
    verify_pairs,
)
from beam_curator.workflows.semantic.ids import GENERATED_ID
from beam_curator.workflows.semantic.layout import TEXT_RESULTS_FOLDER
from beam_curator.workflows.parameters import (
    apply_storage_options,
    check_positive_integers,
    check_runner_settings,
    settings_checked,
)
from beam_curator.workflows.semantic.parameters import pick
from beam_curator.workflows.semantic.preflight import checked_text_input
from beam_curator.workflows.semantic.removal import (
    TextDuplicatesRemovalWorkflow,
    count_skipped,
    file_formats,
    id_reading_stages,
    input_extensions,
    partition_grouping,
)
from beam_curator.workflows.semantic.workflow import SemanticDeduplicationWorkflow, WorkflowResult

logger = logging.getLogger(__name__)


class TextSemanticDeduplicationWorkflow:
    """Semantic deduplication of text, from raw files to a clean dataset.

    Parameters follow NeMo Curator's workflow of the same name, and so does
    the layout: ``cache_path/embeddings``, then k-means and pairwise results
    in ``cache_path/semantic_dedup/`` (``SemanticDeduplicationWorkflow`` used
    on its own puts them directly in ``cache_path``). The embedding
    phase is checkpointed per input file, k-means results are reused
    while the embeddings do not change, pairwise scoring is checkpointed per
    cluster and removal per input partition: interrupt it anywhere and rerun.
    Files are followed by ``input_fingerprint`` (``"stat"``: size, time and
    edge bytes; ``"content"``: every byte): a rerun after files were added,
    changed or removed gives what a fresh run on the folder gives, embedding
    only the added and changed files. One run at a time uses an output and
    cache folder: another refuses at once, naming the holder, or with
    ``wait=True`` starts when it ends.

    ``screening_backend`` or ``screening_model_identifier`` (default: the
    full model's, e.g. distilled with ``screening_backend="static"``; with
    ``screening_runtime`` and ``screening_max_chars``, chosen as the
    ``embedding_`` ones) turns on the verify cascade: a cheap model's vectors are clustered
    and propose the pairs at least ``1 - screening_eps`` similar (default: twice
    eps, at most 0.3), and only the documents in them are embedded with
    ``model_identifier``, whose similarity at ``eps`` decides each removal.
    """

    @settings_checked
    def __init__(
        self,
        input_path: str | list[str],
        output_path: str,
        cache_path: str | None = None,
        input_filetype: str = "parquet",
        text_field: str = "text",
        id_field: str | None = None,
        embedding_field: str = "embeddings",
        on_bad_record: str = "raise",
        model_identifier: str = DEFAULT_MODEL,
        embedding_backend: str = "auto",
        embedding_runtime: str = "torch",
        embedding_pretokenize: bool = False,
        embedding_vllm_init_kwargs: dict[str, Any] | None = None,
        vllm_init_kwargs: dict[str, Any] | None = None,
        embedding_max_chars: int | None = None,
        embedding_max_tokens: int | None = None,
        embedding_batch_size: int | None = None,
        model_cache_dir: str | None = None,
        embedding_model_cache_dir: str | None = None,
        hf_token: str | None = None,
        embedding_dim: int | None = None,
        screening_model_identifier: str | None = None,
        screening_backend: str = "auto",
        screening_runtime: str = "torch",
        screening_max_chars: int | None = None,
        screening_eps: float | None = None,
        metadata_fields: list[str] | None = None,
        files_per_partition: int | None = None,
        input_files_per_partition: int | None = None,
        input_blocksize: int | str | None = None,
        input_file_extensions: list[str] | None = None,
        use_id_generator: bool = False,
        id_generator_state_file: str | None = None,
        input_fingerprint: str = "stat",
        n_clusters: int = 100,
        kmeans_max_iter: int = 300,
        kmeans_tol: float = 1e-4,
        kmeans_random_state: int | None = None,
        kmeans_init: str = "k-means||",
        kmeans_n_init: int | str = 1,
        kmeans_oversampling_factor: float = 2.0,
        kmeans_max_samples_per_batch: int = 1 << 15,
        kmeans_fit_data_fraction: float | None = None,
        kmeans_max_sample_bytes: int = 2 << 30,
        kmeans_backend: str = "auto",
        eps: float | None = 0.01,
        which_to_keep: str = "hard",
        distance_metric: str = "cosine",
        ranking_strategy: RankingStrategy | None = None,
        pairwise_batch_size: int = 1024,
        _duplicates_num_row_groups_hint: int | None = None,
        cross_cluster: bool = False,
        cross_cluster_margin: float | None = None,
        recall_sample: int | None = None,
        perform_removal: bool = True,
        output_filetype: str = "parquet",
        output_file_extension: str | None = None,
        output_fields: list[str] | None = None,
        read_kwargs: dict[str, Any] | None = None,
        cache_kwargs: dict[str, Any] | None = None,
        write_kwargs: dict[str, Any] | None = None,
        verbose: bool = True,
        clear_output: bool = False,
        wait: bool = False,
        seed: int | None = None,
        runner: str | None = "local",
        beam_args: list[str] | None = None,
        **runner_settings: object,
    ) -> None:
        owner = type(self).__name__
        check_runner_settings(self, runner, runner_settings)
        file_formats(input_filetype), file_formats(output_filetype)
        check_positive_integers(embedding_max_chars=embedding_max_chars, embedding_max_tokens=embedding_max_tokens,
                                embedding_batch_size=embedding_batch_size, screening_max_chars=screening_max_chars,
                                unset_allowed=True)
        if perform_removal and eps is None:
            raise ValueError(
                "perform_removal=True but eps=None: without eps no duplicates are identified; "
                "set eps, or perform_removal=False to score only and write the analysis"
            )
        if use_id_generator and id_field not in (None, GENERATED_ID):
            raise ValueError(f"use_id_generator=True generates ids into {GENERATED_ID!r}; leave id_field unset")
        id_field = None if use_id_generator else id_field
        if hf_token:
            os.environ.setdefault("HF_TOKEN", hf_token)  # for hub downloads in this process and its workers
        self.input_path = input_path
        self.wait = wait
        self.output_path = output_path.rstrip("/")
        # NeMo Curator's default: caches under output_path, beside the results.
        self.cache_path = (cache_path or output_path).rstrip("/")
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype
        self.output_fields = output_fields
        self.text_field = text_field
        self.id_field = id_field
        self.embedding_field = embedding_field
        self.metadata_fields = list(metadata_fields or [])
        # Removal groups input files as NeMo does; embedding reads one file per partition, so that a
        # changed file is embedded again alone.
        self.grouping = partition_grouping(owner, pick(owner, None, files_per_partition=files_per_partition,
                                                       input_files_per_partition=input_files_per_partition),
                                           input_blocksize)
        self.input_file_extensions = input_file_extensions
        self.input_extensions = input_extensions(input_filetype, input_file_extensions)
        self.output_file_extension = output_file_extension
        self.input_fingerprint = check_mode(input_fingerprint) or "stat"
        self.on_bad_record = on_bad_record
        self.perform_removal = perform_removal
        embedding_vllm_init_kwargs = pick(owner, None, embedding_vllm_init_kwargs=embedding_vllm_init_kwargs,
                                          vllm_init_kwargs=vllm_init_kwargs)
        model_cache_dir = pick(owner, None, model_cache_dir=model_cache_dir, embedding_model_cache_dir=embedding_model_cache_dir)
        self.embedding = engine_settings(model_identifier, embedding_backend, embedding_runtime, embedding_max_chars,
                                         model_cache_dir, embedding_batch_size, "embedding_")
        # The verify cascade: the screening model's vectors are clustered and propose pairs, the
        # model above judges them (see cascade.py).
        self.screening = None
        if screening_model_identifier is not None or screening_backend != "auto":
            self.screening = engine_settings(screening_model_identifier or model_identifier, screening_backend,
                                             screening_runtime, screening_max_chars, model_cache_dir,
                                             embedding_batch_size, "screening_")
            screening_eps = check_screening(eps, screening_eps, cross_cluster, recall_sample)
        else:
            given = {"screening_runtime": screening_runtime != "torch", "screening_max_chars": screening_max_chars is not None,
                     "screening_eps": screening_eps is not None}
            if any(given.values()):
                raise ValueError(f"{', '.join(name for name, on in given.items() if on)} set the verify cascade's "
                                 "screening model; set screening_backend or screening_model_identifier too, or drop them")
        vllm_options = {"vllm_init_kwargs": embedding_vllm_init_kwargs, "max_tokens": embedding_max_tokens,
                        "pretokenize": embedding_pretokenize or None}
        if self.embedding["backend"] == "vllm":
            self.embedding.update(vllm_options)
        elif embedding_backend in ("sentence-transformers", "static") and any(vllm_options.values()):
            raise ValueError(
                "embedding_vllm_init_kwargs, embedding_max_tokens and embedding_pretokenize apply to the vLLM "
                f"backend, not {embedding_backend!r}; use embedding_backend='vllm' or drop them"
            )
        apply_storage_options(owner, read_kwargs=(input_path, read_kwargs))
        self.runner = {"runner": runner, "beam_args": list(beam_args or []), **runner_settings}
        self.semantic = SemanticDeduplicationWorkflow(
            f"{self.cache_path}/embeddings", self.output_path, self.cache_path,
            id_field=id_field or GENERATED_ID, embedding_field=embedding_field, embedding_dim=embedding_dim,
            metadata_fields=metadata_fields, n_clusters=n_clusters, kmeans_max_iter=kmeans_max_iter,
            kmeans_tol=kmeans_tol, init=kmeans_init, n_init=kmeans_n_init,
            oversampling_factor=kmeans_oversampling_factor, max_samples_per_batch=kmeans_max_samples_per_batch,
            fit_data_fraction=kmeans_fit_data_fraction, kmeans_max_sample_bytes=kmeans_max_sample_bytes,
            kmeans_backend=kmeans_backend, eps=eps, which_to_keep=which_to_keep, distance_metric=distance_metric,
            ranking_strategy=ranking_strategy, pairwise_batch_size=pairwise_batch_size, _duplicates_num_row_groups_hint=_duplicates_num_row_groups_hint,
            cache_kwargs=cache_kwargs, write_kwargs=write_kwargs, clear_output=clear_output, verbose=verbose,
            cross_cluster=cross_cluster, cross_cluster_margin=cross_cluster_margin, recall_sample=recall_sample,
            seed=pick(owner, 42, kmeans_random_state=kmeans_random_state, seed=seed),
            _results_folder=TEXT_RESULTS_FOLDER, _screening_eps=screening_eps, **self.runner,
        )

    @store_outages_named
    def run(self) -> WorkflowResult:
        """Checks first (nothing is created or cleared by a run that fails them), then, holding the
        output and cache folders against other runs (``wait``: until they are free), every phase."""
        started = time.monotonic()
        folders = {"output_path": self.output_path, "cache_path": self.cache_path}
        with checked_text_input(self.input_path, folders, self.input_extensions, self.input_filetype, self.text_field,
                                self.id_field, self.on_bad_record, self.semantic.clear_output, self.wait,
                                records_needed=self.semantic.kmeans.n_clusters):
            return self._run_phases(started)

    def _run_phases(self, started: float) -> WorkflowResult:
        book = self.semantic.book
        with book.timed("embedding"):
            embedded = self._embed()
        metadata = {
            "num_documents": embedded["rows"], "embedding_time": book.times.get("embedding", 0.0),
            "embeddings_path": f"{self.cache_path}/embeddings",
        }
        verify = self._verify if self.screening is not None else None
        metadata.update(self.semantic.run_phases(input_key=embedded["fingerprint"], verify=verify))
        metadata["final_output_path"] = None
        if self.perform_removal and self.semantic.eps is not None:
            removal = TextDuplicatesRemovalWorkflow(
                self.input_path, self.semantic.layout.duplicates, self.semantic.layout.deduplicated, self.cache_path,
                self.input_filetype, self.output_filetype, self.id_field, "id", self.grouping["files_per_partition"],
                input_blocksize=self.grouping["blocksize"], input_file_extensions=self.input_file_extensions,
                output_file_extension=self.output_file_extension,
                output_fields=self.output_fields, input_fingerprint=self.input_fingerprint,
                on_bad_record=self.on_bad_record, **self.runner,
            ).run()
            metadata.update(removal, phases_run=[*metadata["phases_run"], *removal["phases_run"]])
        count_skipped(metadata, self.on_bad_record, self.input_path, self.input_extensions, self.input_filetype)
        metadata.setdefault("removal_time", 0.0)
        metadata["total_time"] = time.monotonic() - started
        if not metadata["phases_run"]:
            logger.info("semantic dedup: nothing to do, every phase was complete with its outputs in place "
                        "(%s documents, %s duplicates, output %s)", metadata["num_documents"],
                        metadata.get("num_duplicates"), metadata["final_output_path"] or metadata.get("analysis_path"))
        elif self.semantic.eps is None:
            logger.info("semantic dedup scored %d documents in %.1f s; choose eps from %s",
                        metadata["num_documents"], metadata["total_time"], metadata.get("analysis_path"))
        else:
            logger.info(
                "semantic dedup finished in %.1f s: %s documents, %s duplicates, %s removed, output %s",
                metadata["total_time"], metadata["num_documents"], metadata.get("num_duplicates"),
                metadata.get("num_duplicates_removed"), metadata["final_output_path"],
            )
        return WorkflowResult(metadata)

    def _vector_settings(self, engine: dict[str, Any]) -> list:
        """Everything that changes the vectors or what is kept beside them (batch sizes do not)."""
        engine = {key: value for key, value in engine.items() if key != "max_batch_size"}
        return [engine, self.text_field, self.id_field, self.embedding_field, self.metadata_fields]

    def _reading(self, fields: list[str]) -> tuple[list, str]:
        """The input read one file per partition, a file larger than
        ``input_blocksize`` one block per partition, with its ids (the same ids
        in every phase, however a file is split)."""
        return id_reading_stages(
            self.input_path, self.input_filetype, 1, self.id_field, self.cache_path, fields, self.input_fingerprint,
            self.on_bad_record, self.input_extensions, blocksize=self.grouping["blocksize"],
        )

    def _engine_settings(self, engine: dict[str, Any]) -> dict[str, Any]:
        """``engine`` with a static backend's model found (distilled on first
        use, in this process, once) and known by the digest of its files: vectors made
        with another static model under the same name are not reused."""
        engine = dict(engine)
        if engine["backend"] == "static":
            folder = static_model_folder(engine["model_identifier"], engine["model_cache_dir"])
            engine.update(model_identifier=str(folder), static_model=static_model_key(folder))
        return engine

    def _embed(self) -> dict[str, Any]:
        """Embed each input file as a partition of its own, keyed by its
        content fingerprint: a changed or added file is embedded alone, a
        removed file's vectors are dropped, and a change of anything that
        changes vectors (model, backend, limits, text or id field) embeds
        everything again."""
        fields = [self.text_field] + ([self.id_field] if self.id_field else []) + self.metadata_fields
        reading, id_column = self._reading(fields)
        # With the cascade, the screening model's vectors are clustered.
        engine = self._engine_settings(self.screening or self.embedding)
        embeddings = f"{self.cache_path}/embeddings"
        details = self.semantic.book.run_partitioned("embedding", [
            *reading,
            EmbeddingStage(handler_maker(engine), self.text_field, self.embedding_field),
            ParquetWriter(embeddings, fields=[id_column, self.embedding_field, *self.metadata_fields]),
        ], f"{self.cache_path}/checkpoints/embedding", self._vector_settings(engine), embeddings)
        if not details["rows"]:  # every input file was empty
            self.semantic.book.forget("embedding")
            raise CuratorInputError(
                f"input {self.input_path!r} holds no records to deduplicate; check input_path and input_filetype"
            )
        return details

    def _verify(self, pairwise_key: str) -> tuple[str, str, dict[str, Any]]:
        """The verify cascade after the pairwise phase (see cascade.py): the
        candidates embedded with the full model, every candidate pair judged;
        returns the score rows' folder, their key and the counts."""
        layout, book = self.semantic.layout, self.semantic.book
        candidates_key, counts = collect_candidates(book, layout.candidate_pairs, layout.candidates, pairwise_key)
        reading, id_column = self._reading([self.text_field] + ([self.id_field] if self.id_field else []))
        full = self._engine_settings(self.embedding)
        embedded = book.run_partitioned("verify-embedding", [
            *reading,
            CandidateRowsStage(layout.candidates, id_column),
            EmbeddingStage(handler_maker(full), self.text_field, self.embedding_field),
            ParquetWriter(layout.verify_embeddings, fields=[id_column, self.embedding_field]),
        ], layout.checkpoint("verify-embedding"), [self._vector_settings(full), candidates_key],
            layout.verify_embeddings)
        key = digest([candidates_key, embedded["fingerprint"]])
        judged = verify_pairs(book, layout.candidate_pairs, layout.verify_embeddings, id_column, self.embedding_field,
                              layout.verified_scores, key)
        logger.info("verify cascade: %d candidate pairs of %d documents, embedded with the full model; %d documents "
                    "have a full-model score", counts["num_candidate_pairs"], counts["num_candidates"],
                    judged["num_verified_documents"])
        return layout.verified_scores, key, {**counts, "num_full_model_embedded": embedded["rows"],
                                             "verify_embeddings_path": layout.verify_embeddings, **judged}


def engine_settings(
    model_identifier: str, backend: str, runtime: str, max_chars: int | None, model_cache_dir: str | None,
    batch_size: int | None, prefix: str,
) -> dict[str, Any]:
    """What makes an embedding handler (see :func:`handler_maker`), for the
    main model or the cascade's screening one (``prefix``: the parameters'
    names, for errors). The backend is resolved now, so that vLLM-only options
    go only to vLLM ("auto" on a machine without a GPU picks sentence-transformers)."""
    if backend not in BACKENDS:
        raise ValueError(f"{prefix}backend={backend!r} is not one of {', '.join(map(repr, BACKENDS))}")
    engine: dict[str, Any] = {
        "backend": choose_backend(runtime) if backend == "auto" else backend,
        "model_identifier": model_identifier, "max_chars": max_chars,
        "model_cache_dir": model_cache_dir, "max_batch_size": batch_size,
    }
    if runtime != "torch":  # only then, so that torch runs keep their checkpoints' fingerprint
        if engine["backend"] != "sentence-transformers":
            raise ValueError(f"{prefix}runtime={runtime!r} runs sentence-transformers models; "
                             f"use {prefix}backend='sentence-transformers' (or 'auto')")
        engine["runtime"] = check_runtime(runtime).name
    return engine


def handler_maker(engine: dict[str, Any]) -> partial:
    """A function making the handler of ``engine``, called only if a phase
    runs: the handler classes import torch."""
    settings = {key: value for key, value in engine.items() if key != "static_model"}
    return partial(make_embedding_handler, settings.pop("backend"), settings.pop("model_identifier"),
                   **{k: v for k, v in settings.items() if v is not None})


def check_screening(eps: float | None, screening_eps: float | None, cross_cluster: bool,
                    recall_sample: int | None) -> float:
    """The cascade's screening threshold (default: ``default_screening_eps(eps)``), checked."""
    if eps is None:
        raise ValueError("screening_backend / screening_model_identifier turn on the verify cascade, which judges pairs "
                         "at eps; set eps")
    if cross_cluster or recall_sample:
        raise ValueError("the verify cascade compares documents within clusters and measures no recall of its own; "
                         "drop cross_cluster / recall_sample, or the screening model")
    if screening_eps is None:
        return default_screening_eps(eps)
    if not eps <= screening_eps < 1:
        raise ValueError(f"screening_eps must be in [eps, 1) (eps is {eps}), got {screening_eps}; the screening "
                         "model proposes pairs at 1 - screening_eps, looser than the full model's 1 - eps")
    return screening_eps
