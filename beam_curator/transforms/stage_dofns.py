"""Beam DoFns that run stages and report terminal tasks to the checkpoint.

With ``completion="fused"`` (the default) the completion step lives inside
the DoFns (filters where they happen, sink writes right after the sink has
made its output durable), so it is fused with the work and marks partitions
as they finish. A GroupByKey downstream of the sink would only run once all
upstream work is done, marking nothing until the end of a batch run. With
``completion="stateful"`` the same DoFns emit each terminal task's credits on
the ``CREDITS`` output instead, for
:class:`~beam_curator.transforms.stateful_completion.CompleteByState`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Iterator, List, Mapping

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from beam_curator.checkpoint import CheckpointStore
from beam_curator.checkpoint.store import OutputRecord
from beam_curator.runners.gpu import pin_worker_gpu
from beam_curator.stages import ProcessingStage
from beam_curator.stages.lineage import StepOutcome, derive, derive_batch, derive_sources, source_key
from beam_curator.stages.resources import Resources
from beam_curator.tasks import EmptyTask, Task
from beam_curator.transforms.progress import ProgressRecorder
from beam_curator.transforms.storage_settings import apply_settings, driver_settings

logger = logging.getLogger(__name__)
NAMESPACE = "beam_curator"
CREDITS = "credits"  # the tagged output of terminal tasks' credits under stateful completion


class Recording(beam.DoFn):
    """What every DoFn that returns credits to the checkpoint shares: the
    driver's fsspec settings (``storage_settings``), the store's writer
    flushed at bundle ends, the progress recorder, and the
    ``partitions_completed`` counter the run's summary reads."""

    def __init__(self, store: CheckpointStore | None = None, progress_folder: str | None = None) -> None:
        self.store = store
        self.progress_folder = progress_folder
        self.progress: ProgressRecorder | None = None
        self.completed = Metrics.counter(NAMESPACE, "partitions_completed")
        self.storage_settings = driver_settings()

    def setup(self) -> None:
        apply_settings(self.storage_settings)
        if self.progress_folder:
            self.progress = ProgressRecorder.for_folder(self.progress_folder)

    def finish_bundle(self) -> None:
        if self.store is not None:
            self.store.flush()
        if self.progress is not None:
            self.progress.write(force=True)  # the driver reads the totals as soon as the run ends

    def teardown(self) -> None:
        self.finish_bundle()

    def _record(
        self, task_id: str, credits: Mapping[str, Fraction], written: list[OutputRecord] | None, inputs: list | None,
    ) -> None:
        """Return a terminal task's credits to the store, counting the partitions that completes."""
        for source in self.store.record(task_id, credits, written):
            self.completed.inc()
            if self.progress is not None:
                self.progress.partition("completed")
            logger.debug("partition %s complete%s", source, f" ({', '.join(inputs)})" if inputs else "")


class _StageDoFn(Recording):
    """Shared life cycle: stage set-up, counters, terminal-task reporting
    (``stateful``: as elements on the ``CREDITS`` output)."""

    def __init__(
        self, stage: ProcessingStage, store: CheckpointStore | None = None, is_sink: bool = False,
        progress_folder: str | None = None, stateful: bool = False,
    ) -> None:
        super().__init__(store, progress_folder)
        self.stage = stage
        self.is_sink = is_sink
        self.stateful = stateful
        name = stage.stage_name
        self.filtered = Metrics.counter(NAMESPACE, f"{name}.filtered")
        self.failed = Metrics.counter(NAMESPACE, f"{name}.failed")
        self.emitted = Metrics.counter(NAMESPACE, f"{name}.emitted")
        self.items_in = Metrics.counter(NAMESPACE, f"{name}.items_in")
        self.items_out = Metrics.counter(NAMESPACE, f"{name}.items_out")

    def setup(self) -> None:
        if Resources.of(self.stage.resources).requires_gpu:
            pin_worker_gpu()
        super().setup()
        self.stage.setup()

    def teardown(self) -> None:
        super().teardown()
        self.stage.teardown()

    def _terminal(self, task: Task, written: list | None = None) -> Iterator[TaggedOutput]:
        if self.store is None or not task._credits:
            return
        if not self.stateful:
            self._record(task.task_id, task._credits, written, task._metadata.get("source_files"))
            return
        for source, share in task._credits.items():
            yield TaggedOutput(CREDITS, (source, (task.task_id, share, written)))

    def _emit(self, outcome: StepOutcome, inputs: list[Task]) -> Iterator[Task | TaggedOutput]:
        items_in, items_out = sum(task.num_items for task in inputs), sum(task.num_items for task in outcome.outputs)
        self.items_in.inc(items_in)
        self.items_out.inc(items_out)
        self.filtered.inc(len(outcome.filtered))
        self.failed.inc(len(outcome.failed))
        self.emitted.inc(len(outcome.outputs))
        report_counts(self.stage)
        if self.progress is not None:
            self.progress.stage(self.stage.stage_name, len(inputs), items_in, items_out, self.stage.unit)
        for task in outcome.filtered:
            yield from self._terminal(task)
        for task in outcome.outputs:
            if self.is_sink:
                yield from self._terminal(task, task._metadata.get("written"))
                task._credits = {}  # stages after the sink must not return it again
            yield task


