"""The single global order that decides which copy of a duplicate survives.

Every document gets a rank key that depends only on the document (its distance to
its own centroid, or a seeded hash of its id), ties broken by id. The order of any
subset is therefore the restriction of the order of the whole collection: a
cluster can be ranked alone, and a cross-cluster comparison between two clusters
agrees with both of them about who came first.

``hard`` keeps the documents farthest from their centroid (sorted by distance,
then id, both descending), ``easy`` the nearest (both ascending), ``random`` a
seeded shuffle (hash, then id, ascending). A document is scored against the
documents ranked before it, so the first-ranked copy of a duplicate group is
the one kept.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from beam_curator.dedup.semantic.normalize import describe_ids

WHICH_TO_KEEP = ("hard", "easy", "random")
DISTANCE_METRICS = ("cosine", "l2")

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Keys are float64; keeping 53 hash bits makes each one exact, so the order is
# exactly (hash53, id) wherever it is computed.
_HASH_SHIFT = np.uint64(11)


def as_id_array(ids: Sequence) -> np.ndarray:
    """Ids as an int64 or unicode array; mixing the two has no meaningful order."""
    # Python sequences go through object dtype: np.asarray([1, "a"]) would quietly
    # turn the integer into a string.
    array = np.asarray(ids) if hasattr(ids, "dtype") else np.asarray(ids, dtype=object)
    if array.ndim != 1:
        raise ValueError(f"document ids must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        return np.empty(0, dtype=np.int64)
    if array.dtype.kind == "u" and array.max() > np.iinfo(np.int64).max:
        raise ValueError("document ids above 2**63 - 1 are not supported; use string ids")
    if array.dtype.kind in "iu":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "U":
        return array
    if all(isinstance(x, str) for x in array):
        return array.astype(str)
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in array):
        return array.astype(np.int64)
    raise ValueError(
        f"document ids must be all integers or all strings, got values such as "
        f"{list(array[:3])}; convert them to one type before deduplication"
    )


def is_descending(which_to_keep: str) -> bool:
    """Whether the order runs from the largest (key, id) down."""
    _check_choice("which_to_keep", which_to_keep, WHICH_TO_KEEP)
    return which_to_keep == "hard"


def best_match(matches: Iterable[tuple], which_to_keep: str) -> tuple:
    """Of one document's ``(score, max_id, max_id's rank key, ...)`` matches (what follows rides along), the one
    :func:`~beam_curator.dedup.semantic.cross_cluster.combine_scores` keeps:
    the highest score, of equal ones the earlier-ranked match. For a combine
    (``SemanticDedup``'s), which meets a document's matches a few at a time,
    its own results among them, rather than as score rows."""
    found = list(matches)
    best = max(match[0] for match in found)
    earliest = max if is_descending(which_to_keep) else min
    return earliest((match for match in found if match[0] == best), key=lambda match: (match[2], match[1]))


def rank_keys(
    ids: Sequence,
    cosine_dist: np.ndarray | None,
    l2_dist: np.ndarray | None,
    which_to_keep: str,
    distance_metric: str,
    seed: int,
) -> np.ndarray:
    """Per-document float64 rank keys; with the id they fix the global order.

    Only the distance named by ``distance_metric`` is read (and neither for
    ``random``), so the other may be ``None``.
    """
    _check_choice("which_to_keep", which_to_keep, WHICH_TO_KEEP)
    _check_choice("distance_metric", distance_metric, DISTANCE_METRICS)
    id_array = as_id_array(ids)
    if which_to_keep == "random":
        return _hash_keys(id_array, seed)
    name = "cosine_dist" if distance_metric == "cosine" else "l2_dist"
    given = cosine_dist if distance_metric == "cosine" else l2_dist
    if given is None:
        raise ValueError(f"which_to_keep={which_to_keep!r} with distance_metric={distance_metric!r} needs {name}")
    dist = np.asarray(given, dtype=np.float64)
    if dist.shape != id_array.shape:
        raise ValueError(f"{name} has shape {dist.shape} but there are {len(id_array)} ids")
    bad = np.flatnonzero(~np.isfinite(dist))
    if bad.size:
        raise ValueError(
            f"documents {describe_ids(id_array, bad)} have NaN/inf {name}; "
            "recompute their distances to the centroids"
        )
    return dist


def order_by_keys(ids: Sequence, keys: np.ndarray, which_to_keep: str) -> np.ndarray:
    """Positions of the documents in global order (first = kept among duplicates)."""
    descending = is_descending(which_to_keep)
    id_array = as_id_array(ids)
    key_array = np.asarray(keys, dtype=np.float64)
    if key_array.shape != id_array.shape:
        raise ValueError(f"got {len(key_array)} rank keys for {len(id_array)} ids")
    unique, counts = np.unique(id_array, return_counts=True)
    if (counts > 1).any():
        repeated = unique[counts > 1]
        raise ValueError(
            f"document ids {repeated[:10].tolist()} appear more than once; ids must be unique "
            "(and a cross-cluster visitor must not also be a member of the cluster)"
        )
    order = np.lexsort((id_array, key_array))
    return np.ascontiguousarray(order[::-1] if descending else order).astype(np.int64)


def order_documents(
    ids: Sequence,
    cosine_dist: np.ndarray | None,
    l2_dist: np.ndarray | None,
    which_to_keep: str,
    distance_metric: str,
    seed: int,
) -> np.ndarray:
    """Positions of the documents in global order; see the module docstring."""
    keys = rank_keys(ids, cosine_dist, l2_dist, which_to_keep, distance_metric, seed)
    return order_by_keys(ids, keys, which_to_keep)


@dataclass(frozen=True)
class RankingStrategy:
    """NeMo Curator's custom order within a cluster: by ``metadata_cols`` in
    priority order (each ascending or not; ties by id, ascending), or a seeded
    shuffle (``strategy="random"``). Overrides ``which_to_keep`` and
    ``distance_metric``; the columns must be among the workflow's
    ``metadata_fields`` so that they reach the clusters."""

    metadata_cols: list[str] = field(default_factory=list)
    ascending: list[bool] | bool = True
    strategy: str = "sort"
    random_seed: int = 42

    def __post_init__(self) -> None:
        _check_choice("strategy", self.strategy, ("sort", "random"))
        if isinstance(self.ascending, bool):
            object.__setattr__(self, "ascending", [self.ascending] * len(self.metadata_cols))
        if len(self.ascending) != len(self.metadata_cols):
            raise ValueError(
                f"ascending has {len(self.ascending)} entries for {len(self.metadata_cols)} metadata_cols; give one each"
            )
        if self.strategy == "sort" and not self.metadata_cols:
            raise ValueError("a sort RankingStrategy needs metadata_cols (or use RankingStrategy.random())")

    @classmethod
    def metadata_based(cls, metadata_cols: list[str], ascending: list[bool] | bool = True,
                       random_seed: int = 42) -> RankingStrategy:
        return cls(list(metadata_cols), ascending, "sort", random_seed)

    @classmethod
    def random(cls, random_seed: int = 42) -> RankingStrategy:
        return cls([], [], "random", random_seed)

    def cluster_keys(self, ids: Sequence, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Rank keys of one cluster's documents, ascending = kept first. Positions
        within the cluster, so they order that cluster only (no cross-cluster pass)."""
        id_array = as_id_array(ids)
        if self.strategy == "random":
            return _hash_keys(id_array, self.random_seed)
        missing = [name for name in self.metadata_cols if name not in columns]
        if missing:
            raise KeyError(f"ranking columns {missing} are not in the cluster's data (it has {sorted(columns)})")
        sort_keys = [id_array]  # np.lexsort: the last key is the primary one
        for name, ascending in reversed(list(zip(self.metadata_cols, self.ascending))):
            codes = np.unique(np.asarray(columns[name]), return_inverse=True)[1].reshape(-1)
            sort_keys.append(codes if ascending else -codes)
        position = np.empty(len(id_array), dtype=np.float64)
        position[np.lexsort(sort_keys)] = np.arange(len(id_array))
        return position

    def sort_key(self, document_id: int | str, values: Sequence) -> tuple:
        """A key that orders documents of any clusters as ``cluster_keys``
        orders those of one (smaller = kept first); ``values`` are the
        document's ``metadata_cols`` in order."""
        if self.strategy == "random":
            return float(_hash_keys(as_id_array([document_id]), self.random_seed)[0]), document_id
        return (*(value if ascending else _Reversed(value) for value, ascending in zip(values, self.ascending)),
                document_id)


@functools.total_ordering
class _Reversed:
    """A value that sorts in the opposite order (a descending column of any type)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.value == other.value

    def __lt__(self, other: _Reversed) -> bool:
        return other.value < self.value

    def __hash__(self) -> int:
        return hash(self.value)


def uniform_by_id(ids: Sequence, seed: int) -> np.ndarray:
    """A seeded number in [0, 1) for each id that depends on the id alone, so
    a draw made with it does not depend on files, partitions or order."""
    return _hash_keys(as_id_array(ids), seed) / float(1 << 53)


def _hash_keys(ids: np.ndarray, seed: int) -> np.ndarray:
    """A seeded hash of each id alone, so a document's place never depends on its company."""
    if ids.dtype.kind == "i":
        mixed_seed = _splitmix64(np.asarray([int(seed) & _MASK64], dtype=np.uint64))
        hashed = _splitmix64(ids.view(np.uint64) ^ mixed_seed)
    else:
        salt = str(int(seed)).encode()
        hashed = np.fromiter(
            (
                int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8, key=salt).digest(), "little")
                for i in ids.tolist()
            ),
            dtype=np.uint64,
            count=len(ids),
        )
    return (hashed >> _HASH_SHIFT).astype(np.float64)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a cheap, well-mixed, vectorised 64-bit hash."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
