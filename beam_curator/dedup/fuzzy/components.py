"""Connected components by alternating large-star and small-star steps
(Kiveris et al., "Connected Components in MapReduce and Beyond", 2014).

The graph is a table of directed rows ``(key, neighbor)`` holding each
undirected edge both ways. A step looks at one key's neighbours only, so it
runs on any partition of the rows by key, and emits edges that keep every
component connected while pulling it towards a star around its least id:

- large star: every neighbour greater than the key is joined to the least of
  the key and its neighbours;
- small star: the key and its smaller neighbours are joined to the least of them.

Alternating them reaches, in O(log^2 n) rounds, a graph where every key is
either a centre (all neighbours greater) or a leaf (one neighbour, smaller):
each component is then a star around its least id (:func:`settled_bounds`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

KEY, NEIGHBOR = "key", "neighbor"


def both_ways(x: pa.Array, y: pa.Array) -> pa.Table:
    """Undirected edges as directed rows, self-loops dropped."""
    table = pa.table({KEY: pa.concat_arrays([x, y]), NEIGHBOR: pa.concat_arrays([y, x])})
    return table.filter(pc.not_equal(table[KEY], table[NEIGHBOR]))


def distinct(table: pa.Table) -> pa.Table:
    return table.group_by([KEY, NEIGHBOR]).aggregate([])


# The steps read their rows in batches.
#
# A step's output is a function of each key's least and greatest neighbour
# (its "bounds") and of the rows one by one, so a task makes two passes over
# its rows: the first folds each batch into the bounds (one row per distinct
# key, however many rows a key has), the second maps each batch to its output
# rows with the bounds at hand. Nothing holds more than the bounds and one
# batch, even when one key (a giant component's centre) has millions of rows.
#
# Duplicate rows are harmless, so no pass needs the rows distinct across
# batches (which bounded memory cannot give for a key spread over many):
# min and max ignore repeats, and every output row is made from one input row
# and its key's bounds (or from the bounds alone), so a repeated input row
# only repeats output rows. The set of distinct output rows is the set the
# in-memory steps give on the distinct input. Nor do repeats pile up: the rows
# of a round hold every pair both ways as often one way as the other
# (``both_ways`` emits both), so a large star's two rows per row with a
# greater neighbour are at most its input's rows, and a small star's two per
# row with a smaller neighbour, plus two per key with one, at most its input's
# rows plus twice its keys. Each batch's output is made distinct on its own.

LOW, HIGH = "low", "high"


def key_bounds(rows: pa.Table) -> pa.Table:
    """``(key, low, high)``: each key's least and greatest neighbour among ``rows``."""
    found = rows.group_by(KEY).aggregate([(NEIGHBOR, "min"), (NEIGHBOR, "max")])
    return found.select([KEY, f"{NEIGHBOR}_min", f"{NEIGHBOR}_max"]).rename_columns([KEY, LOW, HIGH])


def merged_bounds(bounds: pa.Table | None, rows: pa.Table) -> pa.Table:
    """``bounds`` (of earlier rows, or None) with ``rows`` folded in: still one row per key."""
    found = key_bounds(rows)
    if bounds is None:
        return found
    both = pa.concat_tables([bounds, found]).group_by(KEY).aggregate([(LOW, "min"), (HIGH, "max")])
    return both.select([KEY, f"{LOW}_min", f"{HIGH}_max"]).rename_columns([KEY, LOW, HIGH])


def unsettled_bounds(bounds: pa.Table) -> pa.Table:
    """The bounds of keys that are neither a centre (least neighbour greater)
    nor a leaf (least and greatest neighbour the same: one neighbour)."""
    centre_or_leaf = pc.or_(pc.greater(bounds[LOW], bounds[KEY]), pc.equal(bounds[LOW], bounds[HIGH]))
    return bounds.filter(pc.invert(centre_or_leaf))


def settled_bounds(bounds: pa.Table) -> bool:
    """Every key a centre or a leaf: the components are stars around their least ids."""
    return unsettled_bounds(bounds).num_rows == 0


def labels_from_bounds(bounds: pa.Table) -> pa.Table:
    """``(key, least)`` of a settled graph: each id and its component's least id."""
    least = pc.min_element_wise(bounds[KEY], bounds[LOW])
    return pa.table({KEY: bounds[KEY], "least": least})


def large_star_rows(rows: pa.Table, bounds: pa.Table) -> pa.Table:
    """The large star of ``rows`` (their keys' bounds in ``bounds``): every
    neighbour greater than its key joined to the least of the key and its neighbours."""
    bigger = rows.filter(pc.greater(rows[NEIGHBOR], rows[KEY])).join(bounds.select([KEY, LOW]), KEY)
    least = pc.min_element_wise(bigger[KEY], bigger[LOW])
    return both_ways(bigger[NEIGHBOR].combine_chunks(), least.combine_chunks())


def small_star_rows(rows: pa.Table, bounds: pa.Table) -> pa.Table:
    """The small star's rows made from ``rows``: each neighbour smaller than its key joined to the key's least."""
    smaller = rows.filter(pc.less(rows[NEIGHBOR], rows[KEY])).join(bounds.select([KEY, LOW]), KEY)
    return both_ways(smaller[NEIGHBOR].combine_chunks(), smaller[LOW].combine_chunks())


def small_star_keys(bounds: pa.Table) -> pa.Table:
    """The small star's rows made from the bounds alone: each key with a smaller neighbour joined to its least."""
    keyed = bounds.filter(pc.less(bounds[LOW], bounds[KEY]))
    return both_ways(keyed[KEY].combine_chunks(), keyed[LOW].combine_chunks())
