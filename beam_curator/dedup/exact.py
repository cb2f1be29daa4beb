"""Exact deduplication kernels: the digest of a text, and which copy of a
digest is kept. Plain pyarrow; nothing here knows of Beam, so that the exact
workflow and the ``ExactDedup`` transform share one rule.

NeMo Curator hashes ``text_field`` with md5 (cudf's ``hash_values(method="md5")``,
the hex digest of the UTF-8 bytes) into ``_exact_duplicate_group``; the same
digest is computed here with ``hashlib``. Of the copies of one digest the one
ranking first by the caller's order columns is kept (the smallest id, so that
the answer depends on no runner, bundle or element order); every other copy
is a later copy of it.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc

HASH_COLUMN = "_exact_duplicate_group"  # NeMo Curator's name for the digest


def md5_hex(text: str) -> str:
    """The hex md5 of a text's UTF-8 bytes, as NeMo Curator computes it."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def md5_hex_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``md5_hex`` of each text."""
    return pa.array([md5_hex(text) for text in texts.to_pylist()], pa.string())


def later_copies(table: pa.Table, order_columns: list[str]) -> tuple[pa.Array, pa.Array]:
    """The rows of ``table`` (holding ``HASH_COLUMN`` and ``order_columns``)
    that are later copies, and for each the row of the copy kept in its stead:
    the first of its digest by ``order_columns``. Both as row positions."""
    order = pc.sort_indices(table, [(HASH_COLUMN, "ascending"), *((name, "ascending") for name in order_columns)])
    digests = table.column(HASH_COLUMN).take(order).combine_chunks()
    if len(digests) == 0:
        empty = pa.array([], pa.uint64())
        return empty, empty
    starts = pa.concat_arrays([pa.array([True]), pc.not_equal(digests[1:], digests[:-1])])
    group = pc.subtract(pc.cumulative_sum(pc.cast(starts, pa.int64())), 1)  # each sorted row's digest number
    kept = order.filter(starts).take(group)
    later = pc.invert(starts)
    return order.filter(later), kept.filter(later)
