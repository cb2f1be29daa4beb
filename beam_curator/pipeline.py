"""``Pipeline``: build a list of stages and run it on a Beam runner.

``run_in_order`` checks the steps, builds them into one Beam pipeline and
runs it; what a run did (``running.summary``), its progress bar and worker
watch (``running.progress``), and the runs that report no Beam metrics
(Dask's, and the in-process runner's: ``running.without_metrics``), live in
``beam_curator.running``.
"""

from __future__ import annotations

import logging
import signal
import time
from contextlib import contextmanager
from typing import Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_curator.checkpoint import open_store
from beam_curator.errors import RunInterrupted, interrupted
from beam_curator.interrupts import reclaim_stops, stop_signal, stopped, stops_unwind_runs
from beam_curator.logs import progress_shown, silence_library_noise, unwrap_errors, verbose
from beam_curator.runners import pipeline_options
from beam_curator.runners.dask import is_dask
from beam_curator.runners.flink_runner import flink_run_jobs
from beam_curator.runners.options import IN_PROCESS
from beam_curator.runners.services import adopt_job_servers, end_orphans
from beam_curator.running.in_process import check_runs_in_process
from beam_curator.running.progress import progress_folders, progress_view, start_timeout_for, wait_watched, watching
from beam_curator.running.summary import RunSummary, counted_in_checkpoint, summary_from_metrics
from beam_curator.running.without_metrics import Engine, in_process, on_dask, run_without_metrics
from beam_curator.stages import ProcessingStage
from beam_curator.stages.base import flatten_stages
from beam_curator.transforms import CuratorStages, PipelineDefinitionError, locate_source_and_sink
from beam_curator.transforms.after_complete import AfterComplete
from beam_curator.transforms.progress import read_pending_keys, remove_abandoned_progress
from beam_curator.transforms.refusals import PipelineChangedError, check_changed_pipeline
from beam_curator.transforms.stateful_completion import check_completion, runner_flags

__all__ = ["Pipeline", "PipelineChangedError", "RunSummary", "run_in_order"]

