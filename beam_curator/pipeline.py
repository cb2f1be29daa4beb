"""``Pipeline``: build a list of stages and run it on a Beam runner."""

from __future__ import annotations

import gc
import logging
import os
import re
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineState

from beam_curator.errors import RunInterrupted, interrupted, user_error_in
from beam_curator.logs import progress_shown, silence_library_noise, verbose
from beam_curator.runners import pipeline_options
from beam_curator.runners.dask import is_dask, run_on_dask
from beam_curator.stages import ProcessingStage
from beam_curator.checkpoint import open_store
from beam_curator.stages.base import describe_stages, flatten_stages, pipeline_changes
from beam_curator.stages.io.overlap import check_no_overlap
from beam_curator.stages.io.partitioning import FilePartitioningStage
from beam_curator.stages.io.writer import FileWriterStage
from beam_curator.stages.lineage import source_key
from beam_curator.transforms import CuratorStages, PipelineDefinitionError, locate_source_and_sink
from beam_curator.transforms.after_complete import AfterComplete
from beam_curator.transforms.progress import (
    PROGRESS_DIR,
    ProgressView,
    ProgressWatcher,
    WorkersDidNotStartError,
    forget_progress,
)
from beam_curator.transforms.stage_dofns import NAMESPACE
from beam_curator.transforms.stateful_completion import check_completion, runner_flags

logger = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What a run did, read from Beam's metrics (on Dask, counted in the driver: no task counters)."""

    partitions_pending: int = 0
    partitions_skipped: int = 0
    partitions_completed: int = 0
    partitions_changed: int = 0
    partitions_incomplete: int = 0  # pending but not marked complete after the run (runners without metrics)
    started: bool = True  # False: a step of ``run_in_order`` whose step before did not complete
    counters: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # of the Beam pipeline that ran it (steps of ``run_in_order`` share one)

    @property
    def tasks_failed(self) -> int:
        return sum(value for name, value in self.counters.items() if name.endswith(".failed"))

    def __str__(self) -> str:
        if not self.started:
            return "not started: the step before it did not complete"
        changed = (
            f" ({self.partitions_changed} of them with changed files: see the warnings)" if self.partitions_changed else ""
        )
        return (
            f"{self.partitions_pending} partitions pending, {self.partitions_skipped} skipped as complete{changed}, "
            f"{self.partitions_completed} completed this run, {self.tasks_failed} tasks failed"
            + (f", {self.partitions_incomplete} partitions not completed" if self.partitions_incomplete else "")
            + f" ({self.seconds:.1f} s)"
        )


def _counters(result: beam.runners.runner.PipelineResult, name: str) -> dict[str, int]:
    """The counters of the chain applied as ``name``. Its stages are labelled ``name/NN-stage``;
    Java job servers (Flink, Spark) report the step as the transform's id in the pipeline proto
    instead, ``ref_AppliedPTransform_<label with / as ->_<n>``."""
    proto_id = re.compile(rf"^ref_AppliedPTransform_{re.escape(re.sub(r'[^a-zA-Z0-9_-]+', '-', name))}-\d\d-")
    counters: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        step = counter.key.step
        if not (step.startswith(f"{name}/") or proto_id.match(step)):
            continue
        try:
            value = counter.committed
        except Exception:  # some portable runners only report attempted values
            value = None
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value or counter.attempted or 0)
    return counters


def _wait(result: beam.runners.runner.PipelineResult, watcher: ProgressWatcher, environment: str, config: object) -> None:
    """Wait for the run to end, or raise once the watcher saw no worker start."""
    ended = threading.Event()
    outcome: dict[str, BaseException] = {}

    def wait() -> None:
        try:
            result.wait_until_finish()
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error
        finally:
            ended.set()

    threading.Thread(target=wait, name="wait-until-finish", daemon=True).start()
    try:
        _watch(result, watcher, environment, config, ended)
    except KeyboardInterrupt:  # a job on a cluster must not outlive its driver: cancel it, briefly
        cancel = threading.Thread(target=result.cancel, name="cancel", daemon=True)
        cancel.start()
        cancel.join(5)
        raise
    if "error" in outcome:
        raise outcome["error"]


# States of a job the runner has not started yet (a portable job service's STOPPED: not yet started).
_NOT_YET_RUNNING = (PipelineState.STOPPED, PipelineState.STARTING, PipelineState.PENDING, PipelineState.UNKNOWN)


