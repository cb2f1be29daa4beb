"""Live progress and final counts of the dedup transforms in a user's own pipeline.

Beam calls nothing of a transform's when the user's ``with beam.Pipeline(...)``
starts or ends running, and the workers of the multi-process and portable
runners share no memory with the driver. So a dedup transform applied with
progress on adds three branches that count its documents in, kept and
removed; their DoFns record the totals as ``Pipeline.run``'s stages do, in
``ProgressRecorder`` files (in a local temporary folder, or under
``progress_folder`` for workers on other machines). The first such transform
applied to a pipeline also wraps that pipeline object's ``run``: while the job
runs the driver draws each transform's bar (``ProgressWatcher``, on a terminal,
as for ``Pipeline.run``), and once the job has ended (``run`` returned a
finished job, or its ``wait_until_finish`` did) it prints each transform's
counts on stderr and removes the folders.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Callable, Iterable

import apache_beam as beam
from apache_beam.runners.runner import PipelineResult, PipelineState

from beam_curator.logs import progress_shown
from beam_curator.tasks import Task
from beam_curator.transforms.dedup_documents import DedupOutputs
from beam_curator.transforms.progress import (
    ProgressRecorder,
    ProgressView,
    ProgressWatcher,
    forget_progress,
    progress_folder_in,
    remove_abandoned_progress,
    read_progress,
)
from beam_curator.transforms.storage_settings import apply_settings, driver_settings

DOCUMENTS_IN, KEPT_COUNT, REMOVED_COUNT = "documents in", "kept", "removed"  # the stages the counts are recorded as
_RECORD_EVERY = 1000  # documents counted before a DoFn hands its count to the recorder


def progress_settings(transform: str, progress: bool | None,
                      progress_folder: str | None) -> tuple[bool | None, str | None]:
    """A dedup transform's ``progress`` and ``progress_folder``, checked."""
    if not (progress is None or isinstance(progress, bool)):
        raise ValueError(f"{transform}: progress must be True, False or None (shown unless logging was set up "
                         f"quiet), not {progress!r}")
    if progress_folder is not None and (not isinstance(progress_folder, str) or not progress_folder):
        raise ValueError(f"{transform}: progress_folder must name a folder the workers can write to (or be None: "
                         f"a local temporary folder), not {progress_folder!r}")
    return progress, progress_folder


def watched(transform: beam.PTransform, documents: beam.PCollection, outputs: DedupOutputs) -> DedupOutputs:
    """``outputs``, what ``transform`` made of ``documents``, with its counts
    recorded and drawn while the pipeline runs, unless the transform's
    ``progress`` is False (or None after a quiet ``configure_logging``)."""
    if not (progress_shown() if transform.progress is None else transform.progress):
        return outputs
    folder = _watch_of(documents.pipeline).add(transform.label, transform.progress_folder)
    for label, stage, counted in (("CountDocumentsIn", DOCUMENTS_IN, documents),
                                  ("CountKept", KEPT_COUNT, outputs.kept),
                                  ("CountRemoved", REMOVED_COUNT, outputs.removed)):
        _ = counted | label >> beam.ParDo(_CountDocuments(folder, stage))
    return outputs


def unwatched(transform: beam.PTransform) -> beam.PTransform:
    """A copy of ``transform`` that records no progress: the one that
    ``RowsOfBatches`` applies to the rows of the batches it counts."""
    row_dedup = copy.copy(transform)
    row_dedup.progress = False
    return row_dedup


class _CountDocuments(beam.DoFn):
    """Counts the documents of a PCollection (a ``DocumentBatch``: its rows)
    as ``stage`` in the progress ``folder``; gives nothing."""

    def __init__(self, folder: str, stage: str) -> None:
        self.folder, self.stage = folder, stage
        self.storage_settings = driver_settings()  # for a progress_folder in an object store

    def setup(self) -> None:
        apply_settings(self.storage_settings)
        self.recorder = ProgressRecorder.for_folder(self.folder, takes_advances=False)

    def start_bundle(self) -> None:
        self.counted = 0

    def process(self, element: Any) -> Iterable[Any]:
        self.counted += element.num_items if isinstance(element, Task) else 1
        if self.counted >= _RECORD_EVERY:
            self._record()
        return ()

    def finish_bundle(self) -> None:
        self._record()
        self.recorder.write(force=True)  # the driver reads the totals as soon as the job ends

    def _record(self) -> None:
        self.recorder.stage(self.stage, tasks=0, items_in=self.counted, items_out=0)
        self.counted = 0


def _watch_of(pipeline: beam.Pipeline) -> "_PipelineWatch":
    """The watch of ``pipeline``, which its wrapped ``run`` belongs to, made on the first call."""
    watch = getattr(pipeline.run, "__self__", None)
    return watch if isinstance(watch, _PipelineWatch) else _PipelineWatch(pipeline)


class _PipelineWatch:
    """The dedup transforms applied to one pipeline, watched from the driver while its ``run`` runs."""

    def __init__(self, pipeline: beam.Pipeline) -> None:
        self.views: list[ProgressView] = []
        self._run = pipeline.run
        pipeline.run = self.run

    def add(self, title: str, parent: str | None) -> str:
        """The progress folder of a transform applied as ``title``, under ``parent`` if given."""
        remove_abandoned_progress([parent])
        folder = progress_folder_in(parent)
        self.views.append(ProgressView(folder, title, DOCUMENTS_IN, DOCUMENTS_IN, (KEPT_COUNT, REMOVED_COUNT)))
        return folder

    def run(self, *args: Any, **kwargs: Any) -> PipelineResult:
        watcher = ProgressWatcher(self.views, show=True).__enter__()
        try:
            result = self._run(*args, **kwargs)
        except BaseException as error:
            self._end(watcher, error)
            raise
        if PipelineState.is_terminal(result.state):
            self._end(watcher)
        else:  # a job that runs on after ``run`` (a portable runner's): its counts are final when it ends
            result.wait_until_finish = self._ending(watcher, result.wait_until_finish)
        return result

    def _ending(self, watcher: ProgressWatcher, wait: Callable[..., Any]) -> Callable[..., Any]:
        """``wait_until_finish`` that ends the watch once the job has ended."""
        def wait_until_finish(*args: Any, **kwargs: Any) -> Any:
            try:
                state = wait(*args, **kwargs)
            except BaseException as error:
                self._end(watcher, error)
                raise
            if PipelineState.is_terminal(state):
                self._end(watcher)
            return state
        return wait_until_finish

    def _end(self, watcher: ProgressWatcher, error: BaseException | None = None) -> None:
        """Close the bars and, after a job that did not fail, print each transform's counts."""
        watcher.__exit__(type(error) if error else None, error, None)
        for view in self.views:
            if error is None:
                print(_counts(view), file=sys.stderr)
            forget_progress(view.folder)


def _counts(view: ProgressView) -> str:
    snapshot = read_progress(view.folder)
    if not snapshot.workers:
        return (f"{view.title}: no counts recorded in {view.folder}: no document reached it, or its workers run "
                "on other machines and need a progress_folder they can write to")
    documents, kept, removed = (snapshot.stage(stage)["items_in"] for stage in (DOCUMENTS_IN, KEPT_COUNT,
                                                                                REMOVED_COUNT))
    skipped = documents - kept - removed  # bad records on_bad_record="skip" dropped: in neither output
    return (f"{view.title}: {documents:,} documents in, {kept:,} kept, {removed:,} removed"
            + (f", {skipped:,} skipped as bad records" if skipped else ""))
