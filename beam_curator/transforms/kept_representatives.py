"""``KeptRepresentatives``: each removal of one semantic pass resolved to the
document kept in its stead.

SemDeDup removes a document whose best earlier-ranked match is similar
enough, and that match may itself be removed for its own earlier match: the
removals form trees whose roots are the kept documents. A removed
document's ``duplicate_of`` must name a document in the output, so:

1. the trees are the connected components of the ``(removed, match)``
   links (``StarComponents``, as fuzzy dedup finds its groups);
2. each tree's links, ids only, are followed to its root
   (``dedup.survivors.surviving_representatives``);
3. a removal whose match is the root keeps its own score as the pair's
   similarity; a chained one (its match removed too) meets the root's unit
   vector, which the root's direct matches carry, and takes the cosine.

Vectors travel only with chained removals and one per root, so a tree of
many copies of one text (all matching the root) is gathered as ids alone.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, NamedTuple

import apache_beam as beam
import numpy as np

from beam_curator.dedup.survivors import surviving_representatives
from beam_curator.transforms.star_components import StarComponents

_DIRECT, _CHAINED, _ROOT_UNIT = "direct", "chained", "root_unit"


class Link(NamedTuple):
    """A removed document's best earlier-ranked match, its score, and both unit vectors."""

    match: Any
    score: float
    unit: np.ndarray
    match_unit: np.ndarray


class Removal(NamedTuple):
    """What a removed document carries: the kept document its chain ends at, their
    cosine similarity, and the document it matched, with that pair's score."""

    kept: Any
    similarity: float
    match: Any
    score: float


class KeptRepresentatives(beam.PTransform):
    """``(removed id, Link)`` in; ``(removed id, Removal)`` out, one per removed id."""

    def __init__(self, rounds: int, owner: str) -> None:
        super().__init__()
        self.components = StarComponents(rounds, owner)

    def expand(self, links: beam.PCollection) -> beam.PCollection:
        labels = links | "Edges" >> beam.MapTuple(lambda removed, link: (removed, link.match)) | self.components
        roots = (
            {"label": labels, "link": links}
            | "MeetLabels" >> beam.CoGroupByKey()
            | "ByTree" >> beam.FlatMap(_by_tree)
            | "GroupTrees" >> beam.GroupByKey()
            | "FollowChains" >> beam.FlatMapTuple(_roots)
        )
        split = (
            {"root": roots, "link": links}
            | "MeetRoots" >> beam.CoGroupByKey()
            | "Split" >> beam.FlatMap(_direct_or_chained).with_outputs(_CHAINED, _ROOT_UNIT, main=_DIRECT)
        )
        root_units = split[_ROOT_UNIT] | "OneUnitPerRoot" >> beam.CombinePerKey(_any)
        chained = (
            {"unit": root_units, "chained": split[_CHAINED]}
            | "MeetRootUnits" >> beam.CoGroupByKey()
            | "Similarity" >> beam.FlatMap(_chained_removals)
        )
        return (split[_DIRECT], chained) | "Removals" >> beam.Flatten()


def _by_tree(joined: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[tuple[Any, tuple[Any, Any]]]:
    """A removed document's ``(id, match)``, keyed by its tree's label (a kept root has no link of its own)."""
    document_id, sides = joined
    for link in sides["link"]:
        (label,) = sides["label"]
        yield label, (document_id, link.match)


def _roots(_label: Any, links: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Each removed member of one tree with its root, the one member that was kept."""
    yield from surviving_representatives(links).items()


def _direct_or_chained(joined: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    """A removal whose match is its root, complete; a chained one, keyed by its root to meet the root's vector
    (which each direct removal offers)."""
    document_id, sides = joined
    (root,), (link,) = sides["root"], sides["link"]
    if link.match == root:
        yield document_id, Removal(root, link.score, link.match, link.score)
        yield beam.pvalue.TaggedOutput(_ROOT_UNIT, (root, link.match_unit))
    else:
        yield beam.pvalue.TaggedOutput(_CHAINED, (root, (document_id, link)))


def _any(units: Iterable[np.ndarray]) -> np.ndarray | None:
    """One of a root's unit vectors (they are all its own), or ``None`` for an empty accumulator."""
    return next(iter(units), None)


def _chained_removals(joined: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[tuple[Any, Removal]]:
    root, sides = joined
    for unit in sides["unit"]:
        for document_id, link in sides["chained"]:
            similarity = float(np.clip(link.unit @ unit, -1.0, 1.0))
            yield document_id, Removal(root, similarity, link.match, link.score)