def _watch(result: beam.runners.runner.PipelineResult, watcher: ProgressWatcher, environment: str, config: object,
           ended: threading.Event) -> None:
    """Poll the job's state until the runner reports it running (the watcher's
    clock starts then), and stop the job once the watcher finds it stalled."""
    running = False
    while not ended.wait(0.5):
        if not running:
            try:
                running = result.state not in _NOT_YET_RUNNING
            except Exception as error:  # a job service that cannot answer now may later: ask again
                logger.debug("job state unknown: %s", error)
            if running:
                watcher.job_running()
        if watcher.stalled:
            threading.Thread(target=result.cancel, name="cancel", daemon=True).start()
            _abandon_local_job()
            raise WorkersDidNotStartError(
                f"no SDK worker started within {watcher.start_timeout:.0f} s of the job running "
                f"({environment} environment {config}); "
                "a worker pool must run workers with an interpreter that has apache_beam and beam_curator: start it "
                "as /path/to/venv/bin/python -m beam_curator.runners.worker_pool --port PORT, check its log, and "
                "check that the address is right"
            )


def _abandon_local_job() -> None:
    """End the embedded job service's thread of a job whose workers never
    started. Its cancel only sets a state: the thread would wait for the
    workers' data forever and keep the interpreter from exiting after the
    error. Marking this process's data channels closed makes it fail within a
    second (Beam checks the flag while it waits; there is no public way)."""
    from apache_beam.runners.worker.data_plane import _GrpcDataChannel

    for channel in gc.get_objects():
        if isinstance(channel, _GrpcDataChannel):
            channel._closed = True


def _run_without_metrics(beam_pipeline: beam.Pipeline, transform: CuratorStages) -> RunSummary:
    """Run on Dask, whose runner reports no metrics: pending and skipped come
    from the listing made in the driver, completed from the checkpoint after
    the run, and every pending partition it does not hold counts as
    incomplete. Nothing pending: nothing to start."""
    started = time.monotonic()
    listing = transform.listing
    if listing.pending:
        store = transform.store
        run_on_dask(beam_pipeline, os.path.dirname(store.metadata_dir) if store is not None else None)
    pending = {source_key(task) for task in listing.pending}
    completed = len(pending & transform.store.completed()) if transform.store is not None else 0
    return RunSummary(
        partitions_pending=len(pending),
        partitions_skipped=listing.skipped,
        partitions_completed=completed,
        partitions_changed=listing.changed,
        partitions_incomplete=len(pending) - completed if transform.store is not None else 0,
        seconds=time.monotonic() - started,
    )


def _progress_folder(checkpoint: str | None) -> str:
    """Where a run's workers record their progress: in the checkpoint folder (which workers elsewhere can reach) if any."""
    if checkpoint:
        return f"{checkpoint.rstrip('/')}/{PROGRESS_DIR}/{uuid.uuid4().hex[:12]}"
    return tempfile.mkdtemp(prefix="beam-curator-progress-")


def _view(name: str, transform: CuratorStages, folder: str) -> ProgressView:
    stages = transform.stages
    return ProgressView(folder, name, stages[min(transform.source + 1, transform.sink)].stage_name,
                        stages[transform.sink].stage_name)


def _complete(summary: RunSummary) -> bool:
    return summary.started and not summary.tasks_failed and not summary.partitions_incomplete and (
        summary.partitions_completed >= summary.partitions_pending
    )


class Pipeline:
    """An ordered list of stages, run as one Beam pipeline."""

    def __init__(self, name: str, description: str = "", stages: list[ProcessingStage] | None = None) -> None:
        self.name = name
        self.description = description
        self.stages: list[ProcessingStage] = list(stages or [])

    def add_stage(self, stage: ProcessingStage) -> "Pipeline":
        self.stages.append(stage)
        return self

    def describe(self) -> str:
        stages = flatten_stages(self.stages)
        source, sink = locate_source_and_sink(stages)
        roles = {source: " (source)", sink: " (sink)"}
        lines = [f"Pipeline {self.name}: {self.description}".rstrip(": ")]
        lines += [f"  {i:02d} {stage.stage_name}{roles.get(i, '')}" for i, stage in enumerate(stages)]
        return "\n".join(lines)

    def run(
        self,
        checkpoint_path: str | None = None,
        runner: str | None = "local",
        *,
        beam_args: list[str] | None = None,
        map_size: int = 1 << 30,
        progress: bool | None = None,
        worker_start_timeout: float | None = 60.0,
        changed_pipeline: str | None = "refuse",
        completion: str = "fused",
        **runner_settings: object,
    ) -> RunSummary:
        """Run to the end; with ``checkpoint_path``, skip complete partitions
        and mark partitions as they finish. ``runner`` is a preset of
        ``beam_curator.runners``; ``beam_args`` are raw Beam flags.

        ``progress`` draws a live bar on a terminal (documents, rate, time
        left, partitions done / pending); None: unless logging was set up
        quiet. A run on an EXTERNAL or PROCESS environment whose workers have
        not started after ``worker_start_timeout`` seconds stops with
        ``WorkersDidNotStartError`` (None: wait forever).

        The checkpoint records the stages and their settings (``describe_stages``).
        A rerun whose pipeline differs while marks exist raises
        ``PipelineChangedError`` naming the change; ``changed_pipeline="keep"``
        keeps the old marks instead (a warning says so) and records the new
        pipeline; None skips the check.

        ``completion`` is where partitions are marked complete: ``"fused"``
        in the sink's DoFn, ``"stateful"`` in a keyed stateful DoFn after it
        (see "Stateful completion" in docs/pipelines.md for when each marks).
        """
        (summary,) = run_in_order(
            [(self, checkpoint_path)], runner, beam_args=beam_args, map_size=map_size, progress=progress,
            worker_start_timeout=worker_start_timeout, changed_pipeline=changed_pipeline, completion=completion,
            **runner_settings,
        )
        return summary


