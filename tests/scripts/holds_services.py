"""A test run that holds the services the suite starts (a worker pool, the S3 server, a Spark cluster)
until it is stopped: ``test_services.py`` stops it with SIGTERM or SIGKILL and looks for what is left.

    HOLDS_SERVICES_READY=FILE pytest holds_services.py   (touches FILE once everything is up)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from beam_curator.runners import WorkerPool
from beam_curator.runners.engines import SparkCluster


@pytest.fixture(scope="session")
def spark() -> object:
    with SparkCluster(cores=1, memory="512m") as cluster:
        yield cluster


def test_holds_them_until_stopped(spark: object, s3_server: object) -> None:
    with WorkerPool():
        Path(os.environ["HOLDS_SERVICES_READY"]).touch()
        time.sleep(600)
