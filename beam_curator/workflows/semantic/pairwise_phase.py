"""The pairwise phase: one source partition per range of clusters (the
grouping phase's ranges), checkpointed per range.

A task reads every cluster of its range at once, normalises and ranks all
of them together and lays them out in rank order with one sort (see
``pairwise.semdedup_clusters``); only the kernel runs per cluster. Scores
are still written one file per cluster, ``cluster_<k>.parquet``, NeMo
Curator's layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa

from beam_curator.dedup.semantic.ranking import RankingStrategy, rank_keys
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import ParquetWriter
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.writing import write_atomically
from beam_curator.tasks import DocumentBatch, FileGroupTask
from beam_curator.workflows.semantic.clustering import embedding_matrix
from beam_curator.workflows.semantic.grouping import ClusterRangeTask, written_task


# Hive keys of the folders of each cluster's members and visitors (see grouping).
MEMBERS_KEY, VISITORS_KEY = "nearest_cent", "second_nearest_cent"


def read_folder(url: str, columns: list[str] | None = None) -> pa.Table | None:
    """All parquet fragments of one folder as one table (None when there are none)."""
    tables = [read_parquet(file, columns) for file in parquet_files(url)]
    return pa.concat_tables(tables) if tables else None


@dataclass
class ClustersRead:
    """The documents of several clusters, cluster after cluster."""

    table: pa.Table
    clusters: list[int]
    starts: list[int]  # where each cluster's rows begin in ``table``


def read_clusters(root: str, key: str, low: int, high: int) -> ClustersRead | None:
    """Clusters ``low`` (included) to ``high`` (excluded) of the hive folders
    ``<root>/<key>=<c>``, in cluster order; None when none of them has documents."""
    fs, path = fsspec.core.url_to_fs(root)
    present = sorted(
        number for number in (int(folder.rsplit("=", 1)[1]) for folder in fs.glob(f"{path}/{key}=*"))
        if low <= number < high
    )
    tables, clusters, starts, rows = [], [], [], 0
    for cluster in present:
        table = read_folder(f"{root}/{key}={cluster}")
        if table is not None and table.num_rows:
            tables.append(table)
            clusters.append(cluster)
            starts.append(rows)
            rows += table.num_rows
    return ClustersRead(pa.concat_tables(tables, promote_options="default"), clusters, starts) if tables else None


@dataclass
class PairwiseSettings:
    id_column: str
    embedding_column: str = "embeddings"
    which_to_keep: str = "hard"
    distance_metric: str = "cosine"
    batch_size: int = 1024
    seed: int = 42
    cross_cluster: bool = False
    ranking: RankingStrategy | None = None

    @property
    def order(self) -> str:
        """The direction of the rank keys: a ranking strategy's keys run ascending."""
        return "easy" if self.ranking is not None else self.which_to_keep


class ClusterPairwiseStage(ProcessingStage):
    """Scores each member of a cluster against the members ranked before it
    (and, with the cross-cluster pass, against the cluster's visitors), for
    every cluster of a range. The result's ``_metadata["clusters"]`` says
    which rows belong to which cluster."""

    name = "pairwise"

    def __init__(self, by_center: str, visitors: str | None, settings: PairwiseSettings) -> None:
        self.by_center = by_center
        self.visitors = visitors
        self.settings = settings

    def _load(self, read: ClustersRead) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ids, unit vectors and rank keys of every document read."""
        s, table = self.settings, read.table
        ids, vectors = embedding_matrix(table, s.id_column, s.embedding_column)
        if s.ranking is None:
            keys = rank_keys(
                ids, table.column("cosine_dist_to_cent").to_numpy(), table.column("l2_dist_to_cent").to_numpy(),
                s.which_to_keep, s.distance_metric, s.seed,
            )
            return ids, vectors, keys
        # A ranking strategy orders each cluster on its own.
        columns = {name: table.column(name).to_numpy() for name in s.ranking.metadata_cols if name in table.column_names}
        keys = np.empty(len(ids), dtype=np.float64)
        for low, high in zip(read.starts, [*read.starts[1:], len(ids)]):
            keys[low:high] = s.ranking.cluster_keys(ids[low:high], {n: c[low:high] for n, c in columns.items()})
        return ids, vectors, keys

    def process(self, task: ClusterRangeTask) -> DocumentBatch:
        low, high = task.data
        frame, clusters = self._scores(low, high)
        result = DocumentBatch(dataset_name="pairwise", data=frame)
        result._metadata = {"clusters": clusters}
        return result

    def _scores(self, low: int, high: int) -> tuple[pd.DataFrame, list[tuple[int, int, int]]]:
        """Score rows of the range, cluster after cluster, and (cluster, first row, end row) of each."""
        # The kernels import torch: only when a range is scored.
        from beam_curator.dedup.semantic.cross_cluster import cross_cluster_scores
        from beam_curator.dedup.semantic.pairwise import ID, MAX_ID, SCORE, semdedup_clusters

        s = self.settings
        members = read_clusters(self.by_center, MEMBERS_KEY, low, high)
        if members is None:
            return pd.DataFrame({ID: [], MAX_ID: [], SCORE: []}), []
        ids, unit, keys = self._load(members)
        clusters, starts = members.clusters, members.starts
        del members  # the table: its vectors are in ``unit`` now
        frame = semdedup_clusters(ids, unit, keys, starts, s.order, s.batch_size)
        sizes = np.diff([*starts, len(ids)])
        if self.visitors is None:  # NeMo Curator's columns; the rest only serves combining passes
            return frame[[ID, MAX_ID, SCORE]], cluster_rows(clusters, sizes)
        frame["pass"] = "cluster"
        frame["cluster"] = np.repeat(clusters, sizes)
        parts = [frame]
        visitors = read_clusters(self.visitors, VISITORS_KEY, low, high)
        if visitors is not None:
            v_ids, v_unit, v_keys = self._load(visitors)
            v_bounds = dict(zip(visitors.clusters, zip(visitors.starts, [*visitors.starts[1:], len(v_ids)])))
            for cluster, start, size in zip(clusters, starts, sizes):
                if cluster in v_bounds:
                    a, b = v_bounds[cluster]
                    m = slice(start, start + size)
                    cross = cross_cluster_scores(ids[m], unit[m], keys[m], v_ids[a:b], v_unit[a:b], v_keys[a:b],
                                                 s.which_to_keep, s.batch_size)
                    parts.append(cross.assign(**{"pass": "cross", "cluster": cluster}))
        combined = pd.concat(parts, ignore_index=True).sort_values("cluster", kind="stable", ignore_index=True)
        counts = combined["cluster"].value_counts().reindex(clusters).to_numpy()
        return combined, cluster_rows(clusters, counts)


def cluster_rows(clusters: list[int], sizes: np.ndarray) -> list[tuple[int, int, int]]:
    ends = np.cumsum(sizes)
    return [(int(c), int(end - size), int(end)) for c, size, end in zip(clusters, sizes, ends)]


class ClusterScoresWriter(ParquetWriter):
    """Writes each cluster's scores to ``cluster_<k>.parquet``, NeMo Curator's name."""

    name = "pairwise_writer"

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.to_pyarrow()
        written = []
        for cluster, start, end in task._metadata["clusters"]:
            url = f"{self.path}/cluster_{cluster}.parquet"
            part = table.slice(start, end - start)
            size = write_atomically(url, lambda handle, part=part: self.serialize(part, handle))
            written.append((url, size, part.num_rows))
        return written_task(task, self.path, written)
