"""The pairwise phase: one source partition per cluster, checkpointed per cluster."""

from __future__ import annotations

from dataclasses import dataclass

import fsspec
import pandas as pd
import pyarrow as pa

from beam_curator.dedup.semantic.ranking import RankingStrategy, rank_keys
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import ParquetWriter
from beam_curator.tasks import DocumentBatch, Task
from beam_curator.workflows.semantic.clustering import embedding_matrix
from beam_curator.workflows.semantic.layout import parquet_files, read_parquet


# Hive keys of the folders of each cluster's members and visitors (see grouping).
MEMBERS_KEY, VISITORS_KEY = "nearest_cent", "second_nearest_cent"


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
        folders = {int(folder.rsplit("=", 1)[1]): folder for folder in fs.glob(f"{path}/{MEMBERS_KEY}=*")}
        # The cluster's folder is the partition's input, which the logs name.
        return [ClusterTask(dataset_name="clusters", data=cluster, _metadata={"source_files": [folders[cluster]]})
                for cluster in sorted(folders)]


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
    (and, with the cross-cluster pass, against the cluster's visitors)."""

    name = "pairwise"

    def __init__(self, by_center: str, visitors: str | None, settings: PairwiseSettings) -> None:
        self.by_center = by_center
        self.visitors = visitors
        self.settings = settings

    def _load(self, folder: str) -> tuple | None:
        s = self.settings
        table = read_folder(folder)
        if table is None or table.num_rows == 0:
            return None
        ids, vectors = embedding_matrix(table, s.id_column, s.embedding_column)
        if s.ranking is not None:
            columns = {name: table.column(name).to_numpy() for name in s.ranking.metadata_cols if name in table.column_names}
            return ids, vectors, s.ranking.cluster_keys(ids, columns)
        keys = rank_keys(
            ids, table.column("cosine_dist_to_cent").to_numpy(), table.column("l2_dist_to_cent").to_numpy(),
            s.which_to_keep, s.distance_metric, s.seed,
        )
        return ids, vectors, keys

    def process(self, task: ClusterTask) -> DocumentBatch:
        result = DocumentBatch(dataset_name="pairwise", data=self._scores(task.data))
        result._metadata = {"centroid_id": task.data}
        return result

    def _scores(self, cluster: int) -> pd.DataFrame:
        # The kernels import torch: only when a cluster is scored.
        from beam_curator.dedup.semantic.cross_cluster import cross_cluster_scores
        from beam_curator.dedup.semantic.pairwise import ID, MAX_ID, SCORE, semdedup_cluster_by_keys

        s = self.settings
        members = self._load(f"{self.by_center}/{MEMBERS_KEY}={cluster}")
        if members is None:
            return pd.DataFrame({"id": [], "max_id": [], "cosine_sim_score": []})
        ids, vectors, keys = members
        frame = semdedup_cluster_by_keys(ids, vectors, keys, s.order, s.batch_size)
        if self.visitors is None:  # NeMo Curator's columns; the rest only serves combining passes
            return frame[[ID, MAX_ID, SCORE]]
        frame["pass"] = "cluster"
        visitors = self._load(f"{self.visitors}/{VISITORS_KEY}={cluster}")
        if visitors is not None:
            cross = cross_cluster_scores(ids, vectors, keys, *visitors, s.which_to_keep, s.batch_size)
            cross["pass"] = "cross"
            frame = pd.concat([frame, cross], ignore_index=True)
        frame["cluster"] = cluster
        return frame


class ClusterScoresWriter(ParquetWriter):
    """Writes each cluster's scores to ``cluster_<k>.parquet``, NeMo Curator's name."""

    name = "pairwise_writer"

    def file_stem(self, task: DocumentBatch) -> str:
        return f"cluster_{task._metadata['centroid_id']}"
