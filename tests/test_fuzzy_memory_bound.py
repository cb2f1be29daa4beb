"""The in-memory bound of connected components, measured where they run."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from beam_curator.dedup.fuzzy import memory_bound
from beam_curator.dedup.fuzzy.memory_bound import (
    SMALL_GRAPH_EDGES,
    available_memory,
    generous_peak_bytes,
    in_memory_edge_limit,
    memory_plan,
    peak_bytes_per_edge,
)


def edges(count: int, width: int | None = None) -> tuple[pa.Array, pa.Array]:
    """Random edges among ``count`` documents: 64-bit ids, or strings of ``width`` characters."""
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, count, count), rng.integers(0, count, count)
    if width is None:
        return pa.array(x), pa.array(y)
    return tuple(pa.array([str(value).zfill(width) for value in ends]) for ends in (x, y))


def test_the_measure_counts_the_edges_and_what_finding_components_allocates() -> None:
    x, y = edges(200_000)
    per_edge = peak_bytes_per_edge(x, y)
    assert per_edge > 2 * 16, "the edges alone take 16 bytes each; the sort, index and graph more"
    wide = peak_bytes_per_edge(*edges(200_000, width=60))
    assert wide > per_edge + 100, (wide, per_edge)  # two 60-byte strings per edge, and as many vertices


def test_the_measure_leaves_this_process_alone(monkeypatch) -> None:
    """Measured in a process of its own: CPython 3.11 can crash stopping
    tracemalloc while native threads allocate (Beam's gRPC threads in a
    driver did, in this suite), so this process must never start it; and
    none of the measure's buffers stay here."""
    def refused() -> None:
        raise AssertionError("tracemalloc started in the driver's process")

    allocated = pa.total_allocated_bytes()
    with monkeypatch.context() as patch:
        patch.setattr(tracemalloc, "start", refused)
        assert peak_bytes_per_edge(*edges(20_000)) > 16
    assert pa.total_allocated_bytes() <= allocated, "the measure's buffers outlived it"


def test_the_limit_is_the_memory_over_the_measured_peak_per_edge() -> None:
    x, y = edges(50_000)
    limit, per_edge = in_memory_edge_limit(x, y, memory=10_000_000)
    assert limit == int(10_000_000 // per_edge) and in_memory_edge_limit(x, y, memory=0)[0] == 0
    default, per_edge = in_memory_edge_limit(x, y)
    expected = available_memory() * memory_bound.MEMORY_SHARE / per_edge
    assert 0.8 * expected < default < 1.2 * expected


def test_a_small_graph_is_not_measured_and_its_bound_is_above_the_measured_peak(monkeypatch) -> None:
    for width in (None, 60):
        x, y = edges(SMALL_GRAPH_EDGES, width)
        assert generous_peak_bytes(x, y) > 2 * peak_bytes_per_edge(x, y) * len(x), width
    with monkeypatch.context() as patch:
        patch.setattr(memory_bound, "peak_bytes_per_edge", lambda x, y: pytest.fail("a small graph was measured"))
        limit, per_edge = in_memory_edge_limit(x, y, memory=1 << 30)
    assert per_edge == generous_peak_bytes(x, y) / len(x) and limit == int((1 << 30) // per_edge)
    big = edges(SMALL_GRAPH_EDGES + 1)
    measured = []
    monkeypatch.setattr(memory_bound, "peak_bytes_per_edge", lambda x, y: measured.append(len(x)) or 100.0)
    assert in_memory_edge_limit(*big, memory=1 << 30) == ((1 << 30) // 100, 100.0) and measured == [len(big[0])]
    assert in_memory_edge_limit(x, y, memory=1 << 20) == ((1 << 20) // 100, 100.0), "a bound that does not fit"


def test_the_log_line_gives_the_graphs_memory_in_binary_units_and_a_small_graph_reads_small() -> None:
    """A small graph's bound is 64 MiB over a few edges: tens of thousands of "bytes per edge",
    which read as alarming; the line gives totals in MiB/GiB instead."""
    limit, per_edge = in_memory_edge_limit(*edges(1_000), memory=1 << 30)
    small = memory_plan(1_000, limit, per_edge)
    assert re.fullmatch(r"1,000 edges, expected to take at most 6\d\.\d MiB of the (1023\.\d MiB|1\.0 GiB) allowed: "
                        r"components found in memory", small), small
    large = memory_plan(50_000_000, 20_000_000, 180.0)
    assert large == ("50,000,000 edges, expected to take at most 8.4 GiB of the 3.4 GiB allowed: components found "
                     "by star rounds on Beam, as it does not fit in memory")
    assert memory_plan(0, 1 << 30, 0.0) == "no edges: no duplicates to group"


def test_a_cgroup_limit_below_the_machine_bounds_the_memory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(memory_bound, "_CGROUP", tmp_path)
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.current").write_text(f"{1 << 30}\n")
    machine = available_memory()
    (tmp_path / "memory.max").write_text(f"{3 << 28}\n")
    (tmp_path / "memory.current").write_text(f"{1 << 28}\n")
    assert machine > 1 << 29 and available_memory() == 1 << 29
    (tmp_path / "memory.current").write_text(f"{1 << 30}\n")
    assert available_memory() == 0
    monkeypatch.setattr(memory_bound, "_CGROUP", tmp_path / "absent")
    assert abs(available_memory() - machine) < 0.2 * machine


def test_a_negative_memory_is_refused_at_construction(tmp_path: Path) -> None:
    from beam_curator.workflows import FuzzyDeduplicationWorkflow

    with pytest.raises(ValueError, match="in_memory_components_bytes must be 0 or more"):
        FuzzyDeduplicationWorkflow(str(tmp_path), str(tmp_path), str(tmp_path), in_memory_components_bytes=-1)
