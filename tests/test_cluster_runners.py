"""The resume pipeline on Flink and Spark, with workers from the EXTERNAL pool.

These need a Beam job-server jar on disk (sites without internet cannot let
Beam download one) and Java; name the jar in
``BEAM_CURATOR_FLINK_JOB_SERVER_JAR`` / ``BEAM_CURATOR_SPARK_JOB_SERVER_JAR``
to run them. Each embedded cluster takes tens of seconds to start.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from beam_curator.runners import WorkerPool
from stages_for_tests import run_and_resume


def _jar(variable: str) -> str:
    return os.environ.get(variable, "")


def _missing(variable: str) -> str:
    """Why the runner cannot run here, or "" when it can."""
    jar = _jar(variable)
    if not jar or not os.path.isfile(jar):
        return f"{variable} does not name an existing job-server jar ({jar or 'unset'})"
    return "" if shutil.which("java") else "no java on PATH to run the job server"


FLINK, SPARK = "BEAM_CURATOR_FLINK_JOB_SERVER_JAR", "BEAM_CURATOR_SPARK_JOB_SERVER_JAR"


@pytest.mark.slow
@pytest.mark.skipif(bool(_missing(FLINK)), reason=_missing(FLINK))
def test_flink_marks_from_workers_and_resumes(tmp_path: Path, worker_pool: WorkerPool) -> None:
    settings = {"flink_master": "[local]", "flink_job_server_jar": _jar(FLINK), **worker_pool.settings()}
    pids, _ = run_and_resume(tmp_path, "flink", **settings)
    assert worker_pool.process.pid not in pids


@pytest.mark.slow
@pytest.mark.skipif(bool(_missing(SPARK)), reason=_missing(SPARK))
def test_spark_marks_from_workers_and_resumes(tmp_path: Path, worker_pool: WorkerPool) -> None:
    settings = {"spark_master_url": "local[2]", "spark_job_server_jar": _jar(SPARK), **worker_pool.settings()}
    pids, _ = run_and_resume(tmp_path, "spark", **settings)
    assert worker_pool.process.pid not in pids
