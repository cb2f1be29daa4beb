"""Running a Beam pipeline on Dask: a scheduler you name, or a local cluster started for the run.

Beam's ``DaskRunner`` connects a ``distributed.Client`` to
``--dask_client_address`` and, without one, starts a default cluster it never
closes. Here, without an address, a ``LocalCluster`` of
``--dask_local_workers`` single-threaded worker processes is started on the
first run and kept for the process's later runs, and the client is closed in
every case.

What the DaskRunner does differently from Beam's other runners, and why
``CuratorStages`` lists source partitions in the driver on it: it turns the
pipeline into a ``dask.bag``, one bag partition per Beam bundle. The bag of a
``Create`` is cut into partitions by ``--dask_partition_size``; ``Reshuffle``
is dropped, so one root element would keep every source partition in one
bag partition, processed stage after stage and marked only at the end. With
the partitions created in the driver, one per bag partition (the default
partition size here is 1), every partition runs its stages as its own dask
tasks and is marked as soon as its sink has written. Each bag partition is a
bundle: stages are set up and torn down per bundle, so a larger
``--dask_partition_size`` saves set-up at the cost of coarser marks
(``RunInference`` keeps its model between bundles of a worker process). The runner reports no metrics: ``Pipeline.run`` counts from the
listing and the checkpoint instead.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_curator.checkpoint import registry
from beam_curator.logs import silence_library_noise, verbose

logger = logging.getLogger(__name__)

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


class LocalDaskClusterOptions(PipelineOptions):
    """The one flag Beam's ``DaskOptions`` lacks: the size of a cluster started for the run."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument(
            "--dask_local_workers", type=int, default=None,
            help="Worker processes of the LocalCluster started when no --dask_client_address is given "
                 "(default: one per CPU).",
        )


