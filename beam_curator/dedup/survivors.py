"""Which surviving document each removed one stands for, across chained dedup passes.

Each removal names the document kept in its stead (``duplicate_of``), but
within a semantic pass that document may itself be removed (it names its
best earlier-ranked match), and a later pass may remove it (exact, then
fuzzy, then semantic, or a workflow run on a previous pass's output). Given
the ``(removed id, duplicate_of)`` records of all the passes, following each
chain until an id no pass removed gives a document that is in the final
output. Ids must be one id space across the passes (the same ``id_field``).
"""

from __future__ import annotations

from typing import Hashable, Iterable


def surviving_representatives(removals: Iterable[tuple[Hashable, Hashable]]) -> dict[Hashable, Hashable]:
    """Each removed id mapped to the document it resolves to: its
    ``duplicate_of``, or that one's, and so on, until an id that was not
    removed. ``removals`` holds ``(removed id, duplicate_of)`` pairs of any
    number of passes, in any order. An id removed twice with different
    targets, or a chain that returns to an id it passed (which no pass of
    this package makes: each names a document it kept or ranked earlier),
    is a ``ValueError`` naming the ids."""
    target_of: dict[Hashable, Hashable] = {}
    for removed, duplicate_of in removals:
        if target_of.setdefault(removed, duplicate_of) != duplicate_of:
            raise ValueError(f"id {removed!r} is removed twice, as a duplicate of {target_of[removed]!r} and of "
                             f"{duplicate_of!r}: give each pass the previous pass's kept documents, not its input")
    survivor_of: dict[Hashable, Hashable] = {}
    for start in target_of:
        path, on_path = [], set()
        current = start
        while current in target_of and current not in survivor_of:
            if current in on_path:
                cycle = path[path.index(current):] + [current]
                raise ValueError(f"the removals form a cycle {' -> '.join(map(repr, cycle))}: no document of it "
                                 "survives; these records do not come from passes run one on another's output")
            path.append(current)
            on_path.add(current)
            current = target_of[current]
        survivor = survivor_of.get(current, current)
        for removed in path:
            survivor_of[removed] = survivor
    return survivor_of
