"""The resume pipeline with its stages in processes other than the driver.

Completion marks must come from the worker processes that did the work and
be read back from disk by a later, separate run; nothing may depend on the
driver's memory. Stages come from ``stages_for_tests``, which the workers
import from ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from beam_curator.runners import WorkerPool, gpu, pin_worker_gpu
from stages_for_tests import resume_pipeline, run_and_resume, write_corpus, written_records


def test_external_worker_pool_marks_and_resumes(tmp_path: Path, worker_pool: WorkerPool) -> None:
    pids, _ = run_and_resume(tmp_path, "portable", **worker_pool.settings())
    assert worker_pool.process is not None and worker_pool.process.pid not in pids, "the pool itself ran stages"


def test_stopping_a_pool_ends_its_sdk_workers_too(tmp_path: Path) -> None:
    with WorkerPool(pythonpath=[str(Path(__file__).parent)]) as pool:
        corpus = write_corpus(tmp_path / "input", 2)
        resume_pipeline(corpus, tmp_path / "out").run(None, "portable", **pool.settings())
        group = pool.process.pid
        worker_pids = {record["worker_pid"] for record in written_records(tmp_path / "out")}
        assert worker_pids and group not in worker_pids
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # neither the pool nor any worker it started is left
    for pid in worker_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_local_multiprocess_workers_mark_pin_gpus_and_resume(
    tmp_path: Path, worker_pythonpath: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BEAM_CURATOR_GPUS", "gpu-a,gpu-b")  # inherited by the worker processes
    _, records = run_and_resume(tmp_path, "local-multiprocess", num_workers=2)
    devices: dict[int, set[str]] = defaultdict(set)
    for record in records:
        devices[record["worker_pid"]].add(record["gpu"])
    assert all(len(found) == 1 for found in devices.values()), f"a worker changed GPU: {devices}"
    pinned = [found.pop() for found in devices.values()]
    assert set(pinned) <= {"gpu-a", "gpu-b"} and len(set(pinned)) == len(pinned), f"workers share a GPU: {devices}"


# Loads gpu.py on its own (it needs only the standard library): importing the
# package would import Beam, seconds per process.
CLAIM = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gpu", sys.argv[1])
gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu)
print(gpu.pin_worker_gpu(["0", "1"], lock_dir=sys.argv[2]), flush=True)
sys.stdin.read()  # hold the slot until the test closes stdin
"""


def _claimant(lock_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CLAIM, gpu.__file__, str(lock_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )


def test_concurrent_processes_take_devices_round_robin_and_free_them_on_exit(tmp_path: Path) -> None:
    first, second = _claimant(tmp_path), _claimant(tmp_path)
    devices = [first.stdout.readline().strip(), second.stdout.readline().strip()]
    third = _claimant(tmp_path)
    wrapped = third.stdout.readline().strip()
    second.communicate("")  # exiting frees its slot
    replacement = _claimant(tmp_path)
    reused = replacement.stdout.readline().strip()
    for process in (first, third, replacement):
        process.communicate("")
    assert sorted(devices) == ["0", "1"]
    assert wrapped == "0", "the third slot should wrap round to device 0"
    assert reused == devices[1], "a new process should take the slot of the one that exited"


def test_a_launcher_placed_device_or_no_gpu_is_left_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BEAM_CURATOR_GPUS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert pin_worker_gpu(lock_dir=str(tmp_path)) == "3"
    assert pin_worker_gpu([], lock_dir=str(tmp_path)) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3" and not list(tmp_path.iterdir())