def is_dask(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__
    return bool(name) and name.rsplit(".", 1)[-1] == "DaskRunner"


def dask_flags(dask_address: str | None, num_workers: int | None) -> list[str]:
    """Beam flags for the ``dask`` preset."""
    flags = [f"--runner={DASK_RUNNER}"]
    if dask_address:
        if num_workers is not None:
            raise ValueError(
                "num_workers sizes the LocalCluster started when no dask_address is given; a running "
                f"scheduler ({dask_address}) has the workers it has: drop one of the two"
            )
        return [*flags, f"--dask_client_address={dask_address}"]
    return [*flags, *([f"--dask_local_workers={num_workers}"] if num_workers is not None else [])]


_local_clusters: dict[int | None, Any] = {}  # worker count -> the LocalCluster this process started


def _local_cluster(workers: int | None) -> str:
    """The address of this process's LocalCluster of ``workers`` processes,
    started on first use and kept until the process ends: a workflow runs one
    Beam pipeline per phase, and each would otherwise start and stop a cluster
    (seconds each, and the workers' model loaded again)."""
    from distributed import LocalCluster

    cluster = _local_clusters.get(workers)
    if cluster is None:
        if not _local_clusters:
            atexit.register(close_local_clusters)
        with _quiet_workers():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        _local_clusters[workers] = cluster
        logger.info("started a dask LocalCluster at %s with %d workers (dashboard %s)", cluster.scheduler_address,
                    len(cluster.workers), cluster.dashboard_link)
    return cluster.scheduler_address


@contextmanager
def _quiet_workers() -> Iterator[None]:
    """Worker processes started meanwhile ignore SIGINT (a disposition they
    inherit), so that the terminal's Ctrl-C, sent to the driver's whole
    process group, ends the run through the driver, not with a traceback from
    every worker; and, unless verbose, they log errors only (dask has them
    log their start-up at INFO, and a cancelled task at WARNING)."""
    quiet = {} if verbose() else {"DASK_LOGGING__DISTRIBUTED": "error"}
    saved = {name: os.environ.get(name) for name in quiet}
    os.environ.update(quiet)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# Seconds a worker process may take to exit when its cluster closes. dask gives it 4 (80% of a Nanny's
# default 5 s) and then kills it with a warning; a worker holding a model or Beam's threads often takes
# longer on a busy machine, after every partition is written and marked.
WORKER_EXIT_SECONDS = 60.0


def _closing_quietly() -> None:
    """In a process whose cluster is closing after the run: dask's reports of
    the connections that close with it are routine (a worker's heartbeat that
    meets the scheduler's closed stream logs an ERROR with a traceback)."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


async def _close_workers(cluster: Any) -> None:
    if not verbose():
        from distributed import Client

        _closing_quietly()
        async with Client(cluster, asynchronous=True) as client:
            await client.run(_closing_quietly)
    await asyncio.gather(*(worker.close(timeout=WORKER_EXIT_SECONDS) for worker in list(cluster.workers.values())))


def close_local_clusters() -> None:
    """Close the LocalClusters this process started (done at exit; a notebook may want it sooner),
    each worker given ``WORKER_EXIT_SECONDS`` to exit before dask kills it (and says so)."""
    while _local_clusters:
        _, cluster = _local_clusters.popitem()
        try:
            cluster.sync(_close_workers, cluster)
        except OSError as error:  # dask's CommClosedError: a SIGTERM to the process group ended the workers
            logger.debug("the dask workers were gone before their cluster closed: %s", error)
        cluster.close()


@contextmanager
def _scheduler(options: PipelineOptions) -> Iterator[None]:
    """The scheduler the options name, or this process's LocalCluster; its
    workers keep other libraries' notes off the terminal, as the driver does."""
    from apache_beam.runners.dask.dask_runner import DaskOptions
    from distributed import Client

    silence_library_noise()  # importing distributed set its loggers to INFO
    dask_options = options.view_as(DaskOptions)
    named = bool(dask_options.address or dask_options.scheduler_file)
    if not named:
        dask_options.address = _local_cluster(options.view_as(LocalDaskClusterOptions).dask_local_workers)
    try:
        with Client(address=dask_options.address, scheduler_file=dask_options.scheduler_file) as client:
            client.run(silence_library_noise)
        yield
    finally:
        if not named:
            dask_options.address = None


def _run_bundle(items, invoker_args, invoker_kwargs, receivers) -> list:
    """One bag partition through one DoFn, as one bundle, keeping what
    ``finish_bundle`` emits. Beam's DaskRunner before 2.78 collects a bundle's
    outputs before calling ``finish_bundle``, which loses everything a DoFn
    buffers and flushes there: the last batch of every ``BatchElements``
    (so of ``RunInference``), whatever the pipeline's data."""
    from apache_beam.runners.common import DoFnInvoker

    invoker = DoFnInvoker.create_invoker(*invoker_args, **invoker_kwargs)
    invoker.invoke_setup()
    invoker.invoke_start_bundle()
    for item in items:
        invoker.invoke_process(item)
    invoker.invoke_finish_bundle()
    invoker.invoke_teardown()
    return [output.value for output in receivers.values]


@contextmanager
def _bundles_keep_finish_outputs() -> Iterator[None]:
    """While a pipeline is translated, ParDos run their bundles through ``_run_bundle``."""
    from apache_beam.runners.dask import transform_evaluator

    beams_own = transform_evaluator.apply_dofn_to_bundle
    transform_evaluator.apply_dofn_to_bundle = _run_bundle
    try:
        yield
    finally:
        transform_evaluator.apply_dofn_to_bundle = beams_own


def run_on_dask(pipeline: beam.Pipeline, checkpoint_folder: str | None = None) -> None:
    """Run ``pipeline`` (built with DaskRunner options) to the end, raising
    the first task error; unless told otherwise, one created element per bag
    partition (see the module docstring). After a run that succeeded, the
    workers close their writers of ``checkpoint_folder``: they outlive the
    run on a standing cluster, and an open writer counts as a live run (a
    checkpoint reset would refuse)."""
    from apache_beam.runners.dask.dask_runner import DaskOptions

    bags = pipeline.options.view_as(DaskOptions)
    if not (bags.partition_size or bags.npartitions):
        bags.partition_size = 1
    with _scheduler(pipeline.options):
        with _bundles_keep_finish_outputs():
            result = pipeline.run()  # translates to dask bags and submits them
        try:
            result.wait_until_finish()
            if checkpoint_folder is not None:
                result.client.run(registry.close_below, checkpoint_folder)
        finally:
            result.client.close()
