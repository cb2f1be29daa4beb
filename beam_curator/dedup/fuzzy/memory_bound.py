"""How many edges connected components may hold in memory, measured where they run.

The memory the in-memory path (:func:`~beam_curator.dedup.fuzzy.lsh.component_groups`)
takes per edge is not a constant: it depends on the ids (64-bit integers,
or strings of the user's id field), on how many distinct documents the
edges join, and on the libraries' versions. So it is measured: the
components of a sample of the real edges are found with every allocation
counted, numpy's and scipy's through :mod:`tracemalloc` and Arrow's through a
proxy memory pool handed to the computation, and the peak per edge (with the edges themselves) is
what the whole graph is expected to take. The bound is a share of the
memory this process may still take: what the machine has available, or
less where a cgroup limits the process (a container, a Slurm job).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import psutil
import pyarrow as pa

from beam_curator.dedup.fuzzy.lsh import component_groups

# The share of the available memory the in-memory path may take, and the edges measured.
MEMORY_SHARE = 0.5
SAMPLE_EDGES = 1_000_000
_CGROUP = Path("/sys/fs/cgroup")
# Every proxy pool made, kept for the life of the process: Arrow frees a buffer into the pool it came
# from through a plain pointer, so a buffer outliving its pool (a kernel's cache, a view numpy or
# scipy kept) would free into freed memory. A pool is a few bytes; one is made per measure.
_POOLS: list[pa.MemoryPool] = []


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
    edges themselves, per edge."""
    if len(x) == 0:
        return 0.0
    # A pool of its own, handed to the computation (not made Arrow's default: other threads
    # would allocate from it too), and never destroyed (see _POOLS).
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    _POOLS.append(pool)
    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    try:
        found = component_groups(x, y, pool)
        _, python_peak = tracemalloc.get_traced_memory()
        del found
    finally:
        if not tracing:
            tracemalloc.stop()
    return (x.nbytes + y.nbytes + pool.max_memory() + python_peak) / len(x)


def in_memory_edge_limit(x: pa.Array, y: pa.Array, memory: int | None = None) -> tuple[int, float]:
    """``(edges, bytes per edge)``: how many edges fit in ``memory`` bytes
    (default: ``MEMORY_SHARE`` of :func:`available_memory`) at the peak per
    edge measured on the sample ``(x, y)``."""
    per_edge = peak_bytes_per_edge(x, y)
    memory = int(available_memory() * MEMORY_SHARE) if memory is None else memory
    return (int(memory // per_edge) if per_edge else memory), per_edge