def report_counts(stage: ProcessingStage) -> None:
    """Add what ``stage`` counted itself (``ProcessingStage.count``) since the last report to the
    Beam counters of the package's namespace, where the run's summary reads them."""
    for name, value in stage.take_counts().items():
        Metrics.counter(NAMESPACE, name).inc(value)


@beam.typehints.with_input_types(Task)
@beam.typehints.with_output_types(Task)
class StageDoFn(_StageDoFn):
    """Runs a stage's ``process`` on each task."""

    def process(self, task: Task) -> Iterator[Task]:
        yield from self._emit(derive(task, self.stage.process(task), self.stage.stage_name), [task])


@beam.typehints.with_input_types(List[Task])
@beam.typehints.with_output_types(Task)
class BatchStageDoFn(_StageDoFn):
    """For stages with ``process_batch``; elements arrive as lists from BatchElements."""

    def process(self, tasks: list[Task]) -> Iterator[Task]:
        yield from self._emit(derive_batch(tasks, self.stage.process_batch(tasks), self.stage.stage_name), tasks)


@beam.typehints.with_input_types(Task)
@beam.typehints.with_output_types(Task)
class SourceDoFn(_StageDoFn):
    """Runs the source stage, names its partitions and drops the complete ones,
    so finished work is never read again.

    ``started`` holds what the files of complete partitions looked like when
    they last started (``Snapshot.inputs``): a complete partition whose files
    changed since is reported (its checkpoint key does not follow content
    unless the reader was given a ``fingerprint``). What pending partitions'
    files look like now is recorded in ``store`` for the next run.
    """

    def __init__(
        self,
        stage: ProcessingStage,
        completed: Iterable[str],
        started: Mapping[str, dict] | None = None,
        store: CheckpointStore | None = None,
        progress_folder: str | None = None,
    ) -> None:
        super().__init__(stage, progress_folder=progress_folder)
        self.done = frozenset(completed)
        self.started = {key: record["files"] for key, record in (started or {}).items() if key in self.done}
        self.inputs_store = store
        self.skipped = Metrics.counter(NAMESPACE, "partitions_skipped")
        self.pending = Metrics.counter(NAMESPACE, "partitions_pending")
        self.changed = Metrics.counter(NAMESPACE, "partitions_changed")
        self.skipped_and_changed = (0, 0)  # of the last listing, for runners without metrics

    def process(self, root: Task) -> Iterator[Task]:
        outcome = derive_sources(root, self.stage.process(root), self.stage.stage_name)
        pending = [task for task in outcome.outputs if source_key(task) not in self.done]
        skipped = len(outcome.outputs) - len(pending)
        self.skipped_and_changed = (skipped, sum(self._report_changes(task) for task in outcome.outputs))
        if self.inputs_store is not None:
            stats = {source_key(task): task._metadata["file_stats"] for task in pending if "file_stats" in task._metadata}
            if stats:
                self.inputs_store.record_inputs(stats)
                self.inputs_store.flush()
        self.skipped.inc(skipped)
        self.pending.inc(len(pending))
        if self.progress is not None:
            self.progress.listed([source_key(task) for task in pending], skipped)
        logger.debug(
            "stage %s: %d partitions pending, %d skipped as complete",
            self.stage.stage_name, len(pending), skipped,
        )
        outcome.outputs = pending
        yield from self._emit(outcome, [root])

    def _report_changes(self, task: Task) -> bool:
        before = self.started.get(source_key(task))
        now = task._metadata.get("file_stats")
        if before is None or now is None or before == now:
            return False
        changed = sorted(path for path in {*before, *now} if before.get(path) != now.get(path))
        self.changed.inc()
        logger.warning(
            "partition %s is complete, but its files changed since it ran: %s. It is not run again; read with "
            "fingerprint='stat' (or 'content') to re-run changed partitions, or reset the checkpoint",
            task.task_id, ", ".join(changed),
        )
        return True


@dataclass
class SourceListing:
    """What the source stage listed: the partitions to run, and how many of
    the others were skipped as complete (``changed``: of those, how many have
    files that changed since they ran)."""

    pending: list[Task]
    skipped: int
    changed: int


def list_sources(source: SourceDoFn) -> SourceListing:
    """Run the source stage in this process (the driver) instead of on a worker."""
    source.setup()
    try:
        pending = list(source.process(EmptyTask()))
    finally:
        source.teardown()
    return SourceListing(pending, *source.skipped_and_changed)
