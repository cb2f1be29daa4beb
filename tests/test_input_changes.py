"""The core pipeline on a folder that changes between runs.

A partition's id hashes its file paths (NeMo Curator's contract), so by
default a finished partition whose file changed is kept, and the rerun says
so, naming the file. With ``fingerprint="stat"`` or ``"content"`` the
partition runs again and rewrites its own output file. Outputs are checked
too: a finished partition whose output file is gone or changed runs again.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import SCRIPTS_DIR, scripts_pythonpath  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.cli.main import main  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402


def write(path: Path, texts: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))


def corpus(folder: Path) -> Path:
    for index in range(3):
        write(folder / f"part-{index}.jsonl", [f"file {index} row {row}" for row in range(3)])
    return folder


def run(input_dir: Path, output: Path, checkpoint: Path, fingerprint: str | None = None):
    return Pipeline("changes", stages=[
        JsonlReader(str(input_dir), fingerprint=fingerprint), JsonlWriter(str(output)),
    ]).run(str(checkpoint), "local")


def texts(output: Path) -> set[str]:
    return {json.loads(line)["text"] for file in output.glob("*.jsonl") for line in file.read_text().splitlines()}


def times(output: Path) -> dict[str, int]:
    return {file.name: file.stat().st_mtime_ns for file in output.glob("*.jsonl")}


def edit_keeping_size_and_time(path: Path, mark: bytes) -> None:
    """Change bytes in the middle of a file larger than the edges the cheap
    fingerprint reads, and restore its size and modification time."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + len(mark)] = mark
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_by_default_a_changed_finished_partition_is_kept_and_named(tmp_path: Path, caplog) -> None:
    input_dir, output, checkpoint = corpus(tmp_path / "in"), tmp_path / "out", tmp_path / "ckpt"
    run(input_dir, output, checkpoint)
    written = times(output)
    write(input_dir / "part-1.jsonl", ["changed since"])
    with caplog.at_level(logging.WARNING):
        summary = run(input_dir, output, checkpoint)
    assert (summary.partitions_pending, summary.partitions_skipped, summary.partitions_changed) == (0, 3, 1)
    assert f"files changed since it ran: {input_dir / 'part-1.jsonl'}" in caplog.text
    assert times(output) == written and "changed since" not in texts(output)


@pytest.mark.parametrize("fingerprint", ["stat", "content"])
def test_with_a_fingerprint_a_changed_partition_runs_again_alone(tmp_path: Path, fingerprint: str) -> None:
    input_dir, output, checkpoint = corpus(tmp_path / "in"), tmp_path / "out", tmp_path / "ckpt"
    run(input_dir, output, checkpoint, fingerprint)
    written = times(output)
    write(input_dir / "part-1.jsonl", ["changed since"])
    summary = run(input_dir, output, checkpoint, fingerprint)
    assert (summary.partitions_pending, summary.partitions_skipped) == (1, 2)
    changed = {name for name, mtime in times(output).items() if written.get(name) != mtime}
    assert len(changed) == 1 and set(times(output)) == set(written), "the partition rewrites its own file"
    assert texts(output) == {f"file {i} row {r}" for i in (0, 2) for r in range(3)} | {"changed since"}
    again = run(input_dir, output, checkpoint, fingerprint)
    assert (again.partitions_pending, again.partitions_skipped) == (0, 3)


def test_only_the_content_fingerprint_sees_an_edit_that_keeps_size_and_time(tmp_path: Path) -> None:
    input_dir = tmp_path / "in"
    write(input_dir / "big.jsonl", [f"row {row} " + "x" * 200 for row in range(2000)])  # ~420 KB
    for mode, reruns in (("stat", 0), ("content", 1)):
        output, checkpoint = tmp_path / f"out-{mode}", tmp_path / f"ckpt-{mode}"
        run(input_dir, output, checkpoint, mode)
        edit_keeping_size_and_time(input_dir / "big.jsonl", f"EDIT-{mode}".encode())
        assert run(input_dir, output, checkpoint, mode).partitions_pending == reruns, mode


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_finished_partition_whose_output_is_damaged_runs_again(tmp_path: Path, damage: str, caplog) -> None:
    input_dir, output, checkpoint = corpus(tmp_path / "in"), tmp_path / "out", tmp_path / "ckpt"
    run(input_dir, output, checkpoint)
    expected = texts(output)
    victim = sorted(output.glob("*.jsonl"))[0]
    if damage == "delete":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:5])
    untouched = {name: mtime for name, mtime in times(output).items() if name != victim.name}
    with caplog.at_level(logging.WARNING):
        summary = run(input_dir, output, checkpoint)
    assert (summary.partitions_pending, summary.partitions_skipped) == (1, 2)
    assert str(victim) in caplog.text
    assert texts(output) == expected
    assert {name: mtime for name, mtime in times(output).items() if name != victim.name} == untouched


def test_names_starting_with_a_dot_or_underscore_are_never_input(tmp_path: Path) -> None:
    input_dir = corpus(tmp_path / "in")
    write(input_dir / "_SUCCESS.jsonl", ["engine marker"])
    write(input_dir / ".ipynb_checkpoints" / "part-0-checkpoint.jsonl", ["notebook copy"])
    write(input_dir / "_temporary" / "part-9.jsonl", ["half-written"])
    run(input_dir, tmp_path / "out", tmp_path / "ckpt")
    assert texts(tmp_path / "out") == {f"file {i} row {r}" for i in range(3) for r in range(3)}


def test_a_reset_is_refused_while_a_run_has_started(tmp_path: Path, capsys) -> None:
    """The run holds its writer's lock from before it reads the completion set,
    so a reset cannot pull marks away from under it, even before its first mark."""
    input_dir, log = corpus(tmp_path / "in"), tmp_path / "calls.log"
    command = [sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"), str(input_dir), str(tmp_path / "out"),
               str(tmp_path / "ckpt"), "--log", str(log), "--delay", "30"]
    process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": scripts_pythonpath()})
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and log.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        assert main(["checkpoint", "reset", str(tmp_path / "ckpt")]) == 1
        assert "in use by running writers" in capsys.readouterr().err
    finally:
        process.kill()
        process.wait(timeout=30)


def test_status_of_a_checkpoint_that_does_not_exist_fails(tmp_path: Path, capsys) -> None:
    assert main(["checkpoint", "status", str(tmp_path / "nowhere")]) != 0
    assert f"{tmp_path / 'nowhere'} does not exist" in capsys.readouterr().err
