"""Star steps read in batches against the in-memory steps, and star rounds
driven stage by stage on a graph with a hub, within their memory bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_curator.dedup.fuzzy import components as cc
from beam_curator.dedup.fuzzy.closest import ROWS_PER_BLOCK, closest_members
from beam_curator.dedup.fuzzy.lsh import component_groups
from beam_curator.stages.io.parquet import parquet_files, read_parquet
from beam_curator.workflows.fuzzy import stages
from beam_curator.workflows.semantic.id_check import IdBucketTask


# The steps as the paper states them, on all of a graph's distinct rows at once: the reference.

def least_per_key(table: pa.Table) -> pa.Table:
    least = table.group_by(cc.KEY).aggregate([(cc.NEIGHBOR, "min")]).rename_columns([cc.KEY, "least"])
    return least.set_column(1, "least", pc.min_element_wise(least[cc.KEY], least["least"]))


def large_star(table: pa.Table) -> pa.Table:
    least = least_per_key(table)
    bigger = table.filter(pc.greater(table[cc.NEIGHBOR], table[cc.KEY])).join(least, cc.KEY)
    return cc.both_ways(bigger[cc.NEIGHBOR].combine_chunks(), bigger["least"].combine_chunks())


def small_star(table: pa.Table) -> pa.Table:
    smaller = table.filter(pc.less(table[cc.NEIGHBOR], table[cc.KEY]))
    least = least_per_key(smaller)
    joined = smaller.join(least, cc.KEY)
    keys = least[cc.KEY].combine_chunks()
    return cc.both_ways(pa.concat_arrays([joined[cc.NEIGHBOR].combine_chunks(), keys]),
                        pa.concat_arrays([joined["least"].combine_chunks(), least["least"].combine_chunks()]))


def settled(table: pa.Table) -> bool:
    stats = table.group_by(cc.KEY).aggregate([(cc.NEIGHBOR, "min"), (cc.NEIGHBOR, "count")])
    centre_or_leaf = pc.or_(pc.greater(stats[f"{cc.NEIGHBOR}_min"], stats[cc.KEY]),
                            pc.equal(stats[f"{cc.NEIGHBOR}_count"], 1))
    return pc.all(centre_or_leaf).as_py() is not False


def rows_set(table: pa.Table) -> set[tuple[int, int]]:
    return set(zip(table[cc.KEY].to_pylist(), table[cc.NEIGHBOR].to_pylist()))


def as_dict(table: pa.Table) -> dict:
    return dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))


def in_batches(table: pa.Table, draw, repeats: bool) -> list[pa.Table]:
    """The rows shuffled into random batches, some rows repeated in other batches when ``repeats``."""
    order = draw(st.permutations(range(table.num_rows)))
    if repeats and table.num_rows:
        order = [*order, *draw(st.lists(st.sampled_from(range(table.num_rows)), max_size=table.num_rows))]
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=6)))
    bounds = [0, *cuts, len(order)]
    taken = table.take(pa.array(order, pa.int64()))
    return [taken.slice(low, high - low) for low, high in zip(bounds, bounds[1:])]


edge_lists = st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(edges=edge_lists, data=st.data(), repeats=st.booleans())
def test_steps_in_batches_give_the_in_memory_steps(edges, data, repeats) -> None:
    """Any graph (after any number of in-memory rounds), any split into batches,
    with rows repeated across batches or not: the same settledness, the same
    distinct output rows of both steps, the same labels."""
    x = pa.array([a for a, _ in edges], pa.int64())
    y = pa.array([b for _, b in edges], pa.int64())
    table = cc.distinct(cc.both_ways(x, y))
    for _ in range(data.draw(st.integers(0, 3))):  # later rounds' shapes, nearer to stars
        table = cc.distinct(small_star(cc.distinct(large_star(table))))
    batches = in_batches(table, data.draw, repeats)
    bounds = None
    for batch in batches:
        bounds = cc.merged_bounds(bounds, batch)
    if bounds is None:
        bounds = cc.key_bounds(table)
    assert bounds.num_rows == len(set(table[cc.KEY].to_pylist()))
    assert cc.settled_bounds(bounds) == settled(table)
    large = [cc.large_star_rows(batch, bounds) for batch in batches]
    assert rows_set(pa.concat_tables([large_star(table), *large])) == rows_set(large_star(table))
    assert set().union(*map(rows_set, large)) == rows_set(large_star(table))
    small = [*(cc.small_star_rows(batch, bounds) for batch in batches), cc.small_star_keys(bounds)]
    assert set().union(*map(rows_set, small)) == rows_set(small_star(table))
    assert as_dict(cc.labels_from_bounds(bounds)) == as_dict(least_per_key(table))


@settings(max_examples=60, deadline=None)
@given(edges=edge_lists.filter(bool), data=st.data())
def test_rounds_in_batches_find_the_components(edges, data) -> None:
    """Whole runs of alternating steps, every round's rows in random batches
    with repeats: the least id of every component, as scipy finds it."""
    x = pa.array([a for a, _ in edges], pa.int64())
    y = pa.array([b for _, b in edges], pa.int64())
    table, large = cc.distinct(cc.both_ways(x, y)), True
    for _ in range(60):
        batches = in_batches(table, data.draw, True)
        bounds = cc.key_bounds(table.slice(0, 0))
        for batch in batches:
            bounds = cc.merged_bounds(bounds, batch)
        if cc.settled_bounds(bounds):
            break
        pieces = [(cc.large_star_rows if large else cc.small_star_rows)(batch, bounds) for batch in batches]
        table = pa.concat_tables([*pieces, *([] if large else [cc.small_star_keys(bounds)])])
        large = not large
    else:
        raise AssertionError("did not settle")
    vertices, groups = component_groups(x, y)
    expected = {v: g for v, g in zip(vertices.to_pylist(), groups.to_pylist())}
    on_edges = {v for a, b in edges if a != b for v in (a, b)}  # self-loops dropped
    assert as_dict(cc.labels_from_bounds(bounds)) == {v: g for v, g in expected.items() if v in on_edges}


def star_rounds_by_hand(folder: Path, x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[dict, list[int], str]:
    """The stages of ``FuzzyDeduplicationWorkflow._star_rounds`` called one
    task at a time, without Beam: labels by id, each round's largest table, the settled round."""
    folder.mkdir()
    pq.write_table(pa.table({"id_x": x, "id_y": y}), folder / "edges.parquet")
    scatter = stages.ScatterEdgesStage([str(folder / "edges.parquet")], buckets)
    stages.RoundWriter(str(folder / "round_0"), "part.{bucket}").process(scatter.process(IdBucketTask(data=0)))
    previous, largest = str(folder / "round_0"), []
    for number in range(1, 80):
        step = stages.StarRoundStage(previous, number % 2 == 1, buckets, str(folder / f"round_{number}"))
        peak = 0
        for bucket in range(buckets):
            step.process(IdBucketTask(data=bucket))
            peak = max(peak, step.largest_table)
        largest.append(peak)
        previous = str(folder / f"round_{number}")
        if all(all(read_parquet(url, [stages.SETTLED])[stages.SETTLED].to_pylist()) for url in parquet_files(previous)):
            break
    labels = stages.StarLabelsStage(previous, "id")
    found = {}
    for bucket in range(buckets):
        table = labels.process(IdBucketTask(data=bucket)).to_pyarrow()
        found.update(zip(table["id"].to_pylist(), table[stages.GROUP_FIELD].to_pylist()))
    return found, largest, previous


