"""One run per output and cache folder at a time.

Two runs on the same folders would both do all the work and interleave their
writes; nothing in the checkpoints tells them apart. A run therefore holds an
exclusive ``flock`` on ``<parent>/.<folder>.beam-curator-lock`` (beside the
folder, so that ``clear_output`` can delete the folder while the lock holds)
from before it reads any state to its end, and writes its host, pid and start
time into that file for whoever finds it taken.

The kernel drops the lock when its process ends, however it ends: a lock
whose holder was killed is simply taken by the next run, which warns that the
previous run did not finish. On NFS (v4) the server does the same when a
client host stops renewing its lease (90 s by default). Object stores have no
locks: folders there are not locked, and the run says so.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from beam_curator.errors import CuratorError
from beam_curator.writing import writing
from beam_curator.stages.io.overlap import resolved

log = logging.getLogger(__name__)
SUFFIX = ".beam-curator-lock"
_held: dict[str, tuple[int, int]] = {}  # resolved folder -> (pid, fd): locks this process holds


class RunInProgressError(CuratorError, RuntimeError):
    """Another run holds a folder this run needs."""


def lock_file(folder: str) -> Path:
    path = Path(folder)
    return path.parent / f".{path.name}{SUFFIX}"


def _holder(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        return json.loads(os.read(fd, 4096) or b"{}")
    except ValueError:
        return {}


def _describe(holder: dict) -> str:
    if not holder:
        return "a run that has not written its name yet"
    started = datetime.datetime.fromtimestamp(holder.get("started", 0)).isoformat(sep=" ", timespec="seconds")
    return f"pid {holder.get('pid')} on host {holder.get('host')}, started {started}"


def _acquire(name: str, url: str, folder: str, wait: bool) -> int:
    path = lock_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        if not wait:
            os.close(fd)
            raise RunInProgressError(
                f"{name} {url!r} is in use by another run ({_describe(holder)}; lock {path}). Wait for it to end "
                "or stop it, or pass wait=True (--wait) to start when it ends"
            ) from None
        log.info("waiting for the run that holds %s (%s)", url, _describe(holder))
        fcntl.flock(fd, fcntl.LOCK_EX)
    previous = _holder(fd)
    if previous.get("running"):
        log.warning("the previous run on %s (%s) ended without finishing; this run takes its lock over and "
                    "resumes from what it completed", url, _describe(previous))
    record = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(), "running": True}
    try:
        with writing(str(path)):
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
            os.fsync(fd)
    except BaseException:
        os.close(fd)  # releases the lock, which a rerun in this process could not take otherwise
        raise
    return fd


def _covered(folder: str) -> bool:
    """This process holds the folder, or one it lies in (a workflow's removal writes under its output)."""
    return any(pid == os.getpid() and (folder == held or folder.startswith(held.rstrip("/") + "/"))
               for held, (pid, _) in _held.items())


@contextlib.contextmanager
def run_lock(folders: dict[str, str], wait: bool = False) -> Iterator[None]:
    """Hold ``{parameter: folder}`` for this run. Folders this process already holds, or that lie
    in one it holds (a workflow inside a workflow), are not taken again; object-store folders are
    not locked."""
    taken: list[tuple[str, int]] = []
    try:
        for name, url in folders.items():
            protocol, folder = resolved(url)
            if protocol != "file":
                log.info("%s %s is on an object store, which has no locks: make sure no other run uses it", name, url)
                continue
            if _covered(folder) or folder in dict(taken):
                continue
            fd = _acquire(name, url, folder, wait)
            _held[folder] = (os.getpid(), fd)
            taken.append((folder, fd))
        yield
    finally:
        for folder, fd in reversed(taken):
            _held.pop(folder, None)
            os.ftruncate(fd, 0)  # finished: nothing for the next run to warn about
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
