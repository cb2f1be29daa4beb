"""Unit-length embeddings, so that a dot product is a cosine similarity."""

from __future__ import annotations

from typing import Sequence

import numpy as np

_MAX_IDS_SHOWN = 10


class InvalidEmbeddingError(ValueError):
    """An embedding has no direction (zero length) or holds NaN/inf values."""


def describe_ids(ids: Sequence, positions: np.ndarray) -> str:
    """The first few ids at ``positions`` and how many there are, for error messages."""
    picked = (ids[int(p)] for p in positions[:_MAX_IDS_SHOWN])
    shown = [x.item() if isinstance(x, np.generic) else x for x in picked]
    more = f" and {len(positions) - len(shown)} more" if len(positions) > len(shown) else ""
    return f"{shown}{more}"


def l2_normalize(embeddings: np.ndarray, ids: Sequence, in_place: bool = False) -> np.ndarray:
    """Rows of ``embeddings`` scaled to unit length, as float32; with
    ``in_place``, a writable float32 array is scaled where it is (no second
    copy of a large matrix).

    A zero or non-finite vector has no cosine similarity to anything, and letting
    it through would silently make a document never (or always) a duplicate, so it
    is an error naming the documents.
    """
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2:
        raise InvalidEmbeddingError(
            f"embeddings must be a 2-D array (documents x dimensions), got shape {matrix.shape}"
        )
    if len(ids) != matrix.shape[0]:
        raise InvalidEmbeddingError(
            f"got {len(ids)} ids for {matrix.shape[0]} embeddings; pass one id per row"
        )
    if matrix.dtype == np.float32:
        # The common case in a few microseconds: float32 squared norms are exact
        # to an ulp unless a row is extreme; any row that is not plainly normal
        # goes to the careful float64 path below, which also names the bad ones.
        squared = np.einsum("ij,ij->i", matrix, matrix)
        if np.isfinite(squared).all() and (squared > np.finfo(np.float32).tiny).all():
            norms = np.sqrt(squared)[:, None]
            if in_place and matrix.flags.writeable:
                return np.divide(matrix, norms, out=matrix)
            return matrix / norms
    wide = matrix.astype(np.float64, copy=False)
    finite = np.isfinite(wide).all(axis=1)
    norms = np.linalg.norm(np.where(finite[:, None], wide, 0.0), axis=1)
    bad = np.flatnonzero(~finite | (norms == 0.0))
    if bad.size:
        raise InvalidEmbeddingError(
            f"documents {describe_ids(ids, bad)} have zero-length or NaN/inf embeddings, "
            "which have no cosine similarity; drop them (often empty texts) or re-embed "
            "them before semantic deduplication"
        )
    return (wide / norms[:, None]).astype(np.float32)