def _check_paths_apart(pipeline: Pipeline, checkpoint: str | None) -> None:
    """A pipeline's writers and checkpoint lie outside what its readers read (see ``check_no_overlap``)."""
    stages = flatten_stages(pipeline.stages)
    reads = {"file_paths" if index == 0 else f"file_paths of reader {index + 1}": stage.file_paths
             for index, stage in enumerate(s for s in stages if isinstance(s, FilePartitioningStage))}
    writes = {f"{type(stage).__name__} path": stage.path for stage in stages if isinstance(stage, FileWriterStage)}
    check_no_overlap(reads, {**writes, "checkpoint_path": checkpoint})


class PipelineChangedError(PipelineDefinitionError):
    """A checkpoint's marks were made by a pipeline other than the one now run on it."""


def _check_same_pipeline(pipeline: Pipeline, checkpoint: str, keep: bool, map_size: int) -> None:
    """Marks made by other stages or settings would skip partitions that the pipeline as it is now
    never produced: refuse (or, told to keep them, warn), then record this pipeline."""
    store = open_store(checkpoint, map_size)
    store.check_writable()  # its own error names the folder, before anything is written there
    now, before = describe_stages(pipeline.stages), store.recorded_pipeline()
    if before == now:
        return
    change = pipeline_changes(before, now) if before is not None else ""
    if change and store.completed():
        if not keep:
            raise PipelineChangedError(
                f"pipeline {pipeline.name!r} changed since its checkpoint {checkpoint} was written ({change}). "
                f"Its marks would skip partitions this pipeline never produced: start afresh with "
                f"`beam-curator checkpoint reset {checkpoint}` or a new checkpoint path, or keep the old marks "
                "with changed_pipeline='keep'"
            )
        logger.warning("pipeline %r changed since checkpoint %s was written (%s); keeping its marks as asked",
                       pipeline.name, checkpoint, change)
    store.record_pipeline(now)


def run_in_order(
    steps: list[tuple[Pipeline, str | None]],
    runner: str | None = "local",
    *,
    beam_args: list[str] | None = None,
    map_size: int = 1 << 30,
    progress: bool | None = None,
    worker_start_timeout: float | None = 60.0,
    changed_pipeline: str | None = "refuse",
    completion: str = "fused",
    **runner_settings: object,
) -> list[RunSummary]:
    """Run pipelines one after another, each with its checkpoint path, as
    one Beam pipeline: each starts once every partition of the one before
    is complete (:class:`~beam_curator.transforms.after_complete.AfterComplete`),
    and not at all if one is not (a task failed), which its summary then
    shows. Saves a pipeline start per step. Every step but the last needs a
    checkpoint, which is how the next one knows it is complete. On Dask each
    step runs as a Beam pipeline of its own: its runner gives the root task's
    outputs one bag partition, so a step started from inside a pipeline would
    run its partitions one after another. Settings as in :meth:`Pipeline.run`.
    """
    unchecked = [pipeline.name for pipeline, checkpoint in steps[:-1] if not checkpoint]
    if unchecked or len({pipeline.name for pipeline, _ in steps}) < len(steps):
        raise PipelineDefinitionError(
            f"steps run in order need distinct names and a checkpoint each but the last (without one: {unchecked})"
        )
    if changed_pipeline not in ("refuse", "keep", None):
        raise ValueError(f"changed_pipeline must be 'refuse', 'keep' or None, not {changed_pipeline!r}")
    check_completion(completion, runner)
    for pipeline, checkpoint in steps:
        _check_paths_apart(pipeline, checkpoint)
        if checkpoint and changed_pipeline:
            _check_same_pipeline(pipeline, checkpoint, changed_pipeline == "keep", map_size)
    options = pipeline_options(runner, [*runner_flags(completion, runner, beam_args), *(beam_args or [])],
                               **runner_settings)
    silence_library_noise()
    with _reported(steps, map_size):
        return _run_steps(steps, options, progress, worker_start_timeout, map_size, completion, runner_settings)


