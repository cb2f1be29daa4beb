"""Where every phase keeps its files (NeMo Curator's layout, plus checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.stages.io.parquet import write_table
from beam_curator.writing import write_atomically


def write_cache_parquet(url: str, table: pa.Table) -> int:
    """Write a table of the cache (vectors and the columns beside them) durably, vectors plain
    and uncompressed (see :func:`~beam_curator.stages.io.parquet.write_table`); returns its size."""
    return write_atomically(url, lambda handle: write_table(table, handle, compression="none"))


def sort_rows(table: pa.Table, column: str) -> pa.Table:
    """``table`` ordered by ``column`` (stable). Lists of one length (vectors)
    are reordered as fixed-size lists, which arrow moves ten times faster than
    variable ones, and keep their type."""
    order = pa.array(np.argsort(table.column(column).to_numpy(), kind="stable"))
    columns = []
    for field, values in zip(table.schema, table.columns):
        values = values.combine_chunks()
        if pa.types.is_list(field.type) and len(values) and _one_length(values):
            fixed = values.cast(pa.list_(field.type.value_type, len(values[0])))
            columns.append(fixed.take(order).cast(field.type))
        else:
            columns.append(values.take(order))
    return pa.Table.from_arrays(columns, schema=table.schema)


def _one_length(values: pa.ListArray) -> bool:
    bounds = pc.min_max(pc.list_value_length(values)).as_py()
    return values.null_count == 0 and bounds["min"] == bounds["max"]


# Where TextSemanticDeduplicationWorkflow keeps the deduplication results, under its cache_path.
TEXT_RESULTS_FOLDER = "semantic_dedup"


@dataclass(frozen=True)
class CacheLayout:
    """The folders of one semantic dedup run.

    ``results_folder`` is where under ``cache_path`` the deduplication
    results go (``kmeans_results/`` and ``pairwise_results/``, as in NeMo
    Curator, and our ``kmeans_sample/`` and ``id_check/`` beside them):
    directly in it (``""``) for ``SemanticDeduplicationWorkflow``, in
    ``semantic_dedup/`` for ``TextSemanticDeduplicationWorkflow``, where NeMo
    Curator puts each. Embeddings and checkpoints are in ``cache_path``
    itself either way.
    """

    cache_path: str
    output_path: str
    results_folder: str = ""

    def _cache(self, *parts: str) -> str:
        return "/".join([self.cache_path.rstrip("/"), *parts])

    def _results(self, *parts: str) -> str:
        return self._cache(*filter(None, [self.results_folder.strip("/")]), *parts)

    @property
    def results_key(self) -> list[str]:
        """What the k-means phase's key (and so every later one) holds of
        where the results are. Earlier versions kept them in
        ``semantic_dedup/`` for both workflows, under keys without this. The
        text workflow's stay there, and its caches valid: nothing is added
        for that folder. A direct workflow's old markers no longer match, so
        a rerun computes the results again where they are read now, instead
        of passing its phases as done because their files are still in place
        where nothing reads them."""
        folder = self.results_folder.strip("/")
        return [] if folder == TEXT_RESULTS_FOLDER else [folder]

    @property
    def earlier_results(self) -> str | None:
        """The folder where such an earlier cache of the direct workflow holds
        these results (None when they are still kept there)."""
        return self._cache(TEXT_RESULTS_FOLDER) if self.results_key else None

    @property
    def embeddings(self) -> str:
        return self._cache("embeddings")

    @property
    def kmeans_results(self) -> str:
        return self._results("kmeans_results")

    @property
    def kmeans_sample(self) -> str:
        """The documents the centroids are fitted on (see ``clustering.SampleWriter``)."""
        return self._results("kmeans_sample")

    @property
    def id_buckets(self) -> str:
        """Every document's id, by bucket (see ``id_check``)."""
        return self._results("id_check", "buckets")

    @property
    def repeated_ids(self) -> str:
        """The ids each bucket holds more than once (none, for good input)."""
        return self._results("id_check", "repeated")

    @property
    def centroids(self) -> str:
        return f"{self.kmeans_results}/kmeans_centroids.npy"

    @property
    def by_nearest_center(self) -> str:
        return f"{self.kmeans_results}/embs_by_nearest_center"

    @property
    def members_by_range(self) -> str:
        """Documents by range of nearest clusters, one file per assignment task (removed once grouped)."""
        return f"{self.kmeans_results}/members_by_range"

    @property
    def visitors_by_range(self) -> str:
        """Visitors by range of second-nearest clusters, one file per assignment task (removed once grouped)."""
        return f"{self.kmeans_results}/visitors_by_range"

    @property
    def visitors(self) -> str:
        """Documents grouped by their second-nearest center (cross-cluster pass only)."""
        return f"{self.kmeans_results}/embs_by_second_center"

    @property
    def pairwise_results(self) -> str:
        return self._results("pairwise_results")

    @property
    def candidate_pairs(self) -> str:
        """Verify cascade: the pairs the screening vectors propose, one file per cluster."""
        return self._results("candidate_pairs")

    @property
    def candidates(self) -> str:
        """Verify cascade: the ids of every candidate pair, once each."""
        return self._results("candidates", "candidate_ids.parquet")

    @property
    def verify_embeddings(self) -> str:
        """Verify cascade: the candidates' full-model vectors, one file per input file."""
        return self._cache("verify_embeddings")

    @property
    def verified_scores(self) -> str:
        """Verify cascade: each candidate's best full-model score, as ``pairwise_results`` holds scores."""
        return self._results("verified_scores")

    def checkpoint(self, phase: str) -> str:
        return self._cache("checkpoints", phase)

    @property
    def duplicates(self) -> str:
        return f"{self.output_path.rstrip('/')}/duplicates"

    @property
    def duplicate_pairs(self) -> str:
        """Each duplicate with the document it duplicates and their similarity
        (``duplicates/`` holds only ``id``, as NeMo Curator's does)."""
        return f"{self.output_path.rstrip('/')}/duplicate_pairs"

    @property
    def deduplicated(self) -> str:
        return f"{self.output_path.rstrip('/')}/deduplicated"

    @property
    def recall(self) -> str:
        return f"{self.output_path.rstrip('/')}/recall"

    @property
    def analysis(self) -> str:
        return f"{self.output_path.rstrip('/')}/analysis"
