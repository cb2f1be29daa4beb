"""The cluster checks (``cluster_checks.ClusterChecks``) on Spark: a
standalone cluster of a master and a worker, and the job server's embedded
one."""

from __future__ import annotations

from typing import ContextManager

import pytest

from cluster_checks import ClusterChecks

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

    def restart_worker(self, cluster: object) -> None:
        cluster.restart_worker()
