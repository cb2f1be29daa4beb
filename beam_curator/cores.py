"""How many cores this process may use.

Apart from the runners because it imports nothing of Apache Beam: the
benchmarks' baselines and the GPU check (run where Beam is not installed)
describe the machine with it too.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a batch
    scheduler such as Slurm narrows), not every core of the machine."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
