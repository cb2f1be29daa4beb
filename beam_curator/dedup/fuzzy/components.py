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
each component is then a star around its least id (:func:`settled`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

KEY, NEIGHBOR = "key", "neighbor"


def both_ways(x: pa.Array, y: pa.Array) -> pa.Table:
    """Undirected edges as directed rows, self-loops dropped."""
    table = pa.table({KEY: pa.concat_arrays([x, y]), NEIGHBOR: pa.concat_arrays([y, x])})
    return table.filter(pc.not_equal(table[KEY], table[NEIGHBOR]))


def _least_per_key(table: pa.Table) -> pa.Table:
    """``(key, least)``: each key's least neighbour, or the key itself when smaller."""
    least = table.group_by(KEY).aggregate([(NEIGHBOR, "min")]).rename_columns([KEY, "least"])
    return least.set_column(1, "least", pc.min_element_wise(least[KEY], least["least"]))


def large_star(table: pa.Table) -> pa.Table:
    least = _least_per_key(table)
    bigger = table.filter(pc.greater(table[NEIGHBOR], table[KEY])).join(least, KEY)
    return both_ways(bigger[NEIGHBOR].combine_chunks(), bigger["least"].combine_chunks())


def small_star(table: pa.Table) -> pa.Table:
    smaller = table.filter(pc.less(table[NEIGHBOR], table[KEY]))
    least = _least_per_key(smaller)
    joined = smaller.join(least, KEY)
    keys = least[KEY].combine_chunks()
    return both_ways(pa.concat_arrays([joined[NEIGHBOR].combine_chunks(), keys]),
                     pa.concat_arrays([joined["least"].combine_chunks(), least["least"].combine_chunks()]))


def distinct(table: pa.Table) -> pa.Table:
    return table.group_by([KEY, NEIGHBOR]).aggregate([])


def settled(table: pa.Table) -> bool:
    """Every key a centre or a leaf: the components are stars around their least ids."""
    stats = table.group_by(KEY).aggregate([(NEIGHBOR, "min"), (NEIGHBOR, "count")])
    leaf_or_centre = pc.or_(pc.greater(stats[f"{NEIGHBOR}_min"], stats[KEY]), pc.equal(stats[f"{NEIGHBOR}_count"], 1))
    return pc.all(leaf_or_centre).as_py() is not False


def star_labels(table: pa.Table) -> pa.Table:
    """``(key, least)`` of a settled graph: each id and its component's least id."""
    return _least_per_key(table)
