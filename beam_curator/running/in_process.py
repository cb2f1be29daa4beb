"""The in-process runner: a chain of stages run in this thread, without Beam.

On small inputs Beam's fixed costs outweigh the work. Building a pipeline,
translating it, and making a bundle processor per bundle (its DoFns
unpickled) take about half a second per chain, and a semantic dedup runs five
chains: at 10,000 documents with the static model that is more than the
embedding, clustering and comparing together. ``runner="in-process"`` runs
the same chains through the same DoFns (``transforms.stage_dofns``: lineage
ids, credits, checkpoint marks, progress), so a run is resumable as on any
runner, and its checkpoint is the one every runner reads and writes.

Partitions run one after another, each through every stage before the next
starts (so memory holds one partition's tasks), and each is one bundle: its
marks are flushed when it ends. The DoFns' Beam counters are kept as a
Beam worker keeps them, so the run's summary counts what it does on any
runner (tasks failed and filtered, items per stage). Stages with ``process_batch`` get the
partition's tasks in lists of their ``batch_size``. A stage written as a Beam
transform (``TransformStage``) runs here only if it also implements
``process``, as ``EmbeddingStage`` does.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterator

from apache_beam.metrics.execution import MetricsContainer
from apache_beam.runners.worker import statesampler
from apache_beam.utils.counters import CounterFactory

from beam_curator.runners.options import IN_PROCESS
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import Task
from beam_curator.transforms import CuratorStages, PipelineDefinitionError
from beam_curator.transforms.stage_dofns import BatchStageDoFn, StageDoFn
from beam_curator.transforms.transform_stage import TransformStage


def check_runs_in_process(name: str, stages: list[ProcessingStage]) -> None:
    """Refuse, before anything runs, a chain with a stage that only Beam can run."""
    for stage in stages:
        if isinstance(stage, TransformStage) and type(stage).process is TransformStage.process:
            raise PipelineDefinitionError(
                f"stage {stage.stage_name} of {name!r} is a Beam transform without a `process` of its own, so it "
                f"cannot run on runner {IN_PROCESS!r}; choose a Beam runner (e.g. 'local')"
            )


def run_in_process(transform: CuratorStages) -> dict[str, int]:
    """Run the partitions ``transform.list_pending`` listed through the stages after the source;
    return the counters the DoFns kept (by name, as Beam's metrics would report them)."""
    metrics = MetricsContainer(IN_PROCESS)
    # Beam's counters count into the container of the thread's current state; none outside a Beam worker.
    tracker = statesampler.StateSampler(IN_PROCESS, CounterFactory())
    outer = statesampler.get_current_tracker()
    statesampler.set_current_tracker(tracker)
    try:
        with tracker.scoped_state(IN_PROCESS, "process", metrics_container=metrics):
            _run(transform)
    finally:
        statesampler.set_current_tracker(outer)
    return {key.metric.name: value for key, value in metrics.get_cumulative().counters.items()}


def _run(transform: CuratorStages) -> None:
    dofns = []
    try:
        for index, stage in enumerate(transform.stages[1:], start=1):
            kind = BatchStageDoFn if stage.uses_batches() else StageDoFn
            dofn = kind(stage, transform.store if index <= transform.sink else None, index == transform.sink,
                        transform.progress_folder)
            dofn.setup()
            dofns.append(dofn)
        for partition in transform.listing.pending:
            tasks: Iterator[Task] = iter([partition])
            for dofn in dofns:
                tasks = _through(dofn, tasks)
            for _ in tasks:  # what leaves the last stage was written by the sink
                pass
            for dofn in dofns:
                dofn.finish_bundle()
    finally:
        for dofn in reversed(dofns):
            dofn.teardown()


def _through(dofn: StageDoFn | BatchStageDoFn, tasks: Iterator[Task]) -> Iterator[Task]:
    if isinstance(dofn, BatchStageDoFn):
        while batch := list(islice(tasks, dofn.stage.batch_size)):
            yield from dofn.process(batch)
    else:
        for task in tasks:
            yield from dofn.process(task)
