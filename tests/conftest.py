"""Shared fixtures: stage modules importable by SDK worker processes, and one
EXTERNAL worker pool for the whole session (starting one costs seconds)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Iterator

import pytest

from beam_curator import logs
from beam_curator.runners import WorkerPool

TESTS_DIR = Path(__file__).resolve().parent
# Every JVM the tests start (Flink's and Spark's daemons, Beam's job servers, S3Proxy) runs short jobs on
# little data, where the JIT's optimising compiler costs more CPU than it gains: with its first tier only
# and the serial collector a Flink run took 31% less CPU here (18.3 against 26.6 s). The suite is CPU-bound
# on two cores. (Not for users' clusters, whose long jobs want the optimising compiler.)
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


# The files that take minutes, longest first. `make test` hands whole files to its two workers in collection
# order (xdist's loadfile, --no-loadscope-reorder), so these start first and the many short files even the
# workers out at the end; in alphabetical order a long file drawn last kept one worker busy alone.
LONGEST_FILES = ("test_cluster_flink.py", "test_cluster_spark.py", "test_docs.py", "test_semantic_dedup_transform.py",
                 "test_fuzzy_workflow.py", "test_interrupt_resume.py", "test_terminal.py", "test_semdedup_resume.py",
                 "test_embedding_runtimes.py", "test_s3_faults.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))  # stable: the rest keep their order


def pytest_configure(config: pytest.Config) -> None:
    """A test run stopped with SIGTERM (CI's time limit, ``timeout``) unwinds as Ctrl-C does: the
    fixtures' teardown stops the clusters, worker pools and servers the run started, which run in
    sessions of their own and would otherwise be left running. (In each xdist worker too.)"""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)


@pytest.fixture(autouse=True)
def logging_as_before() -> Iterator[None]:
    """Each test starts with the logging set-up the one before it found: a command run in this process
    (``main([...])``) sets up logging for the whole process as a command line should, and a ``--quiet``
    one turned the progress bars off for the tests that ran after it in the same xdist worker."""
    root, package = logging.getLogger(), logging.getLogger("beam_curator")
    saved = (list(root.handlers), list(root.filters), root.level, package.level, logs._worker_level, logs._progress,
             os.environ.get(logs.WORKER_LEVEL_VARIABLE))
    yield
    handlers, filters, root_level, package_level, logs._worker_level, logs._progress, variable = saved
    root.handlers[:], root.filters[:] = handlers, filters
    root.setLevel(root_level)
    package.setLevel(package_level)
    if variable is None:
        os.environ.pop(logs.WORKER_LEVEL_VARIABLE, None)
    else:
        os.environ[logs.WORKER_LEVEL_VARIABLE] = variable


@pytest.fixture(scope="session")
def worker_pythonpath() -> Iterator[None]:
    """Workers started by local multi-processing inherit this process's
    environment; pytest puts this folder on ``sys.path`` only, so put it on
    ``PYTHONPATH`` too for them to import ``stages_for_tests``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
        yield


@pytest.fixture(scope="session")
def worker_pool() -> Iterator[WorkerPool]:
    """A Beam worker pool in its own process group, torn down at session end."""
    with WorkerPool(pythonpath=[str(TESTS_DIR)]) as pool:
        yield pool


@pytest.fixture(scope="session")
def dask_cluster(worker_pythonpath: None) -> Iterator[object]:
    """A dask LocalCluster of two single-threaded worker processes for the
    session; its workers start with the test folder and ``scripts`` on
    ``PYTHONPATH``, so that drivers in other processes can use it too."""
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_DIR / "scripts"), os.environ["PYTHONPATH"]]))
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with cluster:
        yield cluster


@pytest.fixture(params=["local-multiprocess", "dask", "portable"])
def worker_runner(request: pytest.FixtureRequest) -> dict[str, object]:
    """Settings of a runner whose stages run in processes other than the
    driver (worker processes, a dask cluster, an EXTERNAL worker pool), one
    per parameter: the deduplication workflows must list the ids the local
    runner lists on each. Only the fixture a parameter needs is started."""
    if request.param == "local-multiprocess":
        request.getfixturevalue("worker_pythonpath")
        return {"runner": "local-multiprocess", "num_workers": 2}
    if request.param == "dask":
        return {"runner": "dask", "dask_address": request.getfixturevalue("dask_cluster").scheduler_address}
    return {"runner": "portable", **request.getfixturevalue("worker_pool").settings()}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real S3 endpoint (S3Proxy on a folder) for the session; tests that kill
    it start it again before they end (``S3Server.start``)."""
    pytest.importorskip("s3fs", reason="the s3 extra is not installed")
    from s3_server import S3Server, S3ServerUnavailable

    server = S3Server(tmp_path_factory.mktemp("s3proxy") / "root")
    try:
        server.start()
    except S3ServerUnavailable as why:
        pytest.skip(str(why))
    yield server
    server.kill()


@pytest.fixture
def s3_bucket(s3_server: object, request: pytest.FixtureRequest) -> str:
    """A fresh bucket for one test, named after it: ``s3://<name>``."""
    import re

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-") + f"-{os.getpid() % 10000}"
    return s3_server.make_bucket(name)
