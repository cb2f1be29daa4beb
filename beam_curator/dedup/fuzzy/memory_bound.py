"""How many edges connected components may hold in memory, measured where they run.

The memory the in-memory path (:func:`~beam_curator.dedup.fuzzy.lsh.component_groups`)
takes per edge is not a constant: it depends on the ids (64-bit integers,
or strings of the user's id field), on how many distinct documents the
edges join, and on the libraries' versions. So it is measured: the
components of a sample of the real edges are found with every allocation
counted, numpy's and scipy's through :mod:`tracemalloc` and Arrow's through a
proxy memory pool handed to the computation, and the peak per edge (with the edges themselves) is
what the whole graph is expected to take. The measure runs in an
interpreter of its own (``python -m`` this module): CPython 3.11 can crash
stopping :mod:`tracemalloc` while other threads allocate (Beam's gRPC
threads do, in a driver), and a fresh process has no other threads. The
bound is a share of the memory this process may still take: what the
machine has available, or less where a cgroup limits the process (a
container, a Slurm job).

A small graph skips the measure, which takes a fresh interpreter (~1.5 s,
more than finding the components): up to ``SMALL_GRAPH_EDGES`` edges it is
held in memory when a generous bound on its peak fits, many times the peaks
measured (~22 MB fixed, then 140 to 320 bytes per edge at a million edges of
integer or 60-character string ids: 3 to 9 times the edges' own bytes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import psutil
import pyarrow as pa

import beam_curator
from beam_curator.dedup.fuzzy.lsh import component_groups

# The share of the available memory the in-memory path may take, and the edges measured.
MEMORY_SHARE = 0.5
SAMPLE_EDGES = 1_000_000
SMALL_GRAPH_EDGES = 100_000
_CGROUP = Path("/sys/fs/cgroup")


def available_memory() -> int:
    """Bytes this process can still take: the machine's available memory, or
    what is left under the cgroup (v2) limit where that is less."""
    available = psutil.virtual_memory().available
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        used = int((_CGROUP / "memory.current").read_text())
    except (OSError, ValueError):
        return available
    return available if limit == "max" else max(0, min(available, int(limit) - used))


def peak_bytes_per_edge(x: pa.Array, y: pa.Array) -> float:
    """The peak memory of finding the components of edges ``(x, y)``, with the
    edges themselves, per edge (measured in a fresh interpreter)."""
    if len(x) == 0:
        return 0.0
    package_root = str(Path(beam_curator.__file__).resolve().parent.parent)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                                             os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="beam_curator_edges_") as folder:
        path = os.path.join(folder, "edges.arrow")
        table = pa.table({"x": x, "y": y})
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        done = subprocess.run([sys.executable, "-m", __name__, path], capture_output=True, text=True,
                              env=environment, check=False)
    if done.returncode:
        raise RuntimeError(f"measuring the memory of connected components failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def _measure(path: str) -> float:
    """In the measuring interpreter: the edges in the Arrow file ``path``,
    their components found with numpy's and scipy's allocations traced and
    Arrow's through a proxy pool, the peak per edge."""
    with pa.memory_map(path) as source:
        table = pa.ipc.open_file(source).read_all()
    x, y = table.column("x").combine_chunks(), table.column("y").combine_chunks()
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    tracemalloc.start()
    component_groups(x, y, pool)
    _, python_peak = tracemalloc.get_traced_memory()
    return (x.nbytes + y.nbytes + pool.max_memory() + python_peak) / len(x)


def generous_peak_bytes(x: pa.Array, y: pa.Array) -> int:
    """A bound on the peak memory of finding the components of edges ``(x, y)``
    far above what is measured (see the module docstring)."""
    return (64 << 20) + 16 * (x.nbytes + y.nbytes) + 256 * len(x)


def in_memory_edge_limit(x: pa.Array, y: pa.Array, memory: int | None = None) -> tuple[int, float]:
    """``(edges, bytes per edge)``: how many edges fit in ``memory`` bytes
    (default: ``MEMORY_SHARE`` of :func:`available_memory`) at the peak per
    edge measured on the sample ``(x, y)`` (the first ``SAMPLE_EDGES``, so a
    smaller sample is the whole graph); a small graph whose generous bound
    fits is not measured."""
    memory = int(available_memory() * MEMORY_SHARE) if memory is None else memory
    bound = generous_peak_bytes(x, y)
    per_edge = bound / len(x) if 0 < len(x) <= SMALL_GRAPH_EDGES and bound <= memory else peak_bytes_per_edge(x, y)
    return (int(memory // per_edge) if per_edge else memory), per_edge


def memory_plan(edges: int, limit: int, per_edge: float) -> str:
    """The choice :func:`in_memory_edge_limit` led to, as a log line reads it: the
    graph's expected peak beside the memory allowed, in binary units. A small
    graph's bound is generous (64 MiB and more) rather than a measure, so its
    bytes per edge would read as alarming; its total does not."""
    if not edges:
        return "no edges: no duplicates to group"
    where = "in memory" if edges <= limit else "by star rounds on Beam, as it does not fit in memory"
    return (f"{edges:,} edges, expected to take at most {_binary_units(edges * per_edge)} of the "
            f"{_binary_units(limit * per_edge)} allowed: components found {where}")


def _binary_units(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


if __name__ == "__main__":
    print(_measure(sys.argv[1]))
