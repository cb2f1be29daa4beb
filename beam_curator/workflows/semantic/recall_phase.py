"""Recall of the clustered search against brute force, on a sample of the run's documents.

Reads the cluster assignments the run made, draws a seeded uniform sample,
and compares all pairs of the sample exactly: the share of near-duplicate
pairs that k-means kept apart is then a number, not a guess. Both plain
SemDeDup and (if enabled) the cross-cluster pass are reported, side by side.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pyarrow as pa

from beam_curator.dedup.semantic.cross_cluster import visited_clusters
from beam_curator.dedup.semantic.ranking import order_by_keys, rank_keys
from beam_curator.dedup.semantic.recall import recall_report
from beam_curator.stages.io.parquet import ParquetFolder
from beam_curator.writing import write_atomically
from beam_curator.workflows.semantic.clustering import embedding_matrix
from beam_curator.workflows.semantic.pairwise_phase import PairwiseSettings

logger = logging.getLogger(__name__)
RECALL_EPS = (0.001, 0.005, 0.01, 0.05, 0.1)


def _sample(by_center: str, size: int, seed: int) -> pa.Table:
    dataset = ParquetFolder(by_center, partitioning="hive")
    total = dataset.count_rows()
    rng = np.random.default_rng(seed)
    keep = min(1.0, size / max(total, 1))
    parts = []
    for batch in dataset.to_batches():
        parts.append(batch.filter(pa.array(rng.random(batch.num_rows) < keep)))
    return pa.Table.from_batches(parts, schema=dataset.schema)


def measure_recall(
    by_center: str, settings: PairwiseSettings, sample_size: int, margin: float | None,
    eps_values: tuple[float, ...], folder: str,
) -> dict:
    """Write ``<folder>/recall_report.json`` and return it."""
    table = _sample(by_center, sample_size, settings.seed)
    if table.num_rows < 2:
        raise ValueError(f"recall needs at least 2 sampled documents, got {table.num_rows}; raise recall_sample")
    ids, vectors = embedding_matrix(table, settings.id_column, settings.embedding_column)
    keys = rank_keys(
        ids, table.column("cosine_dist_to_cent").to_numpy(), table.column("l2_dist_to_cent").to_numpy(),
        settings.which_to_keep, settings.distance_metric, settings.seed,
    )
    order = order_by_keys(ids, keys, settings.which_to_keep)
    clusters = table.column("nearest_cent").to_numpy()
    distance = "cosine" if settings.distance_metric == "cosine" else "l2"
    reports = {"plain": recall_report(ids, vectors, order, clusters, eps_values).to_dict()}
    if settings.cross_cluster:
        visited = visited_clusters(
            table.column("second_nearest_cent").to_numpy(),
            table.column(f"{distance}_dist_to_cent").to_numpy(),
            table.column(f"second_{distance}_dist").to_numpy(),
            margin,
        )
        reports["cross_cluster"] = recall_report(ids, vectors, order, clusters, eps_values, visited).to_dict()
    payload = json.dumps(reports, indent=1, default=str).encode()
    write_atomically(f"{folder}/recall_report.json", lambda handle: handle.write(payload))
    for mode, report in reports.items():
        for row in report["per_eps"]:
            logger.info(
                "recall (%s, eps=%g, %d sampled): %.3f of %d similar pairs compared; brute force would also remove %d",
                mode, row["eps"], report["sample_size"], row["recall"], row["similar_pairs"],
                row["kept_but_brute_force_removes"],
            )
    return reports
