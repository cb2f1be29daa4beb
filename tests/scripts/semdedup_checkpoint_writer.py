"""Record completion marks into a checkpoint store from a process of its own, then linger.

The CLI tests need writer files that belong to other processes, and a live
writer that holds its lock while ``checkpoint reset`` is tried.
Usage: ``semdedup_checkpoint_writer.py PATH COMPLETE [HALF_SOURCE] [SLEEP_SECONDS]``:
marks sources ``src0..src<COMPLETE-1>`` complete, returns half the credit of
HALF_SOURCE (if not ``-``), prints ``ready`` and sleeps.
"""

from __future__ import annotations

import sys
import time
from fractions import Fraction

from beam_curator.checkpoint import open_store


def main(path: str, complete: int, half_source: str = "-", sleep: float = 0.0) -> None:
    store = open_store(path)
    for number in range(complete):
        store.record(f"src{number}_0", {f"src{number}": Fraction(1)})
    if half_source != "-":
        store.record(f"{half_source}_{complete}", {half_source: Fraction(1, 2)})
    print("ready", flush=True)
    time.sleep(sleep)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4], *map(float, sys.argv[4:5]))
