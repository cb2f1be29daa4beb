"""The cluster checks (``cluster_checks.ClusterChecks``) on Spark: a
standalone cluster of a master and a worker, and the job server's embedded
one."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import ContextManager

import pytest

from cluster_checks import ClusterChecks, curator_helpers, driver_command, driver_environment, missing

pytestmark = pytest.mark.slow


class TestOnSpark(ClusterChecks):
    engine = "spark"
    package = "pyspark"
    embedded = {"spark_master_url": "local[2]"}

    def standalone_cluster(self) -> ContextManager[object]:
        from beam_curator.runners.engines import SparkCluster

        return SparkCluster(cores=2)

    def cli_flags(self, cluster: object) -> list[str]:
        return ["--spark-master-url", cluster.master_url]

    def cancel(self, cluster: object, job: str) -> None:
        cluster.kill_application(job)

    def kill_worker(self, cluster: object) -> None:
        cluster.worker.kill()

    def job_ids(self, cluster: object) -> set[str]:
        state = cluster.state()
        return {app["id"] for app in [*state.get("activeapps", []), *state.get("completedapps", [])]}

    def check_cancelled(self, cluster: object, jobs_before: set[str]) -> None:
        """The run's Spark application (Beam's job server is its driver) has ended: the stop reached the
        job server, whose SparkContext cancelled the job as it shut down."""
        deadline = time.monotonic() + 120
        while any(app["id"] not in jobs_before for app in cluster.state().get("activeapps", [])):
            assert time.monotonic() < deadline, "the run's application never ended"
            time.sleep(0.5)
        assert self.job_ids(cluster) - jobs_before, "the run started no application"

    def restart_worker(self, cluster: object) -> None:
        cluster.restart_worker()

    def test_a_run_that_succeeds_prints_no_error(self, tmp_path: Path) -> None:
        """The job server hangs up an SDK worker's data stream at the end of every job and Spark stage;
        a LOOPBACK worker (the embedded cluster's default: in the driver) that was reading it must not
        print that as an ERROR traceback ('Multiplexer hanging up') after a run that succeeded."""
        if missing(self.engine):
            pytest.skip(missing(self.engine))
        input_dir = curator_helpers.write_corpus(tmp_path / "in", 4)
        done = subprocess.run(driver_command(tmp_path, input_dir, {"runner": self.engine, **self.embedded}, "run.log"),
                              capture_output=True, text=True, timeout=300, env=driver_environment())
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["completed"] == 4
        for error in ("Multiplexer hanging up", "Traceback", "ERROR"):
            assert error not in done.stderr, done.stderr[-5000:]
