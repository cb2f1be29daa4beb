"""The pairwise phase: one source partition per cluster, checkpointed per cluster."""

from __future__ import annotations

from dataclasses import dataclass

import fsspec
import pandas as pd
import pyarrow as pa

from beam_curator.dedup.semantic.cross_cluster import cross_cluster_scores
from beam_curator.dedup.semantic.pairwise import semdedup_cluster_by_keys
from beam_curator.dedup.semantic.ranking import rank_keys
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import DocumentBatch, Task
from beam_curator.workflows.semantic.clustering import embedding_matrix
from beam_curator.workflows.semantic.layout import parquet_files, read_parquet


@dataclass
class ClusterTask(Task[int]):
    """One k-means cluster; its id is the cluster number, so it is stable across runs."""

    def get_deterministic_id(self) -> str:
        return f"cluster{self.data}"


def read_folder(url: str, columns: list[str] | None = None) -> pa.Table | None:
    """All parquet fragments of one folder as one table (None when there are none)."""
    tables = [read_parquet(file, columns) for file in parquet_files(url)]
    return pa.concat_tables(tables) if tables else None


class ListClustersStage(ProcessingStage):
    """The source: every cluster that received documents."""

    name = "list_clusters"
    is_source_stage = True

    def __init__(self, by_center: str) -> None:
        self.by_center = by_center

    def process(self, task: Task) -> list[ClusterTask]:
        fs, path = fsspec.core.url_to_fs(self.by_center)
        folders = {int(folder.rsplit("=", 1)[1]): folder for folder in fs.glob(f"{path}/nearest_cent=*")}
        # The cluster's folder is the partition's input: results are named nearest_cent=<k>-<id>.parquet.
        return [ClusterTask(dataset_name="clusters", data=cluster, _metadata={"source_files": [folders[cluster]]})
                for cluster in sorted(folders)]


@dataclass
class PairwiseSettings:
    id_column: str
    embedding_column: str = "embedding"
    which_to_keep: str = "hard"
    distance_metric: str = "cosine"
    batch_size: int = 1024
    seed: int = 42
    cross_cluster: bool = False


class ClusterPairwiseStage(ProcessingStage):
    """Scores each member of a cluster against the members ranked before it
    (and, with the cross-cluster pass, against the cluster's visitors)."""

    name = "pairwise"

    def __init__(self, by_center: str, visitors: str | None, settings: PairwiseSettings) -> None:
        self.by_center = by_center
        self.visitors = visitors
        self.settings = settings

    def _load(self, root: str, cluster: int) -> tuple | None:
        s = self.settings
        table = read_folder(f"{root}/nearest_cent={cluster}")
        if table is None or table.num_rows == 0:
            return None
        ids, vectors = embedding_matrix(table, s.id_column, s.embedding_column)
        keys = rank_keys(
            ids, table.column("cosine_dist_to_cent").to_numpy(), table.column("l2_dist_to_cent").to_numpy(),
            s.which_to_keep, s.distance_metric, s.seed,
        )
        return ids, vectors, keys

    def process(self, task: ClusterTask) -> DocumentBatch:
        s = self.settings
        members = self._load(self.by_center, task.data)
        if members is None:
            return DocumentBatch(dataset_name="pairwise", data=pd.DataFrame({"id": [], "max_id": [], "cosine_sim_score": []}))
        ids, vectors, keys = members
        frame = semdedup_cluster_by_keys(ids, vectors, keys, s.which_to_keep, s.batch_size)
        frame["pass"] = "cluster"
        if self.visitors is not None:
            visitors = self._load(self.visitors, task.data)
            if visitors is not None:
                cross = cross_cluster_scores(ids, vectors, keys, *visitors, s.which_to_keep, s.batch_size)
                cross["pass"] = "cross"
                frame = pd.concat([frame, cross], ignore_index=True)
        frame["cluster"] = task.data
        return DocumentBatch(dataset_name="pairwise", data=frame)
