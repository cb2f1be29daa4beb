"""The verify cascade's phases: candidate pairs from the screening vectors,
the candidates' full-model vectors, and the pairs judged by them.

With a screening model the embedding phase embeds every document with it,
k-means clusters those vectors, and the pairwise phase writes every pair of a
cluster at least ``1 - screening_eps`` similar (``candidate_pairs/``, one
file per cluster) instead of each document's best score. Then:

* ``candidates``: the ids in those pairs, one file;
* ``verify-embedding``: those documents, read again from the input and
  embedded with the full model (``verify_embeddings/``), checkpointed per
  input file like the embedding phase, so that a killed run embeds only the
  files not done;
* ``verification``: each pair's full-model similarity, and for each later-
  ranked document its best, written as the score rows identification reads
  (``verified_scores/``). Identification at ``eps`` then removes only what
  the full model judges a duplicate of an earlier-ranked document.

Each phase's key holds the keys it depends on, so that a changed screening
model redoes everything, a changed ``screening_eps`` everything from the
pairwise phase on, and a changed full model the last two phases.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.phases import PhaseBook, digest
from beam_curator.workflows.semantic.clustering import embedding_matrix
from beam_curator.workflows.semantic.pairwise_phase import (
    MEMBERS_KEY,
    ClusterPairwiseStage,
    PairwiseSettings,
    cluster_rows,
    read_clusters,
    read_folder,
)
from beam_curator.writing import write_atomically

# The kernels' columns (the kernels themselves import torch: only when a phase runs).
ID, MAX_ID, SCORE, EARLIER_ID = "id", "max_id", "cosine_sim_score", "earlier_id"
# screening_eps when not given: this many times eps (at most MAX_DEFAULT_SCREENING_EPS). Measured with the
# static MiniLM screening for MiniLM at eps 0.01 on the Debian corpus (BENCHMARKS.md, bench_cascade): 2x keeps
# 0.97 of a full-model-only run's removals with 25% of the documents embedded again by the full model, whose
# rate sets the cascade's time; 5x kept 0.99 with 40% (1.6 times the time); 10x made about half the documents
# candidates.
SCREENING_EPS_FACTOR = 2
MAX_DEFAULT_SCREENING_EPS = 0.3


def default_screening_eps(eps: float) -> float:
    """``SCREENING_EPS_FACTOR`` times eps, at most ``MAX_DEFAULT_SCREENING_EPS``,
    never below eps (a screening stricter than the full model would miss its pairs)."""
    return max(eps, min(MAX_DEFAULT_SCREENING_EPS, SCREENING_EPS_FACTOR * eps))


class CandidatePairsStage(ClusterPairwiseStage):
    """For every cluster of a range, the pairs at least ``threshold`` similar
    by the screening vectors (see ``candidates.candidate_pairs``)."""

    name = "candidate_pairs"

    def __init__(self, by_center: str, settings: PairwiseSettings, threshold: float) -> None:
        super().__init__(by_center, None, settings)
        self.threshold = threshold

    def _scores(self, low: int, high: int) -> tuple[pd.DataFrame, list[tuple[int, int, int]]]:
        from beam_curator.dedup.semantic.candidates import candidate_pairs

        members = read_clusters(self.by_center, MEMBERS_KEY, low, high)
        if members is None:
            return candidate_pairs([], np.empty((0, 0), np.float32), np.empty(0), [], "easy", self.threshold), []
        ids, unit, keys = self._load(members)
        starts = members.starts
        frame = candidate_pairs(ids, unit, keys, starts, self.settings.order, self.threshold)
        # Pairs come cluster after cluster: the cluster of each is that of its document.
        cluster_of = pd.Series(np.repeat(members.clusters, np.diff([*starts, len(ids)])), index=ids)
        counts = cluster_of.loc[frame[ID]].value_counts().reindex(members.clusters, fill_value=0).to_numpy()
        return frame, cluster_rows(members.clusters, counts)


class CandidateRowsStage(ProcessingStage):
    """Keeps the records whose id is a candidate (none: the partition ends here)."""

    name = "candidate_rows"

    def __init__(self, candidates_file: str, id_column: str) -> None:
        self.candidates_file = candidates_file
        self.id_column = id_column
        self._candidates: pa.Array | None = None

    def process(self, task: DocumentBatch) -> DocumentBatch | None:
        if self._candidates is None:
            self._candidates = read_parquet(self.candidates_file, [ID]).column(ID).combine_chunks()
        table = task.to_pyarrow()
        kept = table.filter(pc.is_in(table.column(self.id_column), value_set=self._candidates))
        if kept.num_rows == 0:
            return None
        result = DocumentBatch(dataset_name=task.dataset_name, data=kept)
        result._metadata = dict(task._metadata)
        return result


def collect_candidates(book: PhaseBook, pairs_folder: str, candidates_file: str, pairwise_key: str) -> tuple[str, dict]:
    """The ``candidates`` phase: the ids of every candidate pair, once each."""
    key = digest([pairwise_key, "candidates"])

    def write() -> dict[str, Any]:
        pairs = read_folder(pairs_folder, [ID, EARLIER_ID])  # typed even when empty: every cluster has a file
        unique = pa.table({ID: pc.unique(pa.chunked_array([*pairs.column(ID).chunks, *pairs.column(EARLIER_ID).chunks]))})
        write_atomically(candidates_file, lambda handle: pq.write_table(unique, handle))
        return {"num_candidate_pairs": pairs.num_rows, "num_candidates": unique.num_rows}

    return key, book.run_afresh("candidates", key, [], None, [candidates_file], write)


def verify_pairs(
    book: PhaseBook, pairs_folder: str, vectors_folder: str, id_column: str, embedding_column: str, scores_folder: str,
    key: str,
) -> dict[str, Any]:
    """The ``verification`` phase: every candidate pair judged by the full model's vectors."""

    def judge() -> dict[str, Any]:
        from beam_curator.dedup.semantic.candidates import verified_scores

        pairs = read_folder(pairs_folder, [ID, EARLIER_ID])
        if pairs.num_rows:
            tables = [read_parquet(file, [id_column, embedding_column]) for file in parquet_files(vectors_folder)]
            ids, unit = embedding_matrix(pa.concat_tables(tables), id_column, embedding_column)
            later = pairs.column(ID).to_numpy(zero_copy_only=False)
            earlier = pairs.column(EARLIER_ID).to_numpy(zero_copy_only=False)
            table = pa.Table.from_pandas(verified_scores(later, earlier, ids, unit), preserve_index=False)
        else:  # nothing to judge: no score rows, of the ids' type
            table = pa.table({ID: pairs.column(ID), MAX_ID: pairs.column(EARLIER_ID), SCORE: pa.array([], pa.float32())})
        write_atomically(f"{scores_folder}/scores.parquet", lambda handle: pq.write_table(table, handle))
        return {"num_verified_documents": table.num_rows}

    return book.run_afresh("verification", key, [], None, [scores_folder], judge)
