"""Semantic deduplication from embeddings (SemDeDup, Abbas et al. 2023) on Beam.

Names, parameters and output layout follow NVIDIA NeMo Curator's
``SemanticDeduplicationWorkflow`` so that habits and tools carry over;
unlike it, every phase here resumes after an interruption.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from beam_curator.errors import store_outages_named
from beam_curator.dedup.semantic.ranking import RankingStrategy
from beam_curator.stages.io import ParquetReader
from beam_curator.stages.io.overlap import check_paths
from beam_curator.running.lock import run_lock
from beam_curator.stages.io.parquet import parquet_files
from beam_curator.writing import write_atomically
from beam_curator.workflows.phases import BeamSettings, PhaseBook, digest, files_below, remove_tree
from beam_curator.workflows.semantic.clustering import (
    AssignClustersStage,
    KMeansSettings,
    SampleWriter,
    count_rows,
    embeddings_fingerprint,
    fit_centroids,
    sample_fraction,
)
from beam_curator.workflows.semantic.grouping import (
    GroupByClusterStage,
    Grouping,
    ListClusterRangesStage,
    RangeFilesWriter,
    cluster_ranges,
)
from beam_curator.workflows.semantic.id_check import (
    ListIdBucketsStage,
    RepeatedIdsStage,
    BucketWriter,
    bucket_count,
    raise_if_repeated,
)
from beam_curator.workflows.semantic.cascade import CandidatePairsStage
from beam_curator.workflows.semantic.layout import CacheLayout
from beam_curator.workflows.semantic.pairwise_phase import ClusterPairwiseStage, ClusterScoresWriter, PairwiseSettings
from beam_curator.workflows.parameters import (
    apply_storage_options,
    check_positive_integers,
    check_runner_settings,
    set_verbosity,
    settings_checked,
)
from beam_curator.workflows.semantic.parameters import check_cache_path, pick
from beam_curator.workflows.semantic.preflight import check_writable_folders

logger = logging.getLogger(__name__)


@dataclass
class WorkflowResult:
    """``metadata`` holds the timings, counts and paths of the run."""

    metadata: dict[str, Any] = field(default_factory=dict)

    def get_metadata(self, key: str, default: Any = None) -> Any:
        """One entry of ``metadata``, as NeMo Curator's ``WorkflowRunResult.get_metadata``."""
        return self.metadata.get(key, default)



