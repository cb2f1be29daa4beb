"""Running one chain on Dask, whose Beam runner reports no metrics.

Its summary is counted in the driver instead: pending and skipped come from
the listing made there before the run, completed from the checkpoint after
it, and every pending partition the checkpoint does not hold counts as
incomplete. Each chain runs as a Beam pipeline of its own (see
``run_in_order``).
"""

from __future__ import annotations

import os
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_curator.run_progress import progress_view, watching
from beam_curator.run_summary import RunSummary
from beam_curator.runners.dask import run_on_dask
from beam_curator.stages.lineage import source_key
from beam_curator.transforms import CuratorStages


def run_without_metrics(name: str, transform: CuratorStages, folder: str, options: PipelineOptions,
                        shown: bool) -> RunSummary:
    """Run ``transform`` (built with ``list_in_driver``, its workers recording
    progress in ``folder``) as the chain ``name`` on Dask and count its
    summary in the driver. Nothing pending: nothing to start."""
    beam_pipeline = beam.Pipeline(options=options)
    _ = beam_pipeline | name >> transform
    with watching([progress_view(name, transform, folder)], shown):
        started = time.monotonic()
        listing, store = transform.listing, transform.store
        if listing.pending:
            run_on_dask(beam_pipeline, os.path.dirname(store.metadata_dir) if store is not None else None)
        pending = {source_key(task) for task in listing.pending}
        completed = len(pending & store.completed()) if store is not None else 0
        return RunSummary(
            partitions_pending=len(pending),
            partitions_skipped=listing.skipped,
            partitions_completed=completed,
            partitions_changed=listing.changed,
            partitions_incomplete=len(pending) - completed if store is not None else 0,
            seconds=time.monotonic() - started,
        )