logger = logging.getLogger(__name__)


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
    run its partitions one after another. The in-process runner runs each
    step after the one before, without Beam (``beam_curator.running.in_process``).
    Settings as in :meth:`Pipeline.run`.
    """
    unchecked = [pipeline.name for pipeline, checkpoint in steps[:-1] if not checkpoint]
    if unchecked or len({pipeline.name for pipeline, _ in steps}) < len(steps):
        raise PipelineDefinitionError(
            f"steps run in order need distinct names and a checkpoint each but the last (without one: {unchecked})"
        )
    check_changed_pipeline(changed_pipeline)
    check_completion(completion, runner)
    options = pipeline_options(runner, [*runner_flags(completion, runner, beam_args), *(beam_args or [])],
                               **runner_settings)
    if runner == IN_PROCESS:
        for pipeline, _ in steps:
            check_runs_in_process(pipeline.name, flatten_stages(list(pipeline.stages)))
    silence_library_noise()
    with stops_unwind_runs(), _reported(steps, map_size), _writers_closed(steps):
        return _run_steps(steps, runner, options, progress, worker_start_timeout, map_size, completion,
                          changed_pipeline, runner_settings)


@contextmanager
def _reported(steps: list[tuple[Pipeline, str | None]], map_size: int) -> Iterator[None]:
    """Errors as the user needs them, from wherever they were raised: a Ctrl-C
    as ``RunInterrupted`` saying what is kept, and an error about input or
    settings raised inside a Beam stage (in this process or a worker's, which
    Beam wraps) as that same ``CuratorError``, its message without Beam's step
    notes (``logs.unwrap_errors``). The original stays attached (``__cause__``) when logging is verbose."""
    try:
        with unwrap_errors():
            yield
    except BaseException as error:
        if interrupted(error):
            how = stop_signal() or signal.SIGINT
            raise RunInterrupted(_interrupted(steps, map_size, how), how) from (error if verbose() else None)
        raise


@contextmanager
def _writers_closed(steps: list[tuple[Pipeline, str | None]]) -> Iterator[None]:
    """Once a run has ended or failed, this process lets go of the checkpoints it wrote
    (``close_writer``). Not after a stop: the runner's threads may still be marking what they
    finished as the stop unwinds, and the next run in this process closes the writer first."""
    try:
        yield
    except BaseException as error:
        if not interrupted(error):
            _close_writers(steps)
        raise
    _close_writers(steps)


def _close_writers(steps: list[tuple[Pipeline, str | None]]) -> None:
    for _, checkpoint in steps:
        if checkpoint is not None:
            open_store(checkpoint).close_writer()


def _interrupted(steps: list[tuple[Pipeline, str | None]], map_size: int, how: int) -> str:
    """What a stopped run keeps: the partitions its checkpoints record as complete."""
    kept = []
    for pipeline, checkpoint in steps:
        if checkpoint is None:
            kept.append(f"{pipeline.name!r} has no checkpoint and starts over")
            continue
        try:
            kept.append(f"{len(open_store(checkpoint, map_size).completed())} partitions of {pipeline.name!r} complete")
        except Exception:  # an account of the kept work must not hide the interrupt
            kept.append(f"{pipeline.name!r}'s complete partitions kept in {checkpoint}")
    return f"{stopped(how)}; {', '.join(kept)}: rerun the same command to resume"


def _run_steps(
    steps: list[tuple[Pipeline, str | None]], runner_name: str | None, options: PipelineOptions, progress: bool | None,
    worker_start_timeout: float | None, map_size: int, completion: str, changed_pipeline: str | None,
    runner_settings: dict[str, object],
) -> list[RunSummary]:
    shown = progress_shown() if progress is None else progress
    end_orphans()  # what a SIGKILLed run left: its job servers, clusters, worker pools
    remove_abandoned_progress([checkpoint for _, checkpoint in steps])  # and its progress folders
    with progress_folders([checkpoint for _, checkpoint in steps]) as folders:
        if runner_name == IN_PROCESS:
            return _run_each_alone(steps, folders, in_process, shown, map_size, completion, changed_pipeline)
        if is_dask(options):
            check_completion(completion, "dask")  # chosen by beam_args
            return _run_each_alone(steps, folders, on_dask(options), shown, map_size, completion, changed_pipeline)
        started = time.monotonic()
        beam_pipeline = beam.Pipeline(options=options)
        views, transforms, previous = [], [], None
        for (pipeline, checkpoint), folder in zip(steps, folders):
            transform = CuratorStages(pipeline.stages, checkpoint, map_size=map_size, progress_folder=folder,
                                      completion=completion, changed_pipeline=changed_pipeline)
            start = beam_pipeline if previous is None else (
                beam_pipeline | f"{pipeline.name}-waits" >> AfterComplete(previous, pipeline.name)
            )
            _ = start | pipeline.name >> transform
            views.append(progress_view(pipeline.name, transform, folder))
            transforms.append(transform)
            previous = transform
        start_timeout = start_timeout_for(runner_settings, steps[0][1], worker_start_timeout)
        on_cluster = flink_run_jobs(options)
        with watching(views, shown, start_timeout) as watcher:
            result = beam_pipeline.run()
            reclaim_stops()
            adopt_job_servers()
            wait_watched(result, watcher, runner_settings, on_cluster.cancel if on_cluster else None)
        seconds = time.monotonic() - started
        summaries = []
        for (pipeline, _), transform, folder in zip(steps, transforms, folders):
            if summaries and not summaries[-1].complete:  # AfterComplete gave it no root task
                summaries.append(RunSummary(started=False, seconds=seconds))
                continue
            summary = summary_from_metrics(result, pipeline.name, seconds)
            listed = read_pending_keys(folder)
            if transform.store is not None and listed is not None:
                summary = counted_in_checkpoint(summary, listed, transform.store)
            summaries.append(summary)
            logger.debug("pipeline %s finished: %s", pipeline.name, summary)
    return summaries


def _run_each_alone(
    steps: list[tuple[Pipeline, str | None]], folders: list[str], engine: Engine, shown: bool,
    map_size: int, completion: str, changed_pipeline: str | None,
) -> list[RunSummary]:
    """Each step run on its own by ``engine`` (Dask: as a Beam pipeline of its own; in-process), one
    after another (see ``run_in_order``); every step's refusals are made before the first runs, so
    that a later step's refusal costs no earlier step's work."""
    transforms = [CuratorStages(pipeline.stages, checkpoint, map_size=map_size, progress_folder=folder,
                                list_in_driver=True, completion=completion, changed_pipeline=changed_pipeline)
                  for (pipeline, checkpoint), folder in zip(steps, folders)]
    for (pipeline, _), transform in zip(steps, transforms):
        transform.refuse(pipeline.name)
    summaries: list[RunSummary] = []
    for (pipeline, _), transform, folder in zip(steps, transforms, folders):
        if summaries and not summaries[-1].complete:
            summaries.append(RunSummary(started=False))
            continue
        summaries.append(run_without_metrics(pipeline.name, transform, folder, engine, shown))
        logger.debug("pipeline %s finished: %s", pipeline.name, summaries[-1])
    return summaries
