"""The k-means phase: draw a memory-bounded sample in parallel (writing every
id to its bucket for the uniqueness check on the way), fit on it in the
driver, and assign every document in parallel (``grouping`` then puts each
cluster's members in a folder of its own).

The fit is reused while the embeddings and the k-means settings stay the
same (a fingerprint of both is stored beside the centroids).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa

from beam_curator.checkpoint.files import relative_name
from beam_curator.dedup.semantic.fit_sample import drawn_for_fit, fit_fraction
from beam_curator.dedup.semantic.kmeans_options import InitOptions
from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.fingerprint import file_fingerprint
from beam_curator.stages.io.parquet import parquet_files, parquet_metadata, read_parquet
from beam_curator.stages.io.writer import output_name
from beam_curator.tasks import DocumentBatch, FileGroupTask
from beam_curator.workflows.semantic.grouping import write_runs, written_task
from beam_curator.workflows.semantic.id_check import bucket_folder, bucket_of
from beam_curator.workflows.semantic.layout import write_cache_parquet

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KMeansSettings:
    n_clusters: int = 100
    max_iter: int = 300
    tol: float = 1e-4
    seed: int = 42
    max_sample_bytes: int = 2 << 30
    backend: str = "auto"
    init: str | tuple = "k-means||"
    n_init: int | str = 1
    oversampling_factor: float = 2.0
    max_samples_per_batch: int = 1 << 15
    fit_data_fraction: float | None = None
    embedding_dim: int | None = None

    def init_options(self) -> InitOptions:
        init = self.init if isinstance(self.init, str) else np.asarray(self.init, dtype=np.float32)
        return InitOptions(init, self.n_init, self.oversampling_factor, self.max_samples_per_batch)


def embedding_matrix(table: pa.Table, id_column: str, embedding_column: str) -> tuple[np.ndarray, np.ndarray]:
    """Ids and L2-normalised float32 vectors of an embeddings table: one new
    array, filled chunk by chunk and normalised in place, so a large table's
    vectors are copied once."""
    ids = table.column(id_column).to_numpy(zero_copy_only=False)
    column = table.column(embedding_column)
    if column.null_count:
        raise ValueError(f"{column.null_count} document(s) have no {embedding_column!r}; re-embed them")
    chunks = [chunk for chunk in column.chunks if len(chunk)]
    dims = len(chunks[0][0]) if chunks else 0
    vectors = np.empty((len(ids), dims), dtype=np.float32)
    at = 0
    for chunk in chunks:
        values = chunk.flatten().to_numpy(zero_copy_only=False)
        if len(values) != len(chunk) * dims:
            raise ValueError(f"{embedding_column!r} holds vectors of different lengths; re-embed with one model")
        vectors[at : at + len(chunk)] = values.reshape(len(chunk), dims)
        at += len(chunk)
    return ids, l2_normalize(vectors, ids, in_place=True)


def embeddings_fingerprint(folders: list[str]) -> str:
    """What the embeddings files of ``folders`` hold, cheaply (names relative
    to their folder, so a moved folder keeps it; sizes, times and edge bytes)."""
    listing = [
        (position, relative_name(folder, path), file_fingerprint(path, "stat"))
        for position, folder in enumerate(folders) for path in parquet_files(folder)
    ]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def _checked_rows(path: str, columns: list[str]) -> int:
    """Rows of one embeddings file, once it is known to hold the columns the workflow reads."""
    metadata = parquet_metadata(path)
    names = metadata.schema.to_arrow_schema().names
    missing = [column for column in columns if column not in names]
    if missing:
        raise ValueError(
            f"{path} has no column(s) {missing} (its columns: {names}); "
            "set id_field and embedding_field to the columns holding ids and vectors"
        )
    return metadata.num_rows


def count_rows(files: list[str], *columns: str) -> int:
    """Documents in the embeddings files, from their footers; checks that each
    file holds the ``columns`` the workflow reads."""
    return sum(_checked_rows(path, list(columns)) for path in files)


def sample_fraction(files: list[str], total_rows: int, embedding_column: str, settings: KMeansSettings) -> float:
    """The share of the ``total_rows`` documents k-means is fitted on: those
    whose float32 vectors fill ``max_sample_bytes``, at most
    ``fit_data_fraction`` (NeMo Curator's setting), at most 1. Reads one
    file's vectors, not the data."""
    if total_rows == 0:
        raise ValueError("no documents were embedded; check input_path and the text field")
    if settings.n_clusters > total_rows:
        raise ValueError(
            f"n_clusters={settings.n_clusters} is more than the {total_rows} embeddings to cluster; "
            f"pass n_clusters <= {total_rows} (or cluster more embeddings)"
        )
    first = read_parquet(files[0], [embedding_column])
    dims = len(first.column(0)[0]) if first.num_rows else 1
    if settings.embedding_dim is not None and first.num_rows and dims != settings.embedding_dim:
        raise ValueError(
            f"{files[0]} holds {dims}-dimensional {embedding_column!r} vectors but embedding_dim={settings.embedding_dim}; "
            "set embedding_dim to the model's dimension (or leave it unset)"
        )
    return fit_fraction(total_rows, dims, settings.max_sample_bytes, settings.fit_data_fraction)


class SampleWriter(ProcessingStage):
    """The sink of the sampling phase: the documents drawn for the k-means fit
    (each with probability ``keep``) to ``sample``, and every document's id to
    its bucket under ``id_buckets`` for the uniqueness check (``id_check``).
    Whether a document is drawn depends on the seed and its id alone: a rerun
    after an interruption, or a run over the same documents in other files,
    draws the same sample. ``path`` holds both folders (files are recorded
    relative to it, and a rerun checks them there: a partition whose files
    are gone is drawn again)."""

    name = "kmeans_sample_writer"

    def __init__(self, path: str, sample: str, id_buckets: str, buckets: int, keep: float, seed: int,
                 id_column: str) -> None:
        self.path = path
        self.sample = sample
        self.id_buckets = id_buckets
        self.buckets = buckets
        self.keep = keep
        self.seed = seed
        self.id_column = id_column

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.to_pyarrow()
        if table.num_rows == 0:
            return written_task(task, self.path, [])
        ids = table.column(self.id_column).to_numpy(zero_copy_only=False)
        drawn = table.filter(pa.array(drawn_for_fit(ids, self.keep, self.seed))) if self.keep < 1.0 else table
        stem = output_name(task)
        url = f"{self.sample}/{stem}.parquet"
        written = [(url, write_cache_parquet(url, drawn), drawn.num_rows)]
        buckets = bucket_of(ids, self.buckets)
        order = np.argsort(buckets, kind="stable")
        starts = np.searchsorted(buckets[order], np.arange(self.buckets))
        folders = [bucket_folder(self.id_buckets, bucket) for bucket in range(self.buckets)]
        written += write_runs(table.select([self.id_column]).take(pa.array(order)), starts, folders, stem)
        return written_task(task, self.path, written)


def fit_centroids(sample_files: list[str], id_column: str, embedding_column: str, settings: KMeansSettings) -> np.ndarray:
    """Fit on the sample that :class:`SampleWriter` wrote, in id order, so
    that the centroids do not depend on how the sample's files are named.
    The sample's vectors are held once: each file's rows go straight to
    their place in one array."""
    from beam_curator.dedup.semantic.kmeans import fit_kmeans  # imports torch: only when k-means runs

    ids = [read_parquet(path, [id_column]).column(0).to_numpy(zero_copy_only=False) for path in sample_files]
    rows = sum(len(part) for part in ids)
    if rows < settings.n_clusters:
        raise ValueError(
            f"the k-means sample holds {rows} documents, fewer than n_clusters={settings.n_clusters}; raise "
            f"kmeans_max_sample_bytes (now {settings.max_sample_bytes}) or lower n_clusters"
        )
    every_id = np.concatenate(ids)
    place = np.empty(rows, dtype=np.int64)
    place[np.argsort(every_id, kind="stable")] = np.arange(rows)
    sample: np.ndarray | None = None
    at = 0
    for path, part in zip(sample_files, ids):
        _, vectors = embedding_matrix(read_parquet(path, [id_column, embedding_column]), id_column, embedding_column)
        if sample is None:
            sample = np.empty((rows, vectors.shape[1]), dtype=np.float32)
        sample[place[at : at + len(part)]] = vectors
        at += len(part)
    logger.info("k-means: fitting %d clusters on a sample of %d documents", settings.n_clusters, rows)
    model = fit_kmeans(
        sample, settings.n_clusters, max_iter=settings.max_iter, tol=settings.tol, seed=settings.seed,
        backend=settings.backend, init=settings.init_options(),
    )
    logger.info("k-means: %s backend, %d iterations, inertia %.4g", model.backend, model.n_iter, model.inertia)
    return model.centroids


class AssignClustersStage(ProcessingStage):
    """Nearest and second-nearest centroid and the distances to them, for each document."""

    name = "assign_clusters"

    def __init__(self, centroids_url: str, id_column: str, embedding_column: str) -> None:
        self.centroids_url = centroids_url
        self.id_column = id_column
        self.embedding_column = embedding_column

    def setup(self) -> None:
        with fsspec.open(self.centroids_url, "rb") as handle:
            self.centroids = np.load(handle)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        from beam_curator.dedup.semantic.kmeans import assign  # imports torch: only when k-means runs

        table = task.to_pyarrow()
        if table.num_rows == 0:
            return task
        ids, vectors = embedding_matrix(table, self.id_column, self.embedding_column)
        found = assign(vectors, self.centroids)
        columns = {
            "nearest_cent": found.labels, "l2_dist_to_cent": found.l2_dist_to_cent,
            "cosine_dist_to_cent": found.cosine_dist_to_cent, "second_nearest_cent": found.second_labels,
            "second_l2_dist": found.second_l2_dist, "second_cosine_dist": found.second_cosine_dist,
        }
        for name, values in columns.items():
            table = table.append_column(name, pa.array(values))
        result = DocumentBatch(dataset_name=task.dataset_name, data=table)
        result._metadata = dict(task._metadata)
        return result
