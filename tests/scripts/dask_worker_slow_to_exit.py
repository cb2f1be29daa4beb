"""A run on a dask LocalCluster whose worker takes 6 s to exit (test_dask_runner.py): argv data, output, checkpoint."""

import atexit
import sys
import time

from beam_curator import Pipeline
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter

class SlowToExit(ProcessingStage):
    """Its worker process takes 6 s to exit, as one holding a model does on a busy machine."""
    def setup(self) -> None:
        if not getattr(sys, "slow_to_exit", False):
            sys.slow_to_exit = True
            atexit.register(time.sleep, 6)

    def process(self, task):
        return task

if __name__ == "__main__":
    data, out, ckpt = sys.argv[1:]
    print(Pipeline("slow-exit", stages=[JsonlReader(data), SlowToExit(), JsonlWriter(out)]).run(ckpt, "dask", num_workers=1))
