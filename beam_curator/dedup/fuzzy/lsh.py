"""LSH bands, buckets, edges and connected components of MinHash signatures.

Band ``i`` is the slice ``[i * r, (i + 1) * r)`` of a signature; two
documents share a bucket when one of their bands is equal, so a pair of
Jaccard similarity ``s`` meets with probability ``1 - (1 - s^r)^b``
(:func:`detection_probability`). A bucket's key is the band's number and its
raw values (exact: no second hash that could join unequal bands; NeMo
Curator keys buckets by ``"b<i>_"`` and the md5 of the band). A bucket of
``k`` documents becomes the ``k - 1`` edges between its ids in sorted order,
as NeMo Curator's ``BucketsToEdgesStage`` pairs them: a path, which joins
the same documents as all ``k (k - 1) / 2`` pairs would.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def detection_probability(similarity: np.ndarray | float, minhashes_per_band: int, num_bands: int) -> np.ndarray:
    """The chance that LSH puts a pair of this Jaccard similarity in one bucket."""
    return 1.0 - (1.0 - np.asarray(similarity, float) ** minhashes_per_band) ** num_bands


def band_keys(signatures: np.ndarray, bands: range, minhashes_per_band: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document and band of ``bands`` (band-major): the key, as a row of
    ``(band, values...)`` viewed as one opaque value, and the band's first
    value (uniform, for spreading buckets over partitions)."""
    rows = len(signatures)
    keys = np.empty((len(bands), rows, minhashes_per_band + 1), signatures.dtype)
    for slot, band in enumerate(bands):
        keys[slot, :, 0] = band
        keys[slot, :, 1:] = signatures[:, band * minhashes_per_band:(band + 1) * minhashes_per_band]
    keys = keys.reshape(len(bands) * rows, minhashes_per_band + 1)
    return np.ascontiguousarray(keys).view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel(), keys[:, 1]


def buckets(keys: np.ndarray, ids: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Buckets of two or more documents: ``(key per bucket, ids sorted by
    bucket then id, offsets of each bucket's ids)``, buckets in key order.

    One argsort of the keys and one sorted copy (about 65 bytes per record
    beside the keys and ids given, where ``np.unique`` with its inverse and
    counts took twice that); only the records of shared buckets go further."""
    order = np.argsort(keys)
    ordered = keys[order]
    opens = np.empty(len(ordered), bool)  # a record that opens a run of equal keys
    opens[:1] = True
    opens[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(opens)
    del opens
    sizes = np.diff(np.r_[starts, len(ordered)])
    shared = sizes > 1
    found = ordered[starts[shared]]
    del ordered
    members = order[np.repeat(shared, sizes)]
    del order
    bucket = np.repeat(np.arange(len(found)), sizes[shared])
    table = pa.table({"bucket": bucket, "id": ids.take(pa.array(members))})
    table = table.sort_by([("bucket", "ascending"), ("id", "ascending")])
    bucket = table.column("bucket").to_numpy()
    begins = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(bucket) else np.zeros(0, np.int64)
    return found, table.column("id").combine_chunks(), np.r_[begins, len(bucket)]


def path_edges(ids: pa.Array, offsets: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Each bucket's consecutive ids as edges ``(x, y)``."""
    follows = np.ones(len(ids), bool)
    follows[offsets[:-1]] = False  # a bucket's first id follows no one
    second = np.flatnonzero(follows)
    return ids.take(pa.array(second - 1)), ids.take(pa.array(second))


def component_groups(x: pa.Array, y: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Every id on an edge and its group: the least id of its connected
    component (in memory, by Arrow's hashing and scipy's sparse graph: about
    115 bytes per edge and per id beyond the edges given)."""
    vertices = pc.unique(pa.chunked_array([x, y]).combine_chunks())
    vertices = vertices.take(pc.sort_indices(vertices))
    source = pc.index_in(x, vertices).to_numpy()
    target = pc.index_in(y, vertices).to_numpy()
    graph = coo_matrix((np.ones(len(source), np.int8), (source, target)), shape=(len(vertices), len(vertices)))
    _, labels = connected_components(graph, directed=False)
    _, least = np.unique(labels, return_index=True)  # vertices are sorted: a label's first is its least id
    return vertices, vertices.take(pa.array(least[labels]))
