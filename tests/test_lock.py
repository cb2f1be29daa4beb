"""One run per output and cache folder at a time, with real processes: a second run refuses at once
naming the holder, or waits; a killed holder's lock is taken over with a warning."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_curator.data import sample_corpus_path
from beam_curator.running.lock import RunInProgressError, lock_file, run_lock

HOLD = """
import sys, time
from beam_curator.running.lock import run_lock
with run_lock({"output_path": sys.argv[1]}):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def holder(folder: Path, seconds: float) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_second_run_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    first = holder(tmp_path / "out", 60)
    try:
        started = time.monotonic()
        with pytest.raises(RunInProgressError) as caught:
            with run_lock({"output_path": str(tmp_path / "out")}):
                pass
        assert time.monotonic() - started < 30, "it waited for the holder, which holds for 60 s"
        message = str(caught.value)
        assert f"output_path '{tmp_path / 'out'}' is in use by another run (pid {first.pid} on host " \
               f"{socket.gethostname()}, started " in message and "wait=True (--wait)" in message
    finally:
        first.kill()
        first.wait()


def test_wait_starts_when_the_holder_ends(tmp_path: Path) -> None:
    first = holder(tmp_path / "out", 3)
    started = time.monotonic()
    with run_lock({"output_path": str(tmp_path / "out")}, wait=True):
        waited = time.monotonic() - started
        assert json.loads(lock_file(str(tmp_path / "out")).read_text())["pid"] == os.getpid()
    assert 2.5 < waited < 30, "taken only once the holder let go, 3 s after it took it"
    first.wait()


def test_a_killed_holders_lock_is_taken_over_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = holder(tmp_path / "out", 60)
    first.send_signal(signal.SIGKILL)
    first.wait()
    with caplog.at_level(logging.WARNING, logger="beam_curator.running.lock"):
        with run_lock({"output_path": str(tmp_path / "out")}):
            record = json.loads(lock_file(str(tmp_path / "out")).read_text())
            assert record["pid"] == os.getpid() and record["running"]
    assert f"(pid {first.pid} on host {socket.gethostname()}" in caplog.text and "ended without finishing" in caplog.text
    assert lock_file(str(tmp_path / "out")).read_text() == "", "a finished run leaves nothing to warn about"
    with caplog.at_level(logging.WARNING, logger="beam_curator.running.lock"):
        caplog.clear()
        with run_lock({"output_path": str(tmp_path / "out")}):
            pass
    assert "ended without finishing" not in caplog.text


def test_a_stale_lock_file_from_another_host_is_taken_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = lock_file(str(tmp_path / "out"))
    path.write_text(json.dumps({"host": "node-17", "pid": 4242, "started": 0, "running": True}))
    with caplog.at_level(logging.WARNING, logger="beam_curator.running.lock"):
        with run_lock({"output_path": str(tmp_path / "out")}):
            pass
    assert "pid 4242 on host node-17" in caplog.text


def test_one_process_takes_a_folder_once_and_another_process_still_finds_it_held(tmp_path: Path) -> None:
    with run_lock({"output_path": str(tmp_path / "out"), "cache_path": str(tmp_path / "out/")}):
        with run_lock({"cache_path": str(tmp_path / "out")}):  # a workflow inside a workflow
            pass
        other = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path / "out"), "0"], capture_output=True,
                               text=True, timeout=60)
        assert other.returncode != 0 and "RunInProgressError" in other.stderr


@pytest.mark.slow
def test_two_semdedup_commands_on_one_output_the_second_refuses_then_waits(tmp_path: Path) -> None:
    command = [str(Path(sys.executable).parent / "beam-curator"), "semdedup", "--input", sample_corpus_path(),
               "--output", str(tmp_path / "out"), "--id-field", "doc_id", "--n-clusters", "20", "--eps", "0.07",
               "--embedding-backend", "sentence-transformers"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not (lock_file(str(tmp_path / "out")).exists() and lock_file(str(tmp_path / "out")).read_text()):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-2000:]
        time.sleep(0.05)
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert second.returncode == 2, second.stderr[-2000:]
    assert f"is in use by another run (pid {first.pid} on host" in second.stderr
    assert "Traceback" not in second.stderr and second.stderr.count("error:") == 1
    third = subprocess.run([*command, "--wait"], capture_output=True, text=True, env=env, timeout=600)
    assert first.wait(timeout=600) == 0
    assert third.returncode == 0, third.stderr[-2000:]
    assert "waiting for the run that holds" in third.stderr, "it waited for the first"
    assert "embedding: inputs and settings unchanged" in third.stderr and "removal: inputs and settings unchanged" in third.stderr, \
        "it found the first run's work done"