@contextmanager
def _reported(steps: list[tuple[Pipeline, str | None]], map_size: int) -> Iterator[None]:
    """Errors as the user needs them, from wherever they were raised: a Ctrl-C
    as ``RunInterrupted`` saying what is kept, and an error about input or
    settings raised inside a Beam stage (in this process or a worker's, which
    Beam wraps) as that same ``CuratorError``, its message without Beam's step
    notes. The original stays attached (``__cause__``) when logging is verbose."""
    try:
        yield
    except BaseException as error:
        if interrupted(error):
            raise RunInterrupted(_interrupted(steps, map_size)) from (error if verbose() else None)
        found = user_error_in(error) if isinstance(error, Exception) else None
        if found is None or (type(found) is type(error) and str(found) == str(error)):
            raise  # not the package's error, or already as the user needs it (raised in this process, unwrapped)
        raise found from (error if verbose() else None)


def _interrupted(steps: list[tuple[Pipeline, str | None]], map_size: int) -> str:
    """What an interrupted run keeps: the partitions its checkpoints record as complete."""
    kept = []
    for pipeline, checkpoint in steps:
        if checkpoint is None:
            kept.append(f"{pipeline.name!r} has no checkpoint and starts over")
            continue
        try:
            kept.append(f"{len(open_store(checkpoint, map_size).completed())} partitions of {pipeline.name!r} complete")
        except Exception:  # an account of the kept work must not hide the interrupt
            kept.append(f"{pipeline.name!r}'s complete partitions kept in {checkpoint}")
    return f"interrupted; {', '.join(kept)}: rerun the same command to resume"


def _run_steps(
    steps: list[tuple[Pipeline, str | None]], options: object, progress: bool | None,
    worker_start_timeout: float | None, map_size: int, completion: str, runner_settings: dict[str, object],
) -> list[RunSummary]:
    shown = progress_shown() if progress is None else progress
    if is_dask(options):
        check_completion(completion, "dask")  # chosen by beam_args
        summaries: list[RunSummary] = []
        for pipeline, checkpoint in steps:
            if summaries and not _complete(summaries[-1]):
                summaries.append(RunSummary(started=False))
                continue
            beam_pipeline = beam.Pipeline(options=options)
            folder = _progress_folder(checkpoint)
            transform = CuratorStages(pipeline.stages, checkpoint, map_size=map_size, progress_folder=folder,
                                      list_in_driver=True, completion=completion)
            _ = beam_pipeline | pipeline.name >> transform
            try:
                with ProgressWatcher([_view(pipeline.name, transform, folder)], shown) as watcher:
                    with watcher.logging_redirected():
                        summaries.append(_run_without_metrics(beam_pipeline, transform))
            finally:
                forget_progress(folder)
            logger.debug("pipeline %s finished: %s", pipeline.name, summaries[-1])
        return summaries
    folders = [_progress_folder(checkpoint) for _, checkpoint in steps]
    started = time.monotonic()
    beam_pipeline = beam.Pipeline(options=options)
    views, previous = [], None
    for (pipeline, checkpoint), folder in zip(steps, folders):
        transform = CuratorStages(pipeline.stages, checkpoint, map_size=map_size, progress_folder=folder,
                                  completion=completion)
        start = beam_pipeline if previous is None else (
            beam_pipeline | f"{pipeline.name}-waits" >> AfterComplete(previous, pipeline.name)
        )
        _ = start | pipeline.name >> transform
        views.append(_view(pipeline.name, transform, folder))
        previous = transform
    environment = str(runner_settings.get("environment_type") or "").upper()
    watched = environment in ("EXTERNAL", "PROCESS") and bool(
        steps[0][1] or str(runner_settings.get("environment_config", "")).startswith(("localhost:", "127.0.0.1:"))
    )  # only then can the driver see the workers' files
    watcher = ProgressWatcher(views, shown, start_timeout=worker_start_timeout if watched else None)
    try:
        with watcher, watcher.logging_redirected():
            result = beam_pipeline.run()
            _wait(result, watcher, environment, runner_settings.get("environment_config"))
    finally:
        for folder in folders:
            forget_progress(folder)
    seconds = time.monotonic() - started
    summaries = []
    for pipeline, _ in steps:
        if summaries and not _complete(summaries[-1]):  # AfterComplete gave it no root task
            summaries.append(RunSummary(started=False, seconds=seconds))
            continue
        counters = _counters(result, pipeline.name)
        summaries.append(RunSummary(
            partitions_pending=counters.get("partitions_pending", 0),
            partitions_skipped=counters.get("partitions_skipped", 0),
            partitions_completed=counters.get("partitions_completed", 0),
            partitions_changed=counters.get("partitions_changed", 0),
            counters=counters,
            seconds=seconds,
        ))
        logger.debug("pipeline %s finished: %s", pipeline.name, summaries[-1])
    return summaries
