"""The k-means phase: draw a memory-bounded sample in parallel, fit on it in
the driver, assign every document in parallel, and write each cluster's
members to its own folder.

The fit is reused while the embeddings and the k-means settings stay the
same (a fingerprint of both is stored beside the centroids).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from beam_curator.dedup.semantic.kmeans import assign, fit_kmeans
from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.writer import write_atomically
from beam_curator.tasks import DocumentBatch, FileGroupTask

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KMeansSettings:
    n_clusters: int = 100
    max_iter: int = 300
    tol: float = 1e-4
    seed: int = 42
    max_sample_bytes: int = 2 << 30
    backend: str = "auto"


def embedding_matrix(table: pa.Table, id_column: str, embedding_column: str) -> tuple[np.ndarray, np.ndarray]:
    """Ids and L2-normalised float32 vectors of an embeddings table."""
    ids = table.column(id_column).to_numpy(zero_copy_only=False)
    column = table.column(embedding_column).combine_chunks()
    if column.null_count:
        raise ValueError(f"{column.null_count} document(s) have no {embedding_column!r}; re-embed them")
    values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    vectors = values.reshape(len(ids), -1) if len(ids) else values.reshape(0, 0)
    return ids, l2_normalize(vectors, ids)


def check_unique_ids(files: list[str], id_column: str) -> None:
    """Ids must be unique across the whole dataset, not just within a file:
    removal by a repeated id would drop every record that carries it. Reads
    only the id column (8 bytes per document for integer ids)."""
    ids = pa.chunked_array(
        [pq.read_table(path, columns=[id_column]).column(0) for path in files]
    )
    counts = pc.value_counts(ids)
    repeated = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(repeated):
        raise CuratorInputError(
            f"{len(repeated)} id(s) in {id_column!r} occur more than once across the input, e.g. "
            f"{repeated[:5].to_pylist()}; ids must be unique (leave id_field unset to generate ids)"
        )


def fingerprint(files: list[str], settings: KMeansSettings) -> str:
    fs, _ = fsspec.core.url_to_fs(files[0])
    listing = [(path, fs.size(path)) for path in files]
    return hashlib.sha256(json.dumps([listing, asdict(settings)]).encode()).hexdigest()


def _checked_rows(path: str, columns: list[str]) -> int:
    """Rows of one embeddings file, once it is known to hold the columns the workflow reads."""
    parquet = pq.ParquetFile(fsspec.open(path, "rb").open())
    names = parquet.schema_arrow.names
    missing = [column for column in columns if column not in names]
    if missing:
        raise ValueError(
            f"{path} has no column(s) {missing} (its columns: {names}); "
            "set id_field and embedding_field to the columns holding ids and vectors"
        )
    return parquet.metadata.num_rows


def sample_fraction(files: list[str], id_column: str, embedding_column: str, max_sample_bytes: int) -> float:
    """The share of documents whose float32 vectors fill ``max_sample_bytes``
    (at most 1). Reads the files' footers and one file's vectors, not the data."""
    total_rows = sum(_checked_rows(path, [id_column, embedding_column]) for path in files)
    if total_rows == 0:
        raise ValueError("no documents were embedded; check input_path and the text field")
    first = pq.read_table(files[0], columns=[embedding_column])
    dims = len(first.column(0)[0]) if first.num_rows else 1
    return min(1.0, max_sample_bytes / (total_rows * dims * 4))


class SampleRowsStage(ProcessingStage):
    """Keeps each document with probability ``keep``, so that the driver reads
    only the sample, never the whole collection. The draw depends only on the
    seed and the task id: a rerun after an interruption draws the same rows."""

    name = "kmeans_sample"

    def __init__(self, keep: float, seed: int) -> None:
        self.keep = keep
        self.seed = seed

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        if self.keep < 1.0:
            entropy = int.from_bytes(hashlib.sha256(f"{self.seed}|{task.task_id}".encode()).digest()[:8], "little")
            table = table.filter(pa.array(np.random.default_rng(entropy).random(table.num_rows) < self.keep))
        result = DocumentBatch(dataset_name=task.dataset_name, data=table)
        result._metadata = dict(task._metadata)
        return result


def fit_centroids(sample_files: list[str], id_column: str, embedding_column: str, settings: KMeansSettings) -> np.ndarray:
    """Fit on the sample that :class:`SampleRowsStage` wrote."""
    parts = [
        embedding_matrix(pq.read_table(path, columns=[id_column, embedding_column]), id_column, embedding_column)[1]
        for path in sample_files
    ]
    sample = np.concatenate([p for p in parts if len(p)])
    logger.info("k-means: fitting %d clusters on a sample of %d documents", settings.n_clusters, len(sample))
    model = fit_kmeans(
        sample, settings.n_clusters, max_iter=settings.max_iter, tol=settings.tol, seed=settings.seed,
        backend=settings.backend,
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


class ClusterFragmentWriter(ProcessingStage):
    """The sink of the assignment phase: one parquet fragment per (input task, cluster).

    With ``visitor_margin`` set (the cross-cluster pass), documents also go to
    their second-nearest cluster's visitor folder when within the margin.
    """

    name = "cluster_fragment_writer"

    def __init__(self, by_center: str, visitors: str | None = None, visitor_margin: float | None = None,
                 distance_column: str = "cosine_dist_to_cent") -> None:
        self.by_center = by_center
        self.visitors = visitors
        self.visitor_margin = visitor_margin
        self.distance_column = distance_column

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.to_pyarrow()
        written = []
        if table.num_rows:
            written += self._write_groups(table, "nearest_cent", self.by_center, task.task_id)
            if self.visitors is not None:
                second = "second_" + self.distance_column.replace("_to_cent", "")
                gap = pa.compute.subtract(table.column(second), table.column(self.distance_column))
                near = pa.compute.less_equal(gap, self.visitor_margin if self.visitor_margin is not None else np.inf)
                visiting = table.filter(pa.compute.and_(near, pa.compute.greater_equal(table.column("second_nearest_cent"), 0)))
                written += self._write_groups(visiting, "second_nearest_cent", self.visitors, task.task_id)
        return FileGroupTask(dataset_name=task.dataset_name, data=written)

    @staticmethod
    def _write_groups(table: pa.Table, column: str, root: str, task_id: str) -> list[str]:
        labels = table.column(column).to_numpy()
        written = []
        for label in np.unique(labels):
            part = table.filter(pa.array(labels == label))
            url = f"{root}/nearest_cent={int(label)}/{task_id}.parquet"
            fs, path = fsspec.core.url_to_fs(url)
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            write_atomically(url, lambda handle, part=part: pq.write_table(part, handle))
            written.append(url)
        return written
