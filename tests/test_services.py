"""Nothing is left behind: the services a run or a test run starts (clusters, worker pools, the S3
server), each in a session of its own, end with the process that started them, however it ends; after
a SIGKILL, the next service started on the machine ends what the killed process left.

A real test run (``scripts/holds_services.py``: a Spark cluster, the S3 server, a worker pool) is
stopped as CI's time limit or a user's ``timeout`` stops one, with SIGTERM, and as the OOM killer
does, with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from beam_curator.runners.services import MARKERS, end_orphans, group_members
from cluster_checks import missing

TESTS_DIR = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(bool(missing("spark", "pyspark")), reason=missing("spark", "pyspark") or "-")


def start_holding(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, list[dict]]:
    """The test run holding its services, once they are up, and the markers of the services it started."""
    ready = tmp_path / "ready"
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                            str(tmp_path / "base"), *flags, str(TESTS_DIR / "scripts" / "holds_services.py")],
                           cwd=TESTS_DIR.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "HOLDS_SERVICES_READY": str(ready)})
    deadline = time.monotonic() + 240
    while not ready.exists():
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail(f"the test run did not start its services:\n{run.communicate(timeout=60)[0][-3000:]}")
        time.sleep(0.2)
    owners = {run.pid, *(child.pid for child in psutil.Process(run.pid).children(recursive=True))}
    markers = [json.loads(path.read_text()) for path in MARKERS.glob("*.json")]
    held = [marker for marker in markers if marker["owner"] in owners]
    assert {marker["name"] for marker in held} == {"spark-master", "spark-worker", "s3proxy", "worker-pool"}, markers
    assert all(group_alive(marker["pid"]) for marker in held)
    return run, held


def group_alive(group: int) -> bool:
    return bool(group_members(group))


def check_nothing_left(held: list[dict]) -> None:
    for marker in held:
        assert not group_alive(marker["pid"]), f"{marker['name']} is still running"
        assert not (MARKERS / f"{marker['owner']}-{marker['group']}.json").exists(), marker
    spark_folders = {path for marker in held if marker["name"].startswith("spark") for path in marker["paths"]}
    assert spark_folders and not [path for path in spark_folders if Path(path).exists()], spark_folders


def test_a_test_run_stopped_with_sigterm_stops_every_service_it_started(tmp_path: Path) -> None:
    """As in CI: pytest-xdist's controller gets the SIGTERM; its worker holds the services."""
    run, held = start_holding(tmp_path, "-n", "1")
    run.send_signal(signal.SIGTERM)
    output = run.communicate(timeout=120)[0]
    assert run.returncode != 0, output[-3000:]
    check_nothing_left(held)


def test_what_a_sigkilled_test_run_left_is_ended_by_the_next_service_started(tmp_path: Path) -> None:
    run, held = start_holding(tmp_path)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)
    assert all(group_alive(marker["pid"]) for marker in held), "SIGKILL leaves them running"
    ended = end_orphans()  # what Service.start calls first
    assert sorted(ended) == sorted(marker["name"] for marker in held)
    check_nothing_left(held)
