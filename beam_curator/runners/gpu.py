"""One GPU per SDK worker process, chosen on the worker itself.

Runners start several SDK worker processes per machine
(``--sdk_worker_parallelism``) and give them all the same environment, so
without help every process loads its model onto device 0. Each process
instead claims the lowest free *slot* on its host (an ``flock`` on
``<lock_dir>/<slot>.lock``, released by the kernel when the process dies, so
a restarted worker reuses the slot) and takes device ``slot % n_devices``.
This works the same for PROCESS environments, EXTERNAL pools, local
multi-processing and DOCKER (given a shared lock folder), whose worker ids
are not comparable.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from typing import IO

GPUS_VARIABLE = "BEAM_CURATOR_GPUS"
LOCK_DIR_VARIABLE = "BEAM_CURATOR_GPU_LOCK_DIR"
_claimed: tuple[int, str, IO[str]] | None = None  # (pid, device, held slot lock)


def visible_gpus() -> list[str]:
    """The host's devices: ``BEAM_CURATOR_GPUS`` (comma-separated), else the
    ``CUDA_VISIBLE_DEVICES`` the worker was started with, else ``nvidia-smi``'s
    indices; empty on a machine without NVIDIA GPUs."""
    for variable in (GPUS_VARIABLE, "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(variable)
        if value is not None:
            return [device.strip() for device in value.split(",") if device.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(
        ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, check=False
    )
    return listing.stdout.split() if listing.returncode == 0 else []


def _claim_slot(lock_dir: str) -> tuple[int, IO[str]]:
    os.makedirs(lock_dir, exist_ok=True)
    slot = 0
    while True:
        handle = open(os.path.join(lock_dir, f"{slot}.lock"), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return slot, handle
        except BlockingIOError:
            handle.close()
            slot += 1


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def pin_worker_gpu(devices: list[str] | None = None, lock_dir: str | None = None) -> str | None:
    """Restrict this process to one GPU by setting ``CUDA_VISIBLE_DEVICES``.

    Call it in a stage's ``setup`` before anything touches CUDA. Returns the
    device, or None without GPUs. A process that already sees one device
    keeps it (the launcher placed it); calling again returns the same device.
    ``lock_dir`` must be shared by the processes of one host (default:
    ``BEAM_CURATOR_GPU_LOCK_DIR``, else a folder in the system temporary
    directory; containers need a host folder mounted there).
    """
    global _claimed
    if _claimed is not None and _claimed[0] == os.getpid():  # a forked child claims its own
        return _claimed[1]
    choices = list(devices) if devices is not None else visible_gpus()
    if len(choices) <= 1:
        return choices[0] if choices else None
    if _cuda_initialised():
        raise RuntimeError(
            "CUDA is already initialised in this process, so CUDA_VISIBLE_DEVICES can no longer take effect; "
            "call pin_worker_gpu() in setup() before loading any model"
        )
    default_dir = os.environ.get(LOCK_DIR_VARIABLE) or os.path.join(tempfile.gettempdir(), "beam_curator_gpu_slots")
    slot, handle = _claim_slot(lock_dir or default_dir)
    device = choices[slot % len(choices)]
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    _claimed = (os.getpid(), device, handle)
    return device
