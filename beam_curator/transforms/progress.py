"""Live progress of a run, from workers in any process to the terminal of the driver.

Beam's metrics reach the driver only when a run ends, and SDK workers of
the multi-process and portable runners share no memory with it. So every
worker process keeps running totals (tasks and documents per stage,
partitions pending, skipped and completed) and rewrites one small JSON file,
``<folder>/<host>-<pid>.json``, at most once a second while a bundle runs
and at every bundle's end (a worker of a persistent pool may be torn down
only after the driver has read the totals); the driver polls the
folder in a thread and draws a bar: documents (or what else the sink's
``unit`` names: a workflow's LSH step counts buckets) through the sink, an estimate
of the total (documents per partition read so far times the partitions
pending), rate, time left, and partitions done / pending. A stage that works
long on one task (embedding a whole file) reports the documents it has handled
so far through :func:`advance`, so that the bar moves within a partition. The folder lives in
the checkpoint folder, which every worker can already reach, or in a local
temporary folder for runs without one.

The same files tell the driver that workers have started at all: a portable
run whose SDK workers never start would otherwise wait forever. The worker
that lists a chain's partitions also writes their checkpoint keys, once, to
``<folder>/<host>-<pid>.pending``: the driver counts the run's completed
partitions in the checkpoint, not in Beam's metrics, which an engine that
retries a failed task may undercount (Spark).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
import psutil

from beam_curator.object_stores import delete_tree
from beam_curator.writing import write_atomically

logger = logging.getLogger(__name__)
PROGRESS_DIR = ".beam_curator_progress"
_PENDING_SUFFIX = ".pending"
_WRITE_EVERY_S = 1.0


class ProgressRecorder:
    """One worker process's running totals for one run (shared by its DoFns)."""

    _by_folder: dict[str, "ProgressRecorder"] = {}
    _registry_lock = threading.Lock()
    latest: "ProgressRecorder | None" = None  # of the run this process works for now (runs here go one at a time)

    def __init__(self, folder: str) -> None:
        self.url = f"{folder}/{socket.gethostname()}-{os.getpid()}.json"
        self.stages: dict[str, dict[str, int]] = {}
        self.units: dict[str, str] = {}  # per stage: what one of its items in is
        self.partitions = {"pending": 0, "skipped": 0, "completed": 0}
        self.advanced = 0  # documents handled inside stages' tasks, as they go (see ``advance``)
        self.pending_keys: set[str] = set()  # see ``listed``
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._written = 0.0
        self._broken = False

    @classmethod
    def for_folder(cls, folder: str, takes_advances: bool = True) -> "ProgressRecorder":
        """The recorder of this process for ``folder``; announces the process on first use. ``advance``
        counts into it from then on, unless ``takes_advances`` is False (a dedup transform's counts:
        ``dedup_progress``)."""
        with cls._registry_lock:
            recorder = cls._by_folder.get(folder)
            if recorder is None or not recorder.url.endswith(f"-{os.getpid()}.json"):  # new, or inherited by a fork
                recorder = cls._by_folder[folder] = cls(folder)
                recorder.write(force=True)
            if takes_advances:
                cls.latest = recorder
            return recorder

    def stage(self, name: str, tasks: int, items_in: int, items_out: int, unit: str = "doc") -> None:
        with self._lock:
            self.units[name] = unit
            totals = self.stages.setdefault(name, {"tasks": 0, "items_in": 0, "items_out": 0})
            totals["tasks"] += tasks
            totals["items_in"] += items_in
            totals["items_out"] += items_out
        self.write()

    def advance(self, documents: int) -> None:
        with self._lock:
            self.advanced += documents
        self.write()

    def listed(self, pending_keys: list[str], skipped: int) -> None:
        """The source's listing: the checkpoint keys of the pending partitions, and how many were skipped.
        The keys file holds every key this process listed in the run: an engine may list again (a
        retried task) after some of them completed."""
        self.pending_keys.update(pending_keys)
        payload = "\n".join(sorted(self.pending_keys)).encode()
        try:
            write_atomically(self.url[: -len(".json")] + _PENDING_SUFFIX, lambda handle: handle.write(payload),
                             durable=False)
        except OSError as error:
            logger.debug("pending partitions cannot be recorded in %s: %s", self.url, error)
        self.partition("pending", len(pending_keys))
        self.partition("skipped", skipped)

    def partition(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self.partitions[kind] += count
        self.write()

    def write(self, force: bool = False) -> None:
        """Rewrite the file if a second has passed (or ``force``). Progress is
        best effort: a folder the worker cannot write must not fail the run,
        and the file is not synced to disk (see ``write_atomically``)."""
        now = time.monotonic()
        if self._broken or (not force and now - self._written < _WRITE_EVERY_S):
            return
        with self._write_lock:  # threads of one worker take turns; a late one writes newer totals
            self._written = now
            with self._lock:
                payload = json.dumps(
                    {"stages": self.stages, "units": self.units, "partitions": self.partitions,
                     "advanced": self.advanced}
                ).encode()
            try:
                write_atomically(self.url, lambda handle: handle.write(payload), durable=False)
            except OSError as error:
                self._broken = True
                logger.debug("progress cannot be recorded in %s: %s", self.url, error)


def advance(documents: int) -> None:
    """Count ``documents`` handled by a stage still working on its task, for
    the run this process works for (nothing when it records no progress)."""
    recorder = ProgressRecorder.latest
    if recorder is not None:
        recorder.advance(documents)


@dataclass
class Snapshot:
    """Totals over every worker process of a run."""

    workers: int = 0
    stages: dict[str, dict[str, int]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=lambda: {"pending": 0, "skipped": 0, "completed": 0})
    advanced: int = 0

    def stage(self, name: str) -> dict[str, int]:
        return self.stages.get(name, {"tasks": 0, "items_in": 0, "items_out": 0})


def read_progress(folder: str) -> Snapshot:
    """Sum the files of every worker process (a file being replaced is skipped)."""
    fs, path = fsspec.core.url_to_fs(folder)
    snapshot = Snapshot()
    fs.invalidate_cache(path)  # an object store's cached listing would hide the workers' files and their new sizes
    try:
        files = [name for name in fs.ls(path, detail=False)
                 if name.endswith(".json") and not name.rsplit("/", 1)[-1].startswith(".")]  # not a file being written
    except FileNotFoundError:
        return snapshot
    for name in files:
        try:
            with fs.open(name, "r") as handle:
                record: dict[str, Any] = json.load(handle)
        except (OSError, ValueError):
            continue
        snapshot.workers += 1
        snapshot.advanced += record.get("advanced", 0)
        snapshot.units.update(record.get("units", {}))
        for stage, totals in record.get("stages", {}).items():
            summed = snapshot.stages.setdefault(stage, {"tasks": 0, "items_in": 0, "items_out": 0})
            for key, value in totals.items():
                summed[key] = summed.get(key, 0) + value
        for kind, value in record.get("partitions", {}).items():
            snapshot.partitions[kind] = snapshot.partitions.get(kind, 0) + value
    return snapshot


def read_pending_keys(folder: str) -> set[str] | None:
    """The checkpoint keys of the partitions a run listed as pending (``ProgressRecorder.listed``),
    or None if no worker recorded a listing there."""
    fs, path = fsspec.core.url_to_fs(folder)
    fs.invalidate_cache(path)
    try:
        files = [name for name in fs.ls(path, detail=False) if name.endswith(_PENDING_SUFFIX)
                 and not name.rsplit("/", 1)[-1].startswith(".")]
    except FileNotFoundError:
        return None
    if not files:
        return None
    return {key for name in files for key in fs.cat_file(name).decode().split("\n") if key}


_TEMPORARY_PREFIX = "beam-curator-progress-"


def progress_folder_in(parent: str | None) -> str:
    """A new folder for one run's progress files: under ``parent`` (a folder every worker can reach, such as the
    checkpoint folder) if given, else a local temporary folder. Its name says which process owns it
    (``<host>-<pid>-...``), so that the next run removes it if a SIGKILL left it (``remove_abandoned_progress``)."""
    owner = f"{socket.gethostname()}-{os.getpid()}-"
    if parent:
        return f"{parent.rstrip('/')}/{PROGRESS_DIR}/{owner}{uuid.uuid4().hex[:12]}"
    return tempfile.mkdtemp(prefix=f"{_TEMPORARY_PREFIX}{owner}")


def remove_abandoned_progress(parents: list[str | None]) -> list[str]:
    """Remove the progress folders that runs on this host left when they were killed (their owner
    is gone, or its pid now names a process started after the folder last changed), under each
    of ``parents`` (checkpoint folders) and in the temporary folder; return them."""
    places = [(f"{parent.rstrip('/')}/{PROGRESS_DIR}", "") for parent in parents if parent]
    places.append((tempfile.gettempdir(), _TEMPORARY_PREFIX))
    removed = []
    for folder, prefix in places:
        fs, path = fsspec.core.url_to_fs(folder)
        try:
            # Names only: the temporary folder may hold thousands of entries, and every run starts here;
            # only this host's progress folders are looked at further.
            names = fs.ls(path, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for url in names:
            name = url.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith(prefix) and _abandoned(name[len(prefix):], fs, url):
                forget_progress(url)
                removed.append(url)
    return removed


def _abandoned(owner_and_id: str, fs: Any, url: str) -> bool:
    host, _, rest = owner_and_id.rpartition("-")[0].rpartition("-")
    pid = rest if rest.isdigit() else ""
    if host != socket.gethostname() or not pid:
        return False  # another host's run (this one cannot tell whether it lives), or a name of no run
    try:
        entry = fs.info(url)
    except FileNotFoundError:  # its run ended meanwhile and removed it
        return False
    if entry["type"] != "directory":
        return False
    try:
        started = psutil.Process(int(pid)).create_time()
    except psutil.Error:
        return True
    changed = entry.get("mtime") or entry.get("LastModified") or entry.get("created")
    changed = changed.timestamp() if hasattr(changed, "timestamp") else changed
    return changed is not None and started > float(changed) + 1.0


def forget_progress(folder: str) -> None:
    """Remove a finished run's progress files (best effort, like recording them)."""
    fs, path = fsspec.core.url_to_fs(folder)
    try:
        delete_tree(fs, path)
    except OSError as error:
        logger.debug("could not remove progress folder %s: %s", folder, error)


class WorkersDidNotStartError(RuntimeError):
    """No SDK worker reported within the start-up timeout."""


@dataclass(frozen=True)
class ProgressView:
    """One chain's progress: its ``folder``, the bar's ``title``,
    ``first_stage`` (the stage right after the source: its documents per
    partition give the estimate of the total) and ``sink`` (the stage whose
    documents count as done). ``tallies``: stages whose documents the bar
    names instead of partitions (a dedup transform's kept and removed, see
    ``dedup_progress``, whose counts replace the bar when the run ends)."""

    folder: str
    title: str
    first_stage: str
    sink: str
    tallies: tuple[str, ...] = ()


class ProgressWatcher:
    """Polls the progress folders of a run's chains in a thread and draws a
    bar for the chain running now: chains run one after another
    (``run_in_order``), so the bar moves on to the next chain once that one's
    workers report. With ``start_timeout``, ``stalled`` turns True if no
    worker process has reported that long after ``job_running()`` (a job
    may take a while to reach an engine's workers: a job server to start,
    files to stage, a cluster to take it on; none of it is a worker failing
    to start).
    """

    def __init__(
        self,
        views: list[ProgressView],
        show: bool,
        stream: IO[str] | None = None,
        start_timeout: float | None = None,
    ) -> None:
        self.views = views
        self.current = 0
        self.show = show
        self.stream = stream
        self.start_timeout = start_timeout
        self.stalled = False
        self.poll_s = 1.0 if fsspec.core.url_to_fs(views[0].folder)[0].protocol in ("file", ("file", "local")) else 5.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{views[0].title}", daemon=True)
        self._bar = None

    def __enter__(self) -> "ProgressWatcher":
        self._open_bar()
        self._running_since: float | None = None
        self._thread.start()
        return self

    def job_running(self) -> None:
        """Start the clock of ``start_timeout`` (once; later calls change nothing)."""
        if self._running_since is None:
            self._running_since = time.monotonic()

    def _open_bar(self) -> None:
        if self.show:
            from tqdm.auto import tqdm

            view = self.views[self.current]  # a dedup transform's bar gives way to the counts printed at the end
            self._bar = tqdm(desc=view.title, unit="doc", file=self.stream, dynamic_ncols=True,
                             leave=not view.tallies, disable=None if self.stream is None else False)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._follow_if_readable(final=exc[0] is None)
        if self._bar is not None:
            self._bar.close()

    def logging_redirected(self):
        """A context in which log lines print above the bar instead of through it."""
        if self._bar is None or self._bar.disable:
            return nullcontext()
        from tqdm.contrib.logging import logging_redirect_tqdm

        return logging_redirect_tqdm()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            reported = self._follow_if_readable()
            if reported is None:
                continue
            since = self._running_since
            late = self.start_timeout is not None and since is not None and time.monotonic() - since > self.start_timeout
            if late and not reported:
                self.stalled = True

    def _follow_if_readable(self, final: bool = False) -> bool | None:
        """``_follow``, or None when the progress folder cannot be read now (an object store that stopped
        answering): the bar must neither end the run nor hide the error the run itself then raises."""
        try:
            return self._follow(final)
        except Exception as error:  # each filesystem raises its own types
            logger.debug("progress not read this time: %s", error)
            return None

    def _follow(self, final: bool = False) -> bool:
        """Update the bar of the current chain, first closing it (its totals
        final) and opening the next chain's once that one's source has
        listed its partitions; whether any worker has reported."""
        snapshot = read_progress(self.views[self.current].folder)
        for later in range(self.current + 1, len(self.views)):
            following = read_progress(self.views[later].folder)
            if following.stages:
                self.update(snapshot, final=True)
                if self._bar is not None:
                    self._bar.close()
                self.current = later
                self._open_bar()
                snapshot = following
        self.update(snapshot, final=final)
        return snapshot.workers > 0 or self.current > 0

    def update(self, snapshot: Snapshot, final: bool = False) -> None:
        if self._bar is None:
            return
        view = self.views[self.current]
        if view.sink in snapshot.units:  # once a worker has reported (a disabled bar has no unit to read)
            self._bar.unit = snapshot.units[view.sink]
        done = max(snapshot.stage(view.sink)["items_in"], snapshot.advanced)
        read = snapshot.stage(view.first_stage)
        pending = snapshot.partitions["pending"]
        if final:
            self._bar.total = done
        elif read["tasks"] and pending:
            estimate = read["items_out"] * pending // read["tasks"] if read["tasks"] < pending else read["items_out"]
            self._bar.total = max(estimate, done)
        self._bar.update(done - self._bar.n)
        skipped = snapshot.partitions["skipped"]
        if snapshot.workers == 0:
            status = "starting workers"
        elif view.tallies:
            status = ", ".join(f"{snapshot.stage(name)['items_in']:,} {name}" for name in view.tallies)
        else:
            status = f"partitions {snapshot.partitions['completed']}/{pending}"
            status += f", {skipped} already complete" if skipped else ""
        self._bar.set_postfix_str(status, refresh=True)
