"""What a user sees: beam_curator's messages, not the libraries' chatter.

Runs the resume example as a user would, with worker processes, and reads
everything it printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "resume_demo.py"


def run_example(tmp_path: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--output", str(tmp_path / "out"), "--runner", "local-multiprocess",
         "--seconds-per-batch", "0", *flags],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_worker_processes_and_beam_stay_quiet_at_the_default_level(tmp_path: Path) -> None:
    out = run_example(tmp_path)
    assert "6 partitions pending, 0 skipped as complete, 6 completed this run" in out
    for noise in ("apitools not found", "INFO:", "Logging handler created", "semi_persistent_directory",
                  "sdk harness", "Loading weights"):
        assert noise not in out, f"{noise!r} leaked into the output:\n{out[-3000:]}"
    assert " INFO beam_curator." in out, "our own messages still show"
