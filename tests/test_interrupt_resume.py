"""Stop a run midway and start the same command again, as a user would.

The first run is a separate process stopped with SIGINT (Ctrl-C), SIGTERM (a
scheduler) or SIGKILL (the machine went away) once a partition is marked complete. The rerun must touch only
partitions the checkpoint did not mark, and the final output must be the
uninterrupted run's, row for row, with no duplicate files (a hidden temporary
file left by a kill mid-write is ignored by readers).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_curator.stages.io import JsonlReader
from beam_curator.tasks import EmptyTask

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import SCRIPTS_DIR, data_files, output_rows, resume_pipeline, source_id, write_corpus  # noqa: E402

from beam_curator.checkpoint import open_store  # noqa: E402

FILES = 8
DELAY = 0.4  # seconds per partition: long enough to interrupt between partitions


def command(tmp_path: Path, log_name: str, runner: str = "local") -> list[str]:
    return [
        sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"),
        str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt"),
        "--log", str(tmp_path / log_name), "--delay", str(DELAY), "--runner", runner,
    ]


def interrupt_after_a_mark(process: subprocess.Popen, checkpoint: Path, sig: signal.Signals, log: Path) -> None:
    """Stop the run once its checkpoint marks a partition complete: the event a stop must come after for
    the rerun to have work both done and left (outputs alone say nothing: several tasks, of several
    partitions, are written before any is marked)."""
    deadline = time.monotonic() + 120
    while not (checkpoint.exists() and open_store(str(checkpoint)).completed()):
        assert process.poll() is None, f"the run ended before it could be interrupted:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no partition was marked:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    process.send_signal(sig)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"the run did not stop within 30 s of {sig.name}")
    assert process.returncode != 0


def called_partitions(log: Path) -> list[str]:
    """Source ids of the tasks the slow stage saw (``0_<hex>_0`` -> ``0_<hex>``)."""
    return ["_".join(line.split("_")[:2]) for line in log.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["local", "in-process"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_rerun_after_interrupt_does_only_the_rest_and_matches_an_uninterrupted_run(
    sig: signal.Signals, runner: str, tmp_path: Path,
) -> None:
    input_dir = write_corpus(tmp_path / "in", FILES)
    every = {source_id([file]) for file in input_dir.glob("*.jsonl")}
    reference_dir = tmp_path / "reference"
    resume_pipeline(str(input_dir), str(reference_dir), str(tmp_path / "reference.log"), 0).run(runner="local")

    console = tmp_path / "first.out"
    with console.open("w") as sink:  # a file, not a pipe nobody reads, which could fill and block the run
        first = subprocess.Popen(command(tmp_path, "first.log", runner), stdout=sink, stderr=subprocess.STDOUT)
        interrupt_after_a_mark(first, tmp_path / "ckpt", sig, console)
    marked = open_store(str(tmp_path / "ckpt")).completed()
    assert marked and marked < every, f"expected an interrupted run, {len(marked)} of {FILES} partitions marked"
    assert marked <= set(called_partitions(tmp_path / "first.log"))

    second = subprocess.run(command(tmp_path, "second.log", runner), capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary == {"pending": FILES - len(marked), "skipped": len(marked), "completed": FILES - len(marked)}
    rerun = called_partitions(tmp_path / "second.log")
    assert sorted(rerun) == sorted(every - marked), "each unmarked partition once, and only those"

    output = tmp_path / "out"
    # A kill mid-write may leave a hidden temporary file; readers must not take it for data.
    visible = sorted(p.name for p in output.iterdir() if not p.name.startswith(".tmp-"))
    assert visible == sorted(p.name for p in reference_dir.iterdir())
    assert output_rows(output) == output_rows(reference_dir)
    reread = JsonlReader(str(output)).decompose()
    groups = reread[0].process(EmptyTask())
    assert sorted(path for group in groups for path in group.data) == sorted(str(output / name) for name in visible)
    assert open_store(str(tmp_path / "ckpt")).completed() == every


STOPS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "stopped by SIGTERM")}


STOPPED_FILES = 12  # two stops in a row, each after some output: enough partitions left for the second


@pytest.mark.parametrize("runner, settings", [
    ("local", {}), ("local-multiprocess", {"num_workers": 2}), ("dask", {"num_workers": 2}), ("in-process", {}),
    ("portable", {}),
])
def test_a_stop_ends_the_run_with_one_line_and_the_signals_exit_status(
    runner: str, settings: dict, tmp_path: Path,
) -> None:
    """A scheduler's SIGTERM (Slurm's scancel signals every process of the job), and then, on the rerun,
    a terminal's Ctrl-C, reach the whole process group (the driver, its worker processes, a dask
    cluster's): each run ends with the one line saying what is kept and the signal's exit status
    (143, 130), and the same command then finishes the run as an uninterrupted one would have."""
    input_dir = write_corpus(tmp_path / "in", STOPPED_FILES)
    reference_dir = tmp_path / "reference"
    resume_pipeline(str(input_dir), str(reference_dir), str(tmp_path / "reference.log"), 0).run(runner="local")
    run = [*command(tmp_path, "first.log", runner), "--settings", json.dumps(settings)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SCRIPTS_DIR), os.environ.get("PYTHONPATH", "")])}
    marked: set[str] = set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        status, stopped = STOPS[sig]
        errors = tmp_path / f"stderr-{sig.name}.txt"
        outputs_before = len(data_files(tmp_path / "out"))
        with errors.open("w") as stderr:
            stopping = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=stderr, env=environment,
                                        start_new_session=True)
            deadline = time.monotonic() + 120
            # No mark needed: a stop that keeps nothing new is a valid stop.
            while len(data_files(tmp_path / "out")) < outputs_before + 2:
                assert stopping.poll() is None and time.monotonic() < deadline, errors.read_text()[-3000:]
                time.sleep(0.05)
            os.killpg(stopping.pid, sig)
            assert stopping.wait(timeout=60) == status, errors.read_text()[-3000:]
        marked = open_store(str(tmp_path / "ckpt")).completed()
        lines = errors.read_text().splitlines()
        assert len(lines) == 1, errors.read_text()[-5000:]
        said = re.fullmatch(rf"{stopped}; (\d+) partitions of 'resume' complete: rerun the same command to resume",
                            lines[0])
        # A worker may finish one more as the driver ends.
        assert said and int(said[1]) <= len(marked) < STOPPED_FILES, lines
    second = subprocess.run(run, capture_output=True, text=True, timeout=180, env=environment)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.strip().splitlines()[-1])["skipped"] == len(marked)
    assert output_rows(tmp_path / "out") == output_rows(reference_dir)
