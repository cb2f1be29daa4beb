"""``SemanticDedup``: SemDeDup as a PTransform in a user's own pipeline.

The semantic workflow's kernels (``beam_curator.dedup.semantic``) on Beam's
own steps, nothing collected in the driver:

1. a vector per document: the ``embedding_field`` it carries, or a
   RunInference of ``model_handler`` on its text;
2. a combine counts the documents (and their dimensions), which fixes the
   share drawn for the k-means fit; the draw depends on each id and the seed
   alone (``fit_sample``), so it is the workflow's draw;
3. a combine brings the drawn vectors (at most ``kmeans_max_sample_bytes``)
   to one worker, which fits the centroids on them in id order;
4. every document is assigned to its nearest centroid in batches, with the
   centroids as a side input, and grouped by cluster;
5. each cluster is ranked and scored as the workflow scores it, and a
   document whose best score against an earlier-ranked one reaches
   ``1 - eps`` is removed, carrying that document's id and the score;
6. that document may itself be removed, so each removal is followed to the
   kept document its chain of matches ends at (``KeptRepresentatives``);
7. the documents meet their verdicts by id.

A cluster of more than ``cluster_block_size`` documents is not held whole
by one worker: a count per cluster splits it into blocks (by a hash of the
id), each pair of blocks is scored on its own (a block with itself as a
cluster, two blocks with each other as the cross-cluster pass compares a
cluster with its visitors), and each document keeps its best match over the
pairs, ties going to the earlier-ranked document, as within one scan. A
worker then holds at most two blocks of vectors; each document is sent to as
many pairs as its cluster has blocks.

With ``cross_cluster`` a document also *visits* its second-nearest cluster
(``cross_cluster.visited_clusters``): a cluster's visitors are split into
chunks of at most ``cluster_block_size`` the same way, and each chunk meets
each block of the cluster (chunk 0 in the block's own group, later chunks in
groups of their own), so a worker still holds at most two blocks' worth.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import apache_beam as beam
import numpy as np

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.semantic.fit_sample import drawn_for_fit, fit_fraction
from beam_curator.dedup.semantic.kmeans_options import InitOptions
from beam_curator.dedup.semantic.normalize import l2_normalize
from beam_curator.dedup.semantic.ranking import (
    DISTANCE_METRICS,
    WHICH_TO_KEEP,
    RankingStrategy,
    as_id_array,
    best_match,
    rank_keys,
    uniform_by_id,
)
from beam_curator.errors import check_on_bad_record
from beam_curator.transforms.batch_rows import RowsOfBatches, takes_tasks
from beam_curator.transforms.dedup_documents import (
    KEPT,
    REMOVED,
    DedupOutputs,
    ScreenDocuments,
    check_field_names,
    check_input,
    field_of,
    id_of,
    kept_and_removed,
    removed_form,
    removed_type,
    text_of,
)
from beam_curator.transforms.dedup_progress import progress_settings, unwatched, watched
from beam_curator.transforms.embedding_cache import EmbedWithCache, cache_folder
from beam_curator.transforms.kept_representatives import KeptRepresentatives, Link

_NAME = "SemanticDedup"
_ASSIGN_BATCH = 4096  # documents assigned to centroids per kernel call
_MEMBER, _VISITOR = 0, 1  # a document's role in a cluster: in it, or visiting it (the cross-cluster pass)
_VISITING = -1  # the block a visitor is tagged with in a block's group


class SemanticDedup(beam.PTransform):
    """Documents whose embeddings are too similar to an earlier-ranked one's
    within their k-means cluster (cosine similarity at least ``1 - eps``) removed.

    Takes a bounded PCollection of dicts, schema'd ``beam.Row``s or
    ``DocumentBatch`` tasks (by row, see ``batch_rows``) with a unique
    ``id_field`` (all integers or all strings) and either an
    ``embedding_field`` holding each document's vector, or a string
    ``text_field`` that ``model_handler`` embeds: one of the package's
    handlers (``beam_curator.models.make_embedding_handler``) or any
    RunInference ``ModelHandler`` that takes a text and returns its vector
    (as an array, or a ``PredictionResult`` holding one). The other
    parameters are the semantic workflow's (NeMo Curator's names and
    defaults); with the same vectors and settings the removed ids are the
    workflow's. ``ranking_strategy`` (``RankingStrategy``, read from the
    documents' fields) overrides ``which_to_keep`` as in the workflow.
    ``cross_cluster`` also compares each document with the members of its
    second-nearest cluster (only those within ``cross_cluster_margin`` of
    that boundary, if given), as the workflow's cross-cluster pass does.
    ``cluster_block_size`` bounds the documents of a cluster one
    worker holds (a larger cluster is scored by pairs of blocks: see the
    module docstring). ``cache_path`` keeps each text's vector
    (``embedding_cache``), so that a rerun after a kill or a change embeds
    only the texts not embedded before; ``cache_key`` names what the vectors
    depend on, for a handler not the package's (whose model files and
    settings make the key). ``on_bad_record`` screens documents as
    ``ExactDedup``'s does (a document lacking the embedding or a ranking
    field too), and ``progress`` and ``progress_folder`` show its counts as
    ``ExactDedup``'s do. Gives ``.kept`` and ``.removed`` as ``ExactDedup`` does:
    a removed document's ``matched_id`` is the earlier-ranked document it is
    most similar to (NeMo's ``max_id``, which may itself be removed), and
    ``duplicate_of`` the kept document that chain of matches ends at;
    ``similarity`` and ``matched_similarity`` are the cosine similarities of
    those pairs. ``star_rounds`` is how many rounds finding the chains may
    take, as ``FuzzyDedup``'s connected components.
    """

    def __init__(
        self,
        model_handler: Any = None,
        *,
        id_field: str = GENERATED_ID,
        text_field: str = "text",
        embedding_field: str | None = None,
        n_clusters: int = 100,
        eps: float = 0.01,
        which_to_keep: str = "hard",
        distance_metric: str = "cosine",
        ranking_strategy: RankingStrategy | None = None,
        random_state: int = 42,
        max_iter: int = 300,
        tol: float = 1e-4,
        init: str | np.ndarray = "k-means||",
        n_init: int | str = 1,
        oversampling_factor: float = 2.0,
        max_samples_per_batch: int = 1 << 15,
        fit_data_fraction: float | None = None,
        kmeans_max_sample_bytes: int = 2 << 30,
        kmeans_backend: str = "auto",
        pairwise_batch_size: int = 1024,
        cluster_block_size: int = 1 << 16,
        cross_cluster: bool = False,
        cross_cluster_margin: float | None = None,
        star_rounds: int = 10,
        cache_path: str | None = None,
        cache_key: str | None = None,
        on_bad_record: str = "raise",
        progress: bool | None = None,
        progress_folder: str | None = None,
    ) -> None:
        super().__init__()
        self.progress, self.progress_folder = progress_settings(_NAME, progress, progress_folder)
        if (model_handler is None) == (embedding_field is None):
            raise ValueError(f"{_NAME}: give model_handler (to embed text_field) or embedding_field (vectors the "
                             "documents carry), not both or neither")
        if cache_path is not None and model_handler is None:
            raise ValueError(f"{_NAME}: cache_path keeps what model_handler embeds; with embedding_field there is "
                             "nothing to embed: drop cache_path")
        if cache_path is not None and cache_key is None and not hasattr(model_handler, "vector_identity"):
            raise ValueError(f"{_NAME}: cache_path with a {type(model_handler).__name__} needs cache_key, a name for "
                             "what its vectors depend on (model and settings): a cache made under another key is "
                             "never reused")
        check_field_names(_NAME, id_field=id_field, text_field=text_field,
                          **({} if embedding_field is None else {"embedding_field": embedding_field}))
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 1:
            raise ValueError(f"{_NAME}: n_clusters must be a positive integer, not {n_clusters!r}")
        if not isinstance(eps, (int, float)) or not 0 <= eps < 1:
            raise ValueError(f"{_NAME}: eps must be in [0, 1) (documents at cosine similarity >= 1 - eps are "
                             f"duplicates), not {eps!r}")
        for parameter, value, allowed in (("which_to_keep", which_to_keep, WHICH_TO_KEEP),
                                          ("distance_metric", distance_metric, DISTANCE_METRICS)):
            if value not in allowed:
                raise ValueError(f"{_NAME}: {parameter} must be one of {list(allowed)}, not {value!r}")
        if ranking_strategy is not None and not isinstance(ranking_strategy, RankingStrategy):
            raise ValueError(f"{_NAME}: ranking_strategy must be a RankingStrategy (RankingStrategy.metadata_based(...) "
                             f"or RankingStrategy.random()), not {ranking_strategy!r}")
        for parameter, value in (("max_iter", max_iter), ("pairwise_batch_size", pairwise_batch_size),
                                 ("kmeans_max_sample_bytes", kmeans_max_sample_bytes),
                                 ("cluster_block_size", cluster_block_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if parameter == "max_iter" else 1):
                raise ValueError(f"{_NAME}: {parameter} must be a positive integer, not {value!r}")
        if not isinstance(cross_cluster, bool):
            raise ValueError(f"{_NAME}: cross_cluster must be True or False, not {cross_cluster!r}")
        if cross_cluster_margin is not None:
            if not cross_cluster:
                raise ValueError(f"{_NAME}: cross_cluster_margin limits the cross-cluster pass; pass "
                                 "cross_cluster=True with it, or drop it")
            if isinstance(cross_cluster_margin, bool) or not isinstance(cross_cluster_margin, (int, float)) \
                    or not cross_cluster_margin >= 0:
                raise ValueError(f"{_NAME}: cross_cluster_margin must be a distance >= 0 (or None: every "
                                 f"document visits), not {cross_cluster_margin!r}")
        if cross_cluster and ranking_strategy is not None:
            raise ValueError(f"{_NAME}: ranking_strategy orders each cluster on its own; the cross-cluster pass "
                             "needs one order over all documents, so drop cross_cluster or ranking_strategy")
        self.model_handler = model_handler
        self.id_field, self.text_field, self.embedding_field = id_field, text_field, embedding_field
        self.n_clusters, self.eps = n_clusters, float(eps)
        self.which_to_keep, self.distance_metric, self.seed = which_to_keep, distance_metric, random_state
        # A ranking strategy's keys are positions, kept first: ascending, as "easy" orders.
        self.ranking, self.order = ranking_strategy, which_to_keep if ranking_strategy is None else "easy"
        self.fit = {"max_iter": max_iter, "tol": tol, "seed": random_state, "backend": kmeans_backend,
                    "init": InitOptions(init, n_init, oversampling_factor, max_samples_per_batch)}
        self.fit_data_fraction, self.max_sample_bytes = fit_data_fraction, kmeans_max_sample_bytes
        self.pairwise_batch_size, self.block_size = pairwise_batch_size, cluster_block_size
        self.cross_cluster, self.margin = cross_cluster, cross_cluster_margin
        self.cache_path, self.cache_key = cache_path, cache_key
        self.star_rounds = star_rounds
        check_on_bad_record(on_bad_record, _NAME)
        self.on_bad_record = on_bad_record

    def expand(self, documents: beam.PCollection) -> DedupOutputs:
        check_input(documents, _NAME)
        if takes_tasks(documents):
            source = {"text_field": self.text_field} if self.embedding_field is None else {
                "embedding_field": self.embedding_field}
            ranked_by = {f"ranking_strategy.metadata_cols[{number}]": name for number, name in enumerate(self._columns)}
            columns = {"id_field": self.id_field, **source, **ranked_by}
            return watched(self, documents, documents | "ByRow" >> RowsOfBatches(unwatched(self), columns, _NAME))
        keyed = (documents
                 | "ScreenDocuments" >> beam.ParDo(ScreenDocuments(_NAME, self.on_bad_record, self._check))
                 | "KeyById" >> beam.Map(lambda document: (self._id(document), document)))
        vectors = keyed | "Vectors" >> self._vectors()
        stats = vectors | "CountDocuments" >> beam.CombineGlobally(_CountAndDims())
        sample = vectors | "DrawFitSample" >> beam.Filter(self._drawn, stats=beam.pvalue.AsSingleton(stats))
        centroids = (
            sample
            | "GatherFitSample" >> beam.combiners.ToList()
            | "FitCentroids" >> beam.Map(self._fit_centroids, stats=beam.pvalue.AsSingleton(stats))
        )
        assigned = (
            vectors
            | "AssignBatches" >> beam.BatchElements(min_batch_size=1, max_batch_size=_ASSIGN_BATCH)
            | "NearestCentroid" >> beam.FlatMap(self._nearest_centroid, centroids=beam.pvalue.AsSingleton(centroids))
        )
        sizes = assigned | "ClusterSizes" >> beam.combiners.Count.PerKey()  # each cluster's members, and visitors
        removals = (
            assigned
            | "ToBlockPairs" >> beam.FlatMap(self._block_pairs, sizes=beam.pvalue.AsDict(sizes))
            | "GroupBlockPairs" >> beam.GroupByKey()
            | "ScoreBlockPairs" >> beam.FlatMap(self._pair_duplicates)
            | "BestMatch" >> beam.CombinePerKey(best_match, which_to_keep=self.order)
            | "AsLinks" >> beam.MapTuple(lambda key, match: (key, Link(match[1], match[0], *match[3:])))
            | "KeptRepresentatives" >> KeptRepresentatives(self.star_rounds, _NAME)
        )
        joined = {"document": keyed, "duplicate": removals} | "MeetVerdicts" >> beam.CoGroupByKey()
        tagged = joined | "Verdicts" >> beam.ParDo(_Verdict(self.id_field))
        return watched(self, documents, kept_and_removed(tagged, documents.element_type,
                                                         removed_type(documents.element_type, self.id_field)))

    def _id(self, document: Any) -> Any:
        return id_of(document, self.id_field, _NAME)

    def _check(self, document: Any) -> None:
        """Whether the document has what the steps read: an id, a text or vector, the ranking fields."""
        self._id(document)
        if self.embedding_field is None:
            text_of(document, self.text_field, _NAME, self.id_field)
        else:
            field_of(document, self.embedding_field, "embedding_field", _NAME, self.id_field)
        self._ranked_by(document)

    @property
    def _columns(self) -> list[str]:
        """The fields the ranking strategy orders by."""
        return [] if self.ranking is None else list(self.ranking.metadata_cols)

    def _ranked_by(self, document: Any) -> tuple:
        """The document's values of the ranking strategy's fields."""
        return tuple(field_of(document, name, "ranking_strategy's metadata_cols", _NAME) for name in self._columns)

    def _vectors(self) -> beam.PTransform:
        """``(id, float32 vector, ranking values)`` of each document."""
        if self.embedding_field is not None:
            return beam.MapTuple(lambda key, document: (key, _as_vector(
                field_of(document, self.embedding_field, "embedding_field", _NAME), key, "embedding_field"),
                self._ranked_by(document)))
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference  # imports torch

        if self.cache_path is None:
            embed = RunInference(KeyedModelHandler(self.model_handler))
        else:
            key = self.cache_key or self.model_handler.vector_identity()
            embed = EmbedWithCache(self.model_handler, cache_folder(self.cache_path, key), key)
        return (  # the ranking values travel in RunInference's key
            "Texts" >> beam.MapTuple(lambda key, document: ((key, self._ranked_by(document)),
                                                            text_of(document, self.text_field, _NAME)))
            | "Embed" >> embed
            | "AsVectors" >> beam.MapTuple(lambda key, result: (key[0], _as_vector(
                getattr(result, "inference", result), key[0], "model_handler's result"), key[1]))
        )

    def _drawn(self, document: tuple[Any, np.ndarray, tuple], stats: tuple[int, int]) -> bool:
        count, dims = stats
        fraction = fit_fraction(count, dims, self.max_sample_bytes, self.fit_data_fraction)
        return bool(drawn_for_fit([document[0]], fraction, self.seed)[0])

    def _fit_centroids(self, sample: list[tuple[Any, np.ndarray, tuple]], stats: tuple[int, int]) -> np.ndarray | None:
        """Centroids fitted on the drawn documents in id order (the workflow's
        order); none for an empty input."""
        from beam_curator.dedup.semantic.kmeans import fit_kmeans  # imports torch: only on a worker

        count, _ = stats
        if count == 0:
            return None
        if self.n_clusters > count:
            raise ValueError(f"{_NAME}: n_clusters={self.n_clusters} is more than the {count} documents to "
                             f"cluster; pass n_clusters <= {count}")
        if len(sample) < self.n_clusters:
            raise ValueError(f"{_NAME}: the k-means sample holds {len(sample)} documents, fewer than "
                             f"n_clusters={self.n_clusters}; raise kmeans_max_sample_bytes or lower n_clusters")
        ids = as_id_array([document[0] for document in sample])
        order = np.argsort(ids, kind="stable")
        matrix = _unit_rows([sample[i][:2] for i in order])
        return fit_kmeans(matrix, self.n_clusters, **self.fit).centroids

    def _nearest_centroid(self, batch: list[tuple[Any, np.ndarray, tuple]],
                          centroids: np.ndarray | None) -> Iterator[tuple[tuple[int, int], tuple]]:
        """``((cluster, role), (id, vector, cosine distance, l2 distance, ranking values))`` of each document of
        a batch: as a member of its nearest cluster and, with the cross-cluster pass, as a visitor of the
        cluster it visits (distances to its own centroid either way: they rank it; vectors as given: the
        scoring normalises them itself, as the workflow does)."""
        from beam_curator.dedup.semantic.cross_cluster import visited_clusters  # imports torch: only on a worker
        from beam_curator.dedup.semantic.kmeans import assign

        found = assign(_unit_rows([document[:2] for document in batch]), centroids)
        visits = [-1] * len(batch)
        if self.cross_cluster:
            near, second = ((found.cosine_dist_to_cent, found.second_cosine_dist) if self.distance_metric == "cosine"
                            else (found.l2_dist_to_cent, found.second_l2_dist))
            visits = visited_clusters(found.second_labels, near, second, self.margin).tolist()
        for (key, vector, ranked_by), label, visit, cos, l2 in zip(
                batch, found.labels.tolist(), visits, found.cosine_dist_to_cent.tolist(), found.l2_dist_to_cent.tolist()):
            yield (label, _MEMBER), (key, vector, cos, l2, ranked_by)
            if visit >= 0:
                yield (visit, _VISITOR), (key, vector, cos, l2, ranked_by)

    def _block_pairs(self, assigned: tuple[tuple[int, int], tuple],
                     sizes: dict[tuple[int, int], int]) -> Iterator[tuple[tuple, tuple]]:
        """A document keyed by each group ``(cluster, low block, high block, visitor chunk)`` it is scored in,
        tagged with its block (``_VISITING`` for a visitor): a member with every block of its cluster, and
        with each visitor chunk past the first (the first is scored in the block's own group); a visitor
        with each block of the cluster it visits, in its chunk."""
        (cluster, role), document = assigned
        blocks = -(-sizes.get((cluster, _MEMBER), 0) // self.block_size)
        chunks = -(-sizes.get((cluster, _VISITOR), 0) // self.block_size)
        if role == _VISITOR:
            chunk = self._part_of(document[0], chunks)
            for block in range(blocks):
                yield (cluster, block, block, chunk), (_VISITING, *document)
            return
        own = self._part_of(document[0], blocks)
        for other in range(blocks):
            yield (cluster, min(own, other), max(own, other), 0), (own, *document)
        for chunk in range(1, chunks):
            yield (cluster, own, own, chunk), (own, *document)

    def _part_of(self, document_id: Any, parts: int) -> int:
        """Which of ``parts`` blocks (or chunks) a document falls in: by a seeded hash of its id alone."""
        return 0 if parts <= 1 else int(uniform_by_id([document_id], self.seed)[0] * parts)

    def _pair_duplicates(self, group: tuple[tuple, Iterable[tuple]]) -> Iterator[tuple[Any, tuple]]:
        """``(id, (score, max_id, max_id's rank, its unit vector, max_id's))`` of each document of a group whose
        best earlier match in it scores at least ``1 - eps``: within a block, across two blocks, or between a
        block and its visitors."""
        from beam_curator.dedup.semantic.cross_cluster import cross_cluster_scores
        from beam_curator.dedup.semantic.pairwise import ID, MAX_ID, MAX_RANK_KEY, SCORE, semdedup_clusters

        (_, low, high, chunk), tagged = group
        tagged = list(tagged)
        sides = [[member[1:] for member in tagged if member[0] == block] for block in sorted({low, high})]
        guests = [member[1:] for member in tagged if member[0] == _VISITING]
        if not sides[0]:  # visitors of a block that drew no members
            return
        ids, unit, keys = self._ranked(sides)
        vectors, found = list(zip(ids, unit)), []
        if low != high:
            found.append(cross_cluster_scores(ids[0], unit[0], keys[0], ids[1], unit[1], keys[1], self.order,
                                              self.pairwise_batch_size))
        elif chunk == 0:
            found.append(semdedup_clusters(ids[0], unit[0], keys[0], [0], self.order, self.pairwise_batch_size))
        if guests:  # never with a ranking strategy: each side's keys are global
            (g_ids,), (g_unit,), (g_keys,) = self._ranked([guests])
            vectors.append((g_ids, g_unit))
            found.append(cross_cluster_scores(ids[0], unit[0], keys[0], g_ids, g_unit, g_keys, self.order,
                                              self.pairwise_batch_size))
        ranked_by = {} if self.ranking is None else {member[0]: member[4] for side in sides for member in side}
        unit_of: dict[Any, np.ndarray] = {}
        for scores in found:
            scores = scores[scores[SCORE] >= 1 - self.eps]
            if len(scores) and not unit_of:  # the vectors a removal carries on (KeptRepresentatives)
                unit_of = {key: row for side_ids, side_unit in vectors for key, row in zip(side_ids.tolist(), side_unit)}
            for document_id, max_id, score, max_key in zip(scores[ID].tolist(), scores[MAX_ID].tolist(),
                                                           scores[SCORE].tolist(), scores[MAX_RANK_KEY].tolist()):
                # A strategy's keys are positions among these blocks only: its sort key ranks across pairs.
                rank = max_key if self.ranking is None else self.ranking.sort_key(max_id, ranked_by[max_id])
                yield document_id, (float(score), max_id, rank, unit_of[document_id].copy(), unit_of[max_id].copy())

    def _ranked(self, sides: list[list[tuple]]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """The ids, unit vectors and rank keys of each side's ``(id, vector, cosine distance, l2 distance,
        ranking values)`` members; a ranking strategy ranks the sides together, as their cluster ranks them."""
        ids = [as_id_array([member[0] for member in side]) for side in sides]
        units = [_unit_rows([member[:2] for member in side]) for side in sides]
        if self.ranking is None:
            keys = [rank_keys(side_ids, np.array([member[2] for member in side], np.float32),
                              np.array([member[3] for member in side], np.float32),
                              self.which_to_keep, self.distance_metric, self.seed)
                    for side_ids, side in zip(ids, sides)]
            return ids, units, keys
        values = [member[4] for side in sides for member in side]
        columns = {name: np.array([row[number] for row in values]) for number, name in enumerate(self._columns)}
        together = self.ranking.cluster_keys(np.concatenate(ids), columns)
        return ids, units, np.split(together, [len(ids[0])])[:len(sides)]


def _as_vector(value: Any, document_id: Any, source: str) -> np.ndarray:
    vector = np.asarray(value, dtype=np.float32)
    if vector.ndim != 1 or not len(vector):
        raise ValueError(f"{_NAME}: document {document_id!r}: the {source} is not a vector of numbers "
                         f"(shape {vector.shape}); give one embedding per document")
    return vector


def _unit_rows(pairs: list[tuple[Any, np.ndarray]]) -> np.ndarray:
    """The vectors of ``(id, vector)`` pairs as unit float32 rows; vectors of
    different lengths, or zero or non-finite ones, are errors naming the ids."""
    ids = [key for key, _ in pairs]
    lengths = {len(vector) for _, vector in pairs}
    if len(lengths) > 1:
        raise ValueError(f"{_NAME}: the documents' vectors have different lengths {sorted(lengths)}; embed every "
                         "document with one model")
    return l2_normalize(np.stack([vector for _, vector in pairs]) if pairs else np.empty((0, 0), np.float32), ids,
                        in_place=True)



class _CountAndDims(beam.CombineFn):
    """How many ``(id, vector, ranking values)`` documents there are, and the length of their vectors."""

    def create_accumulator(self) -> tuple[int, int]:
        return 0, 0

    def add_input(self, accumulator: tuple[int, int], document: tuple[Any, np.ndarray, tuple]) -> tuple[int, int]:
        return accumulator[0] + 1, len(document[1])

    def merge_accumulators(self, accumulators: Iterable[tuple[int, int]]) -> tuple[int, int]:
        counted = list(accumulators)
        return sum(count for count, _ in counted), max((dims for _, dims in counted), default=0)

    def extract_output(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator


class _Verdict(beam.DoFn):
    """A document and its verdict (if any) in; the document tagged ``kept``,
    or, with its removal's fields, ``removed``."""

    def __init__(self, id_field: str) -> None:
        self.id_field = id_field

    def process(self, joined: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[Any]:
        document_id, sides = joined
        documents, verdicts = list(sides["document"]), list(sides["duplicate"])
        if len(documents) > 1:
            raise ValueError(f"{_NAME}: id_field {self.id_field!r} gives the id {document_id!r} to "
                             f"{len(documents)} documents; ids must be unique")
        for document in documents:
            if verdicts:
                (removal,) = verdicts
                yield REMOVED, removed_form(document, tuple(removal))
            else:
                yield KEPT, document
