"""Removals of chained dedup passes resolved to documents that survive them all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beam_curator.dedup.survivors import surviving_representatives


@st.composite
def chained_passes(draw: st.DrawFn) -> tuple[list[int], list[list[tuple[int, int]]]]:
    """Documents ``0..n-1`` and passes run one on another's output: each pass
    removes some of what is left, each as a duplicate of a document of its
    input (kept by that pass, or, as semantic's best earlier-ranked match, a
    lower id it removed too)."""
    left = list(range(draw(st.integers(1, 40))))
    passes = []
    for _ in range(draw(st.integers(1, 4))):
        removed = sorted(draw(st.sets(st.sampled_from(left), max_size=len(left) - 1)))
        kept = [document for document in left if document not in removed]
        pairs = []
        for document in removed:
            earlier = kept + [other for other in removed if other < document]
            pairs.append((document, draw(st.sampled_from(earlier))))
        passes.append(pairs)
        left = kept
    return left, passes


@given(chained_passes())
def test_every_removal_resolves_to_a_document_no_pass_removed(chained: tuple[list[int], list]) -> None:
    survivors, passes = chained
    removals = [pair for pairs in passes for pair in pairs]
    resolved = surviving_representatives(removals)
    assert set(resolved) == {removed for removed, _ in removals}
    assert set(resolved.values()) <= set(survivors)
    target_of = dict(removals)
    for removed, survivor in resolved.items():  # reached by following duplicate_of
        while removed in target_of:
            removed = target_of[removed]
        assert removed == survivor


@given(st.lists(st.integers(0, 9), min_size=1, max_size=10, unique=True))
def test_a_cycle_is_refused_naming_its_ids(cycle: list[int]) -> None:
    removals = list(zip(cycle, cycle[1:] + cycle[:1])) + [(100, cycle[0])]
    with pytest.raises(ValueError, match=r"cycle .*no document of it survives") as error:
        surviving_representatives(removals)
    assert all(repr(document) in str(error.value) for document in cycle)


def test_an_id_removed_twice_as_duplicates_of_two_documents_is_refused() -> None:
    with pytest.raises(ValueError, match=r"id 'c' is removed twice, as a duplicate of 'a' and of 'b'"):
        surviving_representatives([("c", "a"), ("b", "a"), ("c", "b")])
    assert surviving_representatives([("c", "a"), ("c", "a")]) == {"c": "a"}
