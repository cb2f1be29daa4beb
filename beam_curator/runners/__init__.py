"""Runner presets (local, local-multiprocess, portable, flink, spark, dask), a
local worker pool for EXTERNAL environments, and per-worker GPU placement."""

from beam_curator.runners.gpu import pin_worker_gpu, visible_gpus
from beam_curator.runners.options import ENVIRONMENT_TYPES, RUNNERS, SETTINGS, pipeline_options, runner_args, usable_cores
from beam_curator.runners.worker_pool import WorkerPool, free_port

__all__ = [
    "ENVIRONMENT_TYPES",
    "RUNNERS",
    "SETTINGS",
    "WorkerPool",
    "free_port",
    "pin_worker_gpu",
    "pipeline_options",
    "runner_args",
    "usable_cores",
    "visible_gpus",
]
