"""The driver's side of a run's progress: where workers record it, the bar
drawn from it, and waiting for the job while a watcher looks for workers that
never start.

Workers write their totals under a progress folder per chain
(``transforms.progress``); the driver polls those folders while it waits and
removes them once the run ends or is refused.
"""

from __future__ import annotations

import gc
import logging
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping

from apache_beam.runners.runner import PipelineResult, PipelineState

from beam_curator.transforms import CuratorStages
from beam_curator.transforms.progress import (
    ProgressView,
    ProgressWatcher,
    WorkersDidNotStartError,
    forget_progress,
    progress_folder_in,
)

logger = logging.getLogger(__name__)

# States of a job the runner has not started yet (a portable job service's STOPPED: not yet started).
_NOT_YET_RUNNING = (PipelineState.STOPPED, PipelineState.STARTING, PipelineState.PENDING, PipelineState.UNKNOWN)


@contextmanager
def progress_folders(checkpoints: list[str | None]) -> Iterator[list[str]]:
    """A progress folder per chain, one per checkpoint path, removed when the
    context ends however it ends: after the run, and after a refusal while
    the pipeline is built (a chain without a checkpoint has a temporary
    folder, which would otherwise be left behind)."""
    folders = [progress_folder_in(checkpoint) for checkpoint in checkpoints]  # the checkpoint's: workers elsewhere reach it
    try:
        yield folders
    finally:
        for folder in folders:
            forget_progress(folder)


def progress_view(name: str, transform: CuratorStages, folder: str) -> ProgressView:
    """The bar's view of the chain applied as ``name``: documents counted past
    the stage after the source, and through the sink."""
    stages = transform.stages
    return ProgressView(folder, name, stages[min(transform.source + 1, transform.sink)].stage_name,
                        stages[transform.sink].stage_name)


def start_timeout_for(runner_settings: Mapping[str, object], first_checkpoint: str | None,
                      timeout: float | None) -> float | None:
    """How long the watcher waits for a worker to report: ``timeout`` on an
    EXTERNAL or PROCESS environment where the driver can read the workers'
    progress files (in the first chain's checkpoint, or a local temporary
    folder for a worker pool on this machine); otherwise no limit."""
    reachable = bool(first_checkpoint) or str(runner_settings.get("environment_config", "")).startswith(
        ("localhost:", "127.0.0.1:")
    )
    return timeout if _environment(runner_settings) in ("EXTERNAL", "PROCESS") and reachable else None


@contextmanager
def watching(views: list[ProgressView], shown: bool, start_timeout: float | None = None) -> Iterator[ProgressWatcher]:
    """A watcher drawing the views' bar (log lines print above it) while the body runs."""
    with ProgressWatcher(views, shown, start_timeout=start_timeout) as watcher, watcher.logging_redirected():
        yield watcher


def wait_watched(result: PipelineResult, watcher: ProgressWatcher, runner_settings: Mapping[str, object],
                 cancel_on_cluster: Callable[[], object] | None = None) -> None:
    """Wait for the run to end, or raise once the watcher saw no worker start.
    A stop cancels the job through the runner, and through the cluster with
    ``cancel_on_cluster`` where the runner's cancel leaves the cluster's job
    running (Flink's: see ``beam_curator.runners.flink_runner``)."""
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
        _watch(result, watcher, runner_settings, ended)
    except KeyboardInterrupt:  # a job on a cluster must not outlive its driver: cancel it, briefly
        cancel = threading.Thread(target=result.cancel, name="cancel", daemon=True)
        cancel.start()
        cancel.join(5)
        if cancel_on_cluster is not None:
            try:
                cancel_on_cluster()
            except Exception as error:  # the stop goes on; the user must know the job may not have
                logger.warning("could not cancel the run's job on the cluster (%s): cancel it there", error)
        raise
    if "error" in outcome:
        raise outcome["error"]


def _environment(runner_settings: Mapping[str, object]) -> str:
    return str(runner_settings.get("environment_type") or "").upper()


def _watch(result: PipelineResult, watcher: ProgressWatcher, runner_settings: Mapping[str, object],
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
                f"({_environment(runner_settings)} environment {runner_settings.get('environment_config')}); "
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