def test_a_hub_is_read_through_in_batches(tmp_path: Path, monkeypatch) -> None:
    """A component of 2,001 ids (a hub joined to all others, which also form
    a chain) and a small one, in 16 buckets: the same groups as in memory;
    once settled, the least id has a row per other member (2,000, all in one
    bucket), yet no table a round's task builds ever holds more than twice
    (a batch + the most keys of a bucket)."""
    monkeypatch.setattr(stages, "ROWS_PER_BATCH", 25)
    rng = np.random.default_rng(3)
    members = rng.permutation(np.arange(10, 2011))
    hub, others = members[0], members[1:]
    x = np.concatenate([np.full(len(others), hub), others[:-1], [7, 8]]).astype(np.int64)
    y = np.concatenate([others, others[1:], [8, 9]]).astype(np.int64)
    buckets = 16
    found, largest, last = star_rounds_by_hand(tmp_path / "rounds", x, y, buckets)
    vertices, groups = component_groups(pa.array(x), pa.array(y))
    assert found == dict(zip(vertices.to_pylist(), groups.to_pylist()))
    assert set(found.values()) == {7, int(members.min())}
    keys_per_bucket = np.bincount(stages.bucket_of(np.array(vertices.to_pylist()), buckets), minlength=buckets).max()
    rows = pa.concat_tables([read_parquet(url, [cc.KEY]) for url in parquet_files(last)])[cc.KEY].to_numpy()
    print(f"largest table per round: {largest}; keys per bucket at most {keys_per_bucket}; "
          f"rows of the least id in the settled round: {(rows == members.min()).sum()}")
    assert (rows == members.min()).sum() == 2000 and len(largest) > 2
    assert max(largest) <= 2 * (stages.ROWS_PER_BATCH + keys_per_bucket) < 2000 // 4


@given(st.integers(2, 2 * ROWS_PER_BLOCK + 3), st.integers(1, 8), st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_each_member_is_matched_to_the_other_whose_signature_agrees_most(members: int, hashes: int,
                                                                        seed: int) -> None:
    """Blocks of rows give what comparing every pair at once gives, ties to the earlier member, never itself."""
    signatures = np.random.default_rng(seed).integers(0, 3, (members, hashes), dtype=np.uint32)
    closest, shares = closest_members(signatures)
    agreement = (signatures[:, None, :] == signatures[None, :, :]).mean(axis=2)
    np.fill_diagonal(agreement, -1.0)
    assert closest.tolist() == agreement.argmax(axis=1).tolist()
    assert np.array_equal(shares, agreement.max(axis=1))
