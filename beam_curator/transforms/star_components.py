"""``StarComponents``: connected components of a PCollection of edges, by
rounds of large-star and small-star steps grouped by key
(``beam_curator.dedup.fuzzy.components`` holds the steps and says why they
converge), each id labelled with the least id of its component.

Beam has no loops, so the rounds are laid out when the pipeline is built:
``rounds`` of them, then a check that the graph settled into stars (a round
on a settled graph gives the same graph back, so extra rounds change nothing
but time). A graph that has not settled fails with an error that says to
raise ``rounds``. A step reads one key's neighbours twice, a batch at a time
(bounds first, then the rows), so a worker never holds a giant component's
centre with all its neighbours.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator

import apache_beam as beam
import pyarrow as pa

from beam_curator.dedup.fuzzy.components import (
    KEY,
    NEIGHBOR,
    distinct,
    labels_from_bounds,
    large_star_rows,
    merged_bounds,
    settled_bounds,
    small_star_keys,
    small_star_rows,
)

NEIGHBORS_PER_BATCH = 1 << 16


def _batches(key: Any, neighbors: Iterable[Any]) -> Iterator[pa.Table]:
    """One key's rows as tables of at most ``NEIGHBORS_PER_BATCH`` rows."""
    found = iter(neighbors)
    while batch := list(itertools.islice(found, NEIGHBORS_PER_BATCH)):
        yield pa.table({KEY: [key] * len(batch), NEIGHBOR: batch})


def _bounds(key: Any, neighbors: Iterable[Any]) -> pa.Table:
    bounds = None
    for rows in _batches(key, neighbors):
        bounds = merged_bounds(bounds, rows)
    return bounds


def _pairs(table: pa.Table) -> Iterator[tuple[Any, Any]]:
    return zip(table.column(KEY).to_pylist(), table.column(NEIGHBOR).to_pylist())


def _star_step(group: tuple[Any, Iterable[Any]], large: bool) -> Iterator[tuple[Any, Any]]:
    key, neighbors = group
    bounds = _bounds(key, neighbors)
    step = large_star_rows if large else small_star_rows
    pieces = (step(rows, bounds) for rows in _batches(key, neighbors))
    for piece in itertools.chain(pieces, [] if large else [small_star_keys(bounds)]):
        yield from _pairs(distinct(piece))


class StarComponents(beam.PTransform):
    """``(x, y)`` edges in; ``(id, least id of its component)`` out, for every id on an edge."""

    def __init__(self, rounds: int, owner: str) -> None:
        super().__init__()
        if not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"{owner}: star_rounds must be a positive integer, not {rounds!r}")
        self.rounds = rounds
        self.owner = owner

    def expand(self, edges: beam.PCollection) -> beam.PCollection:
        rows = edges | "BothWays" >> beam.FlatMap(lambda edge: [edge, edge[::-1]] if edge[0] != edge[1] else [])
        for number in range(self.rounds):
            for large in (True, False):
                name = f"Round{number}{'Large' if large else 'Small'}"
                rows = (rows
                        | f"{name}Group" >> beam.GroupByKey()
                        | f"{name}Star" >> beam.FlatMap(_star_step, large))
        return rows | "SettledGroup" >> beam.GroupByKey() | "Labels" >> beam.FlatMap(self._labels)

    def _labels(self, group: tuple[Any, Iterable[Any]]) -> Iterator[tuple[Any, Any]]:
        bounds = _bounds(*group)
        if not settled_bounds(bounds):
            raise RuntimeError(f"{self.owner}: connected components did not settle in star_rounds={self.rounds} "
                               f"rounds (id {group[0]!r} is neither a centre nor a leaf); raise star_rounds")
        yield from _pairs(labels_from_bounds(bounds).rename_columns([KEY, NEIGHBOR]))
