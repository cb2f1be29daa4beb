"""The cluster checks (``cluster_checks.ClusterChecks``) on Flink: a
standalone cluster of a JobManager and a TaskManager, and the job server's
embedded one; and Flink's streaming mode with stateful completion."""

from __future__ import annotations

import subprocess
import time
import urllib.error
from pathlib import Path
from typing import ContextManager

import pytest

from beam_curator.checkpoint import open_store
from beam_curator.runners import WorkerPool
from cluster_checks import (FILES, ClusterChecks, check_marks_as_partitions_finish, curator_helpers, driver_command,
                            driver_environment, mark_times, reference_run, running_job)

pytestmark = pytest.mark.slow
STREAMING_STATEFUL = ("--streaming", "--completion", "stateful")


class TestOnFlink(ClusterChecks):
    engine = "flink"
    package = "pyflink"
    embedded = {"flink_master": "[local]"}
    killed_phase = "lsh"

    def standalone_cluster(self) -> ContextManager[object]:
        from beam_curator.runners.engines import FlinkCluster

        return FlinkCluster(slots=2, restart_attempts=10)

    def cli_flags(self, cluster: object) -> list[str]:
        return ["--flink-master", cluster.master]

    def cancel(self, cluster: object, job: str) -> None:
        cluster.cancel(job)

    def kill_worker(self, cluster: object) -> None:
        cluster.taskmanager.kill()

    def job_ids(self, cluster: object) -> set[str]:
        return {job["id"] for job in cluster.jobs()}

    def check_cancelled(self, cluster: object, jobs_before: set[str]) -> None:
        """Flink's job ends CANCELED: the driver cancelled it on the cluster (Beam's own cancel leaves it
        running on to FINISHED)."""
        deadline = time.monotonic() + 120
        while (states := {job["id"]: job["status"] for job in cluster.jobs() if job["id"] not in jobs_before}) and \
                not set(states.values()) <= {"CANCELED", "FINISHED", "FAILED"}:
            assert time.monotonic() < deadline, f"the run's job never ended: {states}"
            time.sleep(0.5)
        assert states and set(states.values()) == {"CANCELED"}, states

    def restart_worker(self, cluster: object) -> None:
        cluster.restart_taskmanager()

    def job_servers(self) -> int:
        from beam_curator.runners import flink_runner

        return len(flink_runner._JOB_SERVERS)

    def test_cancelling_a_job_that_ended_in_the_meantime_leaves_it_as_it_ended(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """A job can finish between finding it running and cancelling it: Flink answers 409 Conflict,
        which ``FlinkCluster.cancel`` takes as done; a job the cluster does not know is still an error."""
        input_dir = curator_helpers.write_corpus(tmp_path / "in", FILES)
        before = {job["id"] for job in cluster.jobs()}
        done = subprocess.run(driver_command(tmp_path, input_dir, self.runner(cluster, pool), "log"),
                              capture_output=True, text=True, timeout=300, env=driver_environment())
        assert done.returncode == 0, done.stderr[-3000:]
        finished = [job["id"] for job in cluster.jobs() if job["id"] not in before]
        assert len(finished) == 1 and cluster.jobs() and running_job(cluster) is None
        cluster.cancel(finished[0])
        assert {job["id"]: job["status"] for job in cluster.jobs()}[finished[0]] == "FINISHED"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            cluster.cancel("0" * 32)

    def test_streaming_stateful_completion_marks_as_partitions_finish(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """In streaming mode the keyed stateful DoFn sees each credit as it is returned; the fused
        completion on the same pipeline is measured beside it."""
        input_dir = curator_helpers.write_corpus(tmp_path / "in", FILES)
        reference = reference_run(tmp_path, input_dir)
        runner = self.runner(cluster, pool)
        (tmp_path / "fused").mkdir()
        fused = mark_times(tmp_path / "fused", driver_command(tmp_path / "fused", input_dir, runner, "log", "--streaming"))
        times, end = mark_times(tmp_path, driver_command(tmp_path, input_dir, runner, "first.log", *STREAMING_STATEFUL))
        check_marks_as_partitions_finish(*fused, "flink streaming, fused")
        check_marks_as_partitions_finish(times, end, "flink streaming, stateful")
        assert curator_helpers.output_rows(tmp_path / "out") == curator_helpers.output_rows(reference)
        assert open_store(str(tmp_path / "ckpt")).snapshot().outputs == \
            open_store(str(tmp_path / "fused" / "ckpt")).snapshot().outputs

    def test_a_streaming_stateful_run_whose_worker_is_killed_resumes_to_the_uninterrupted_output(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """A TaskManager killed under a run in streaming mode with stateful completion (the other
        interruptions of the driver's run are checked in batch mode)."""
        self.interrupt_and_rerun(tmp_path, pool, cluster, ("kill-worker",), *STREAMING_STATEFUL)


def test_a_cluster_takes_flink_settings_over_its_own() -> None:
    """``conf`` reaches the daemons, over the cluster's own entries: what sizing a TaskManager's direct memory
    for a batch-mode job needs (bench_star_components' ``--flink-conf``)."""
    from beam_curator.runners.engines import FlinkCluster
    from beam_curator.runners.services import get_json

    with FlinkCluster(slots=1, conf={"taskmanager.memory.task.off-heap.size": "96m",
                                     "restart-strategy.fixed-delay.attempts": 7}) as flink:
        (taskmanager,) = get_json(f"http://{flink.master}/taskmanagers")["taskmanagers"]
        settings = {entry["key"]: entry["value"] for entry in get_json(f"http://{flink.master}/jobmanager/config")}
    assert taskmanager["memoryConfiguration"]["taskOffHeap"] == 96 * 2**20
    assert settings["restart-strategy.fixed-delay.attempts"] == "7"
