"""``StarComponents``: connected components of a PCollection of edges, by
rounds of large-star and small-star steps grouped by key
(``beam_curator.dedup.fuzzy.components`` holds the steps and says why they
converge), each id labelled with the least id of its component.

Beam has no loops, so the rounds are laid out when the pipeline is built:
``rounds`` of them, then a check that the graph settled into stars (a round
on a settled graph gives the same graph back, so extra rounds change nothing
but time). A graph that has not settled fails with an error that says to
raise ``rounds``.

The steps are the workflow's, on tables of rows. Most keys of a dedup graph
have a neighbour or two, and a table operation costs about a millisecond
however few its rows, so a worker gathers the groups of many keys into one
table of up to ``NEIGHBORS_PER_BATCH`` rows before it steps them. A key with
more rows than that (a giant component's centre) is stepped on its own,
reading its rows twice a batch at a time (bounds first, then the rows), so a
worker never holds it with all its neighbours.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Iterable, Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms.window import GlobalWindows

from beam_curator.dedup.fuzzy.components import (
    KEY,
    NEIGHBOR,
    distinct,
    labels_from_bounds,
    large_star_rows,
    merged_bounds,
    small_star_keys,
    small_star_rows,
    unsettled_bounds,
)

NEIGHBORS_PER_BATCH = 1 << 16

Batches = Callable[[], Iterator[pa.Table]]  # the same rows, as tables, each time it is called


def _batches(key: Any, neighbors: Iterable[Any]) -> Iterator[pa.Table]:
    """One key's rows as tables of at most ``NEIGHBORS_PER_BATCH`` rows."""
    found = iter(neighbors)
    while batch := list(itertools.islice(found, NEIGHBORS_PER_BATCH)):
        yield pa.table({KEY: [key] * len(batch), NEIGHBOR: batch})


def _bounds(batches: Batches) -> pa.Table:
    bounds = None
    for rows in batches():
        bounds = merged_bounds(bounds, rows)
    return bounds


def _star_step(batches: Batches, large: bool) -> Iterator[pa.Table]:
    bounds = _bounds(batches)
    step = large_star_rows if large else small_star_rows
    yield from (distinct(step(rows, bounds)) for rows in batches())
    if not large:
        yield distinct(small_star_keys(bounds))


class _StepsOnTables(beam.DoFn):
    """``step`` (rows of whole keys as batches -> tables of ``(key, neighbor)``
    rows) on the grouped rows of many keys at once; its rows out as pairs."""

    def __init__(self, step: Callable[[Batches], Iterator[pa.Table]]) -> None:
        self.step = step

    def start_bundle(self) -> None:
        self.keys: list[Any] = []
        self.neighbors: list[Any] = []

    def process(self, group: tuple[Any, Iterable[Any]]) -> Iterator[tuple[Any, Any]]:
        key, neighbors = group
        first = list(itertools.islice(iter(neighbors), NEIGHBORS_PER_BATCH + 1))
        if len(first) > NEIGHBORS_PER_BATCH:
            yield from self._pairs(lambda: _batches(key, neighbors))
            return
        self.keys.extend([key] * len(first))
        self.neighbors.extend(first)
        if len(self.keys) >= NEIGHBORS_PER_BATCH:
            yield from self._gathered()

    def finish_bundle(self) -> Iterator[Any]:
        for pair in self._gathered():
            yield GlobalWindows.windowed_value(pair)

    def _gathered(self) -> Iterator[tuple[Any, Any]]:
        if self.keys:
            rows = pa.table({KEY: self.keys, NEIGHBOR: self.neighbors})
            self.keys, self.neighbors = [], []
            yield from self._pairs(lambda: iter([rows]))

    def _pairs(self, batches: Batches) -> Iterator[tuple[Any, Any]]:
        for table in self.step(batches):
            yield from zip(table.column(0).to_pylist(), table.column(1).to_pylist())


class StarComponents(beam.PTransform):
    """``(x, y)`` edges in; ``(id, least id of its component)`` out, for every id on an edge."""

    def __init__(self, rounds: int, owner: str) -> None:
        super().__init__()
        if not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"{owner}: star_rounds must be a positive integer, not {rounds!r}")
        self.rounds = rounds
        self.owner = owner

    def expand(self, edges: beam.PCollection) -> beam.PCollection:
        rows = (edges
                | "OneWindow" >> beam.WindowInto(GlobalWindows())  # outputs of a bundle's end are in it
                | "BothWays" >> beam.FlatMap(lambda edge: [edge, edge[::-1]] if edge[0] != edge[1] else []))
        for number in range(self.rounds):
            for large in (True, False):
                name = f"Round{number}{'Large' if large else 'Small'}"
                rows = (rows
                        | f"{name}Group" >> beam.GroupByKey()
                        | f"{name}Star" >> beam.ParDo(_StepsOnTables(functools.partial(_star_step, large=large))))
        return rows | "SettledGroup" >> beam.GroupByKey() | "Labels" >> beam.ParDo(_StepsOnTables(self._labels))

    def _labels(self, batches: Batches) -> Iterator[pa.Table]:
        bounds = _bounds(batches)
        unsettled = unsettled_bounds(bounds)
        if unsettled.num_rows:
            raise RuntimeError(f"{self.owner}: connected components did not settle in star_rounds={self.rounds} "
                               f"rounds (id {unsettled[KEY][0].as_py()!r} is neither a centre nor a leaf); "
                               "raise star_rounds")
        yield labels_from_bounds(bounds)
