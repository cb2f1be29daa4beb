"""Running one chain where no Beam job reports metrics: on Dask, whose Beam
runner reports none, and on the in-process runner, which runs no Beam job
(it keeps the stages' counters itself).

The summary is counted in the driver instead: pending and skipped come from
the listing made there before the run, completed and incomplete from the
checkpoint after it (``counted_in_checkpoint``). Each chain runs on its own, one after another (see
``run_in_order``).
"""

from __future__ import annotations

import os
import time
from typing import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_curator.running.in_process import run_in_process
from beam_curator.running.progress import progress_view, watching
from beam_curator.running.summary import RunSummary, counted_in_checkpoint
from beam_curator.runners.dask import run_on_dask
from beam_curator.stages.lineage import source_key
from beam_curator.transforms import CuratorStages

# Lists a chain's partitions (``CuratorStages.listing``) and returns what runs them, which returns the
# stages' counters where it has them.
Engine = Callable[[str, CuratorStages], Callable[[], dict[str, int]]]


def on_dask(options: PipelineOptions) -> Engine:
    """The chain as a Beam pipeline of its own on Dask; applying it lists its partitions."""

    def prepare(name: str, transform: CuratorStages) -> Callable[[], dict[str, int]]:
        beam_pipeline = beam.Pipeline(options=options)
        _ = beam_pipeline | name >> transform
        store = transform.store

        def run() -> dict[str, int]:
            run_on_dask(beam_pipeline, os.path.dirname(store.metadata_dir) if store is not None else None)
            return {}

        return run

    return prepare


def in_process(name: str, transform: CuratorStages) -> Callable[[], dict[str, int]]:
    """The chain run in this process (``beam_curator.running.in_process``)."""
    transform.list_pending(name)
    return lambda: run_in_process(transform)


def run_without_metrics(name: str, transform: CuratorStages, folder: str, engine: Engine,
                        shown: bool) -> RunSummary:
    """Run ``transform`` (built with ``list_in_driver``, its stages recording
    progress in ``folder``) as the chain ``name`` on ``engine`` and count its
    summary in the driver. Nothing pending: nothing to start."""
    run = engine(name, transform)
    with watching([progress_view(name, transform, folder)], shown):
        started = time.monotonic()
        listing, store = transform.listing, transform.store
        counters = run() if listing.pending else {}
        summary = RunSummary(partitions_pending=len(listing.pending), partitions_skipped=listing.skipped,
                             partitions_changed=listing.changed, counters=counters,
                             seconds=time.monotonic() - started)
        if store is None:
            return summary
        return counted_in_checkpoint(summary, {source_key(task) for task in listing.pending}, store)
