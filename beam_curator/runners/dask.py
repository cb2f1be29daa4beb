"""Running a Beam pipeline on Dask: a scheduler you name, or a local cluster started for the run.

Beam's ``DaskRunner`` connects a ``distributed.Client`` to
``--dask_client_address`` and, without one, starts a default cluster it never
closes. Here, without an address, a ``LocalCluster`` of
``--dask_local_workers`` single-threaded worker processes is started before
the run and closed after it, and the client is closed in every case.

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

import logging
from contextlib import contextmanager
from typing import Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_curator.checkpoint import registry

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


@contextmanager
def _scheduler(options: PipelineOptions) -> Iterator[None]:
    """A LocalCluster for the run when the options name no scheduler."""
    from apache_beam.runners.dask.dask_runner import DaskOptions
    from distributed import LocalCluster

    dask_options = options.view_as(DaskOptions)
    if dask_options.address or dask_options.scheduler_file:
        yield
        return
    workers = options.view_as(LocalDaskClusterOptions).dask_local_workers
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        logger.info("started a dask LocalCluster at %s with %d workers (dashboard %s)", cluster.scheduler_address,
                    len(cluster.workers), cluster.dashboard_link)
        dask_options.address = cluster.scheduler_address
        try:
            yield
        finally:
            dask_options.address = None


def _run_bundle(items, invoker_args, invoker_kwargs, receivers) -> list:
    """One bag partition through one DoFn, as one bundle, keeping what
    ``finish_bundle`` emits. Beam's DaskRunner (2.77) collects a bundle's
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