class SemanticDeduplicationWorkflow:
    """Clustering, pairwise scoring and identification, from existing embeddings.

    ``input_path`` holds parquet files with ``id_field`` and ``embedding_field``.
    As in NeMo Curator, ``kmeans_results/`` and ``pairwise_results/`` go
    directly in ``cache_path`` (default: ``output_path``), and the
    duplicates in ``output_path/duplicates``.
    ``eps=None`` stops after scoring and writes the similarity analysis
    (``output_path/analysis``) so eps can be chosen without rerunning.
    ``cross_cluster=True`` also compares each document with the members of
    its second-nearest cluster (within ``cross_cluster_margin`` of the
    boundary, if given), finding duplicates that k-means split apart.
    ``recall_sample=N`` measures, on N sampled documents, how many
    near-duplicate pairs the clustered search compared against brute force
    (``output_path/recall/recall_report.json``).
    """

    @settings_checked
    def __init__(
        self,
        input_path: str | list[str],
        output_path: str,
        cache_path: str | None = None,
        id_field: str = "id",
        embedding_field: str = "embeddings",
        n_clusters: int = 100,
        embedding_dim: int | None = None,
        metadata_fields: list[str] | None = None,
        input_filetype: str = "parquet",
        input_file_extensions: list[str] | None = None,
        max_iter: int | None = None,
        tol: float | None = None,
        random_state: int | None = None,
        init: str | np.ndarray = "k-means||",
        n_init: int | str = 1,
        oversampling_factor: float = 2.0,
        max_samples_per_batch: int = 1 << 15,
        fit_data_fraction: float | None = None,
        kmeans_max_iter: int | None = None,
        kmeans_tol: float | None = None,
        kmeans_max_sample_bytes: int = 2 << 30,
        kmeans_backend: str = "auto",
        eps: float | None = None,
        which_to_keep: str = "hard",
        distance_metric: str = "cosine",
        ranking_strategy: RankingStrategy | None = None,
        pairwise_batch_size: int = 1024,
        _duplicates_num_row_groups_hint: int | None = None,
        read_kwargs: dict[str, Any] | None = None,
        cache_kwargs: dict[str, Any] | None = None,
        write_kwargs: dict[str, Any] | None = None,
        clear_output: bool = False,
        verbose: bool = True,
        wait: bool = False,
        cross_cluster: bool = False,
        cross_cluster_margin: float | None = None,
        recall_sample: int | None = None,
        seed: int | None = None,
        runner: str | None = "local",
        beam_args: list[str] | None = None,
        _results_folder: str = "",
        _screening_eps: float | None = None,
        **runner_settings: object,
    ) -> None:
        owner = type(self).__name__
        check_runner_settings(self, runner, runner_settings)
        check_cache_path(owner, cache_path, "n_clusters")
        if eps is not None and not 0 <= eps < 1:
            raise ValueError(f"eps must be in [0, 1) or None, got {eps}")
        check_positive_integers(n_clusters=n_clusters, pairwise_batch_size=pairwise_batch_size,
                                kmeans_max_sample_bytes=kmeans_max_sample_bytes)
        check_positive_integers(max_iter=max_iter, kmeans_max_iter=kmeans_max_iter, unset_allowed=True)
        for name, value in (("tol", tol), ("kmeans_tol", kmeans_tol), ("cross_cluster_margin", cross_cluster_margin)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be 0 or more, got {value!r}")
        if input_filetype != "parquet" or any(ext != ".parquet" for ext in input_file_extensions or []):
            raise ValueError(
                f"embeddings are read from .parquet files (got input_filetype={input_filetype!r}, "
                f"input_file_extensions={input_file_extensions!r}); write them as parquet"
            )
        if fit_data_fraction is not None and not 0 < fit_data_fraction < 1:
            raise ValueError(f"fit_data_fraction must be in (0, 1), got {fit_data_fraction}; pass None to fit on all documents")
        apply_storage_options(owner, read_kwargs=(input_path, read_kwargs), cache_kwargs=(cache_path or output_path, cache_kwargs),
                              write_kwargs=(output_path, write_kwargs))
        set_verbosity(verbose)
        self.input_path = input_path
        # NeMo Curator's default: caches under output_path, beside the results; k-means and pairwise
        # results directly in it, or in _results_folder (the text workflow's semantic_dedup/).
        self.layout = CacheLayout(cache_path or output_path, output_path, _results_folder)
        self.id_field = id_field
        self.embedding_field = embedding_field
        self.metadata_fields = list(metadata_fields or [])
        self.clear_output = clear_output
        self.wait = wait
        self.duplicates_row_groups = _duplicates_num_row_groups_hint
        seed = pick(owner, 42, random_state=random_state, seed=seed)
        self.kmeans = KMeansSettings(
            n_clusters, pick(owner, 300, max_iter=max_iter, kmeans_max_iter=kmeans_max_iter),
            pick(owner, 1e-4, tol=tol, kmeans_tol=kmeans_tol), seed, kmeans_max_sample_bytes, kmeans_backend,
            init if isinstance(init, str) else tuple(map(tuple, np.asarray(init, dtype=float).tolist())),
            n_init, oversampling_factor, max_samples_per_batch, fit_data_fraction, embedding_dim,
        )
        self.kmeans.init_options()  # bad init settings fail now, not after embedding
        self.eps = eps
        if ranking_strategy is not None:
            missing = sorted(set(ranking_strategy.metadata_cols) - set(self.metadata_fields))
            if missing:
                raise ValueError(f"ranking_strategy sorts by {missing}: add them to metadata_fields so they reach the clusters")
            if cross_cluster or recall_sample:
                raise ValueError(
                    "ranking_strategy orders each cluster on its own; the cross-cluster pass and the recall "
                    "measurement need one order over all documents, so drop cross_cluster / recall_sample"
                )
        self.pairwise = PairwiseSettings(
            id_field, embedding_field, which_to_keep, distance_metric, pairwise_batch_size, seed, cross_cluster,
            ranking_strategy,
        )
        self.cross_cluster_margin = cross_cluster_margin
        if recall_sample is not None and recall_sample < 2:
            raise ValueError(f"recall_sample must be at least 2 documents (or None: no recall measured), not {recall_sample}")
        self.recall_sample = recall_sample
        # The text workflow's verify cascade: these vectors are the screening model's, and the
        # pairwise phase writes candidate pairs at 1 - screening_eps (see cascade.py).
        self.screening_eps = _screening_eps
        self.book = PhaseBook(
            self.layout.checkpoint("phases"), BeamSettings(runner, list(beam_args or []), runner_settings),
            {"cache": self.layout.cache_path, "output": self.layout.output_path}, logger,
        )

    @store_outages_named
    def run(self) -> WorkflowResult:
        started = time.monotonic()
        folders = {"output_path": self.layout.output_path, "cache_path": self.layout.cache_path}
        check_paths({"input_path": self.input_path}, folders)
        check_writable_folders(folders)
        with run_lock(folders, wait=self.wait):
            if self.clear_output:  # start afresh, as NeMo Curator always does
                for folder in set(folders.values()):
                    remove_tree(folder)
            metadata = self.run_phases()
        metadata["total_time"] = time.monotonic() - started
        return WorkflowResult(metadata)

    def run_phases(
        self, input_key: str | None = None, verify: Callable[[str], tuple[str, str, dict[str, Any]]] | None = None,
    ) -> dict[str, Any]:
        """Every phase after embedding. ``input_key`` stands for the embeddings'
        content when the caller produced them (the embedding phase's
        fingerprint); otherwise the files are fingerprinted here. ``verify``
        (the text workflow's cascade) turns the pairwise phase's key into the
        folder of score rows identification reads, their key, and what to
        report."""
        if input_key is None:
            check_writable_folders({"output_path": self.layout.output_path, "cache_path": self.layout.cache_path})
        folders = self.input_path if isinstance(self.input_path, list) else [self.input_path]
        files = [file for folder in folders for file in parquet_files(folder)]
        if not files:
            raise FileNotFoundError(f"no embedding parquet files in {self.input_path}; run the embedding phase first")
        with self.book.timed("kmeans"):
            cluster_key = self._cluster(files, input_key or embeddings_fingerprint(folders))
        with self.book.timed("pairwise"):
            pairwise_key = self._pairwise(cluster_key, files)
        metadata: dict[str, Any] = {
            "kmeans_results_path": self.layout.kmeans_results,
            "pairwise_results_path": self.layout.pairwise_results,
        }
        scores, scores_key = self.layout.pairwise_results, pairwise_key
        if verify is not None:
            with self.book.timed("verification"):
                scores, scores_key, verified = verify(pairwise_key)
            metadata.update(verified, pairwise_results_path=self.layout.candidate_pairs)
        if self.recall_sample:
            from beam_curator.workflows.semantic.recall_phase import RECALL_EPS, measure_recall

            with self.book.timed("recall", always_runs=True):  # no marker: measured every run
                eps_values = tuple(sorted({*RECALL_EPS, *([self.eps] if self.eps is not None else [])}))
                metadata["recall"] = measure_recall(
                    self.layout.by_nearest_center, self.pairwise, self.recall_sample,
                    self.cross_cluster_margin, eps_values, self.layout.recall,
                )
                metadata["recall_path"] = self.layout.recall
        with self.book.timed("identification"):
            metadata.update(self._identify(scores_key, scores))
        for phase in ("kmeans", "pairwise", "verification", "recall", "identification"):
            metadata[f"{phase}_time"] = self.book.times.get(phase, 0.0)
        metadata["phases_run"] = list(self.book.ran)
        return metadata

    def _cluster(self, files: list[str], input_key: str) -> str:
        margin = self.cross_cluster_margin if self.pairwise.cross_cluster else None
        key = digest([
            input_key, asdict(self.kmeans), self.id_field, self.embedding_field, self.pairwise.cross_cluster, margin,
            self.pairwise.distance_metric, self.metadata_fields, *self.layout.results_key,
        ])
        if self.book.is_done("kmeans", key):
            logger.info("k-means: embeddings and settings unchanged, reusing %s", self.layout.kmeans_results)
            return key
        total_rows = count_rows(files, self.id_field, self.embedding_field, *self.metadata_fields)
        if not self.book.is_done("kmeans-fit", key):
            self._fit(files, total_rows, key)
        members = Grouping("nearest_cent", self.layout.members_by_range, self.layout.by_nearest_center)
        visiting = Grouping("second_nearest_cent", self.layout.visitors_by_range, self.layout.visitors)
        visitors = visiting if self.pairwise.cross_cluster else None
        distance = "cosine_dist_to_cent" if self.pairwise.distance_metric == "cosine" else "l2_dist_to_cent"
        ranges = cluster_ranges(self.kmeans.n_clusters, total_rows)
        self.book.run_in_order([
            ("assign-clusters", [
                ParquetReader(files, files_per_partition=1,
                              fields=[self.id_field, self.embedding_field, *self.metadata_fields]),
                AssignClustersStage(self.layout.centroids, self.id_field, self.embedding_field),
                RangeFilesWriter(self.layout.kmeans_results, ranges, members, visitors, margin, distance),
            ], self.layout.checkpoint("assign")),
            ("group-by-cluster", [
                ListClusterRangesStage(ranges),
                GroupByClusterStage(self.layout.kmeans_results, [members, *([visitors] if visitors else [])]),
            ], self.layout.checkpoint("group-by-cluster")),
        ])
        for by_range in (members.by_range, visiting.by_range):
            remove_tree(by_range)
        produced = [self.layout.centroids, members.by_cluster, *([visitors.by_cluster] if visitors else [])]
        self.book.mark_done("kmeans", key, produced, ranges=ranges)
        return key

    def _fit(self, files: list[str], total_rows: int, key: str) -> None:
        """Sample in parallel (resumable), then check that ids are unique on
        the workers (one Beam pipeline for both), then fit in the driver on
        the sample alone."""
        columns = [self.id_field, self.embedding_field]
        keep = sample_fraction(files, total_rows, self.embedding_field, self.kmeans)
        if not self.book.is_done("kmeans-started", key):  # new embeddings or settings: start over
            stale = [self.layout.kmeans_results, self.layout.kmeans_sample, self.layout.id_buckets, self.layout.repeated_ids]
            phases = ("kmeans-sample", "check-ids", "assign", "group-by-cluster")
            for folder in stale + [self.layout.checkpoint(p) for p in phases]:
                remove_tree(folder)
            earlier = self.layout.earlier_results
            if earlier and files_below(earlier):
                logger.warning(
                    "%s holds k-means and pairwise results where an earlier version put them; this workflow now keeps "
                    "them directly in %s, as NeMo Curator does, and computes them there again. Unless a "
                    "TextSemanticDeduplicationWorkflow uses this cache, delete %s to free its space",
                    earlier, self.layout.cache_path, earlier,
                )
            self.book.mark_done("kmeans-started", key)
        buckets = bucket_count(total_rows)
        self.book.run_in_order([
            ("kmeans-sample", [
                ParquetReader(files, files_per_partition=1, fields=columns),
                SampleWriter(self.layout.cache_path, self.layout.kmeans_sample, self.layout.id_buckets, buckets, keep,
                             self.kmeans.seed, self.id_field),
            ], self.layout.checkpoint("kmeans-sample")),
            ("check-ids", [
                ListIdBucketsStage(buckets),
                RepeatedIdsStage(self.layout.id_buckets, self.id_field),
                BucketWriter(self.layout.repeated_ids),
            ], self.layout.checkpoint("check-ids")),
        ])
        raise_if_repeated(self.layout.repeated_ids, self.id_field)
        centroids = fit_centroids(parquet_files(self.layout.kmeans_sample), *columns, self.kmeans)
        write_atomically(self.layout.centroids, lambda handle: np.save(handle, centroids))
        self.book.mark_done("kmeans-fit", key, [self.layout.centroids], settings=asdict(self.kmeans))

    def _pairwise(self, cluster_key: str, files: list[str]) -> str:
        cascade = self.screening_eps is not None
        results = self.layout.candidate_pairs if cascade else self.layout.pairwise_results
        key = digest([cluster_key, asdict(self.pairwise), *([self.screening_eps] if cascade else [])])
        if self.book.is_done("pairwise", key):
            logger.info("pairwise: results complete, reusing %s", results)
            return key
        if not self.book.is_done("pairwise-started", key):  # new clusters or settings: drop old scores
            for stale in (self.layout.pairwise_results, self.layout.candidate_pairs, self.layout.checkpoint("pairwise")):
                remove_tree(stale)
            self.book.mark_done("pairwise-started", key)
        visitors = self.layout.visitors if self.pairwise.cross_cluster else None
        # The grouping's ranges, as the k-means phase recorded them (counted again
        # only for a marker written before they were recorded).
        recorded = self.book.details("kmeans").get("ranges")
        ranges = ([(low, high) for low, high in recorded] if recorded else
                  cluster_ranges(self.kmeans.n_clusters, count_rows(files, self.id_field, self.embedding_field)))
        scoring = (CandidatePairsStage(self.layout.by_nearest_center, self.pairwise, 1 - self.screening_eps) if cascade
                   else ClusterPairwiseStage(self.layout.by_nearest_center, visitors, self.pairwise))
        self.book.run_stages("pairwise", [
            ListClusterRangesStage(ranges), scoring, ClusterScoresWriter(results),
        ], self.layout.checkpoint("pairwise"))
        self.book.mark_done("pairwise", key, [results])
        return key

    def _identify(self, pairwise_key: str, scores: str) -> dict[str, Any]:
        """Duplicates at eps, or the analysis when eps is None. Reused while the
        scores, eps and output stay the same, so that a rerun rewrites nothing
        (and the removal phase, keyed on the duplicates, is skipped too)."""
        key = digest([pairwise_key, self.eps])
        written = self.layout.analysis if self.eps is None else f"{self.layout.duplicates}/duplicates.parquet"
        if self.book.is_done("identification", key):
            logger.info("identification: scores and eps unchanged, reusing %s", written)
            return self.book.details("identification")["results"]
        from beam_curator.workflows.semantic.identification import identify, write_analysis  # imports torch

        if self.eps is None:
            write_analysis(scores, self.pairwise.which_to_keep, self.layout.analysis)
            results: dict[str, Any] = {"analysis_path": self.layout.analysis}
            logger.info("eps is None: duplicates not identified; see %s to choose eps", self.layout.analysis)
        else:
            count = identify(scores, self.eps, self.pairwise.which_to_keep, self.layout.duplicates,
                             self.layout.duplicate_pairs, self.duplicates_row_groups)
            results = {"num_duplicates": count, "duplicates_path": self.layout.duplicates,
                       "duplicate_pairs_path": self.layout.duplicate_pairs}
            logger.info("identified %d duplicates at eps=%s", count, self.eps)
        self.book.mark_done("identification", key, [written], results=results)
        return results
