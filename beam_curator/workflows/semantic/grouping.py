"""Grouping documents by cluster through the file system, in two resumable phases.

One fragment per (assignment task, cluster) would make about
(N / task size) x k tiny files: 4·10⁸ at a billion documents and k = 50,000
(docs/gpu.md, "At a billion documents"), and ~9,000 already at 50,000 documents, whose writing and
reading took most of the k-means and pairwise phases. Instead the clusters
are cut into contiguous ranges of about ``_ROWS_PER_RANGE`` documents; each
assignment task writes one file per range it touches, and each task of the
grouping phase reads the files of one range and writes one file per cluster,
in NeMo Curator's ``embs_by_nearest_center/nearest_cent=<c>/`` layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from beam_curator.checkpoint.files import FileRecord, relative_name
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.tasks import DocumentBatch, FileGroupTask, Task
from beam_curator.workflows.semantic.layout import sort_rows, write_cache_parquet

# Documents a grouping or pairwise task holds in memory, if clusters were
# equal (~400 MB of 384-d rows, a few times that at the peak of a task).
# Larger ranges mean fewer files (tasks x ranges of them), more memory per task.
_ROWS_PER_RANGE = 1 << 18
# At most this many ranges: past ~2.7e8 documents ranges grow instead, so
# that the files of the grouping (assignment tasks x ranges) stay countable.
_MAX_RANGES = 1024

ClusterRange = tuple[int, int]
SECOND_NEAREST_COLUMNS = ["second_nearest_cent", "second_l2_dist", "second_cosine_dist"]


def cluster_ranges(n_clusters: int, n_rows: int) -> list[ClusterRange]:
    """Contiguous ranges (low included, high excluded) covering every cluster."""
    count = max(1, min(n_clusters, -(-n_rows // _ROWS_PER_RANGE), _MAX_RANGES))
    bounds = np.linspace(0, n_clusters, count + 1).round().astype(int)
    return [(int(low), int(high)) for low, high in zip(bounds[:-1], bounds[1:]) if high > low]


@dataclass(frozen=True)
class Grouping:
    """Where documents go by ``column``: per-range files, then per-cluster folders."""

    column: str
    by_range: str
    by_cluster: str

    def cluster_folder(self, cluster: int) -> str:
        return f"{self.by_cluster}/{self.column}={cluster}"

    def range_folder(self, cluster_range: ClusterRange) -> str:
        low, high = cluster_range
        return f"{self.by_range}/clusters={low}-{high}"


class RangeFilesWriter(ProcessingStage):
    """The sink of the assignment phase: the task's documents in one file per
    range of nearest clusters; with the cross-cluster pass, also those within
    ``visitor_margin`` of their second-nearest cluster, by that one's range.
    ``path`` is the folder holding both groupings (written files are recorded
    relative to it)."""

    name = "range_files_writer"

    def __init__(self, path: str, ranges: list[ClusterRange], members: Grouping, visitors: Grouping | None = None,
                 visitor_margin: float | None = None, distance_column: str = "cosine_dist_to_cent") -> None:
        self.path = path
        self.ranges = ranges
        self.members = members
        self.visitors = visitors
        self.visitor_margin = visitor_margin
        self.distance_column = distance_column

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.to_pyarrow()
        if table.num_rows == 0:  # an empty input file: nothing was assigned
            return FileGroupTask(dataset_name=task.dataset_name, data=[])
        if self.visitors is None:  # only the cross-cluster pass (and its recall) reads second-nearest columns
            written = self._write(table.drop_columns(SECOND_NEAREST_COLUMNS), self.members, task.task_id)
        else:
            written = self._write(table, self.members, task.task_id)
        if self.visitors is not None:
            from beam_curator.dedup.semantic.cross_cluster import visited_clusters  # imports torch

            second = "second_" + self.distance_column.replace("_to_cent", "")
            visits = visited_clusters(*(table.column(name).to_numpy() for name in (
                "second_nearest_cent", self.distance_column, second)), self.visitor_margin)
            written += self._write(table.filter(pa.array(visits >= 0)), self.visitors, task.task_id)
        return written_task(task, self.path, written)

    def _write(self, table: pa.Table, grouping: Grouping, task_id: str) -> list[tuple[str, int, int]]:
        ordered = sort_rows(table, grouping.column)
        starts = np.searchsorted(ordered.column(grouping.column).to_numpy(), [low for low, _ in self.ranges])
        return write_runs(ordered, starts, [grouping.range_folder(r) for r in self.ranges], task_id)


@dataclass
class ClusterRangeTask(Task[tuple[int, int]]):
    """Clusters ``low`` (included) to ``high`` (excluded); the id names the range,
    so it is stable across runs."""

    def get_deterministic_id(self) -> str:
        low, high = self.data
        return f"clusters{low}to{high}"


class ListClusterRangesStage(ProcessingStage):
    """The source of the grouping phase: one task per range of clusters."""

    name = "list_cluster_ranges"
    is_source_stage = True

    def __init__(self, ranges: list[ClusterRange]) -> None:
        self.ranges = ranges

    def process(self, task: Task) -> list[ClusterRangeTask]:
        return [ClusterRangeTask(dataset_name="cluster_ranges", data=cluster_range) for cluster_range in self.ranges]


class GroupByClusterStage(ProcessingStage):
    """Writes one file per cluster of the range, for members and (if any)
    visitors; ``path`` is the folder holding the groupings."""

    name = "group_by_cluster"

    def __init__(self, path: str, groupings: list[Grouping]) -> None:
        self.path = path
        self.groupings = groupings

    def process(self, task: ClusterRangeTask) -> FileGroupTask:
        written = []
        for grouping in self.groupings:
            tables = [read_parquet(path) for path in parquet_files(grouping.range_folder(task.data))]
            if tables:
                written += _write_clusters(sort_rows(pa.concat_tables(tables), grouping.column), grouping, task.task_id)
        return written_task(task, self.path, written)


def written_task(task: Task, root: str, written: list[tuple[str, int, int]]) -> FileGroupTask:
    """A sink's result: the files (url, bytes, rows) it wrote, recorded
    relative to ``root`` for the checkpoint."""
    records: list[FileRecord] = [[relative_name(root, url), size, rows] for url, size, rows in written]
    result = FileGroupTask(dataset_name=task.dataset_name, data=[url for url, _, _ in written])
    result._metadata["written"] = records
    return result


def _write_clusters(ordered: pa.Table, grouping: Grouping, task_id: str) -> list[tuple[str, int, int]]:
    """One file per cluster of a table sorted by cluster, in hive folders
    ``<column>=<cluster>``. The column itself is left out of the files, so
    that the folder reads as one dataset (pyarrow, pandas, Spark) with the
    cluster taken from the folder name, as NeMo Curator's does."""
    clusters, starts = np.unique(ordered.column(grouping.column).to_numpy(), return_index=True)
    folders = [grouping.cluster_folder(int(c)) for c in clusters]
    return write_runs(ordered.drop_columns([grouping.column]), starts, folders, task_id)


def write_runs(ordered: pa.Table, starts: np.ndarray, folders: list[str], name: str) -> list[tuple[str, int, int]]:
    """Rows ``starts[i]`` up to ``starts[i + 1]`` go to ``folders[i]/<name>.parquet``; empty runs
    write nothing. Returns (url, bytes, rows) of each written file."""
    stops = [*starts[1:], ordered.num_rows]
    written = []
    for folder, start, stop in zip(folders, starts, stops):
        if stop > start:
            url = f"{folder}/{name}.parquet"
            part = ordered.slice(int(start), int(stop - start))
            size = write_cache_parquet(url, part)
            written.append((url, size, part.num_rows))
    return written
