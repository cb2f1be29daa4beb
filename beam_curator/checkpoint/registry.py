"""Per-process writer handles, kept in an importable module.

A store object is pickled into every worker, so it must not hold open files;
each process opens its own writer on first use and keeps it here. py-lmdb
also refuses a second open of one file in a process, which a registry keyed
by path prevents. A forked child gets its own writer (the pid is checked),
and writers are flushed and closed when a process ends normally.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Callable, Protocol, TypeVar


class Writer(Protocol):
    pid: int

    def flush(self) -> None: ...


logger = logging.getLogger(__name__)

W = TypeVar("W", bound=Writer)
_writers: dict[str, Writer] = {}
_lock = threading.Lock()


def writer_for(key: str, open_writer: Callable[[], W]) -> W:
    """This process's writer for ``key``, opened on first use."""
    with _lock:
        writer = _writers.get(key)
        if writer is None or writer.pid != os.getpid():
            writer = _writers[key] = open_writer()
        return writer  # type: ignore[return-value]


def current(key: str) -> Writer | None:
    """This process's writer for ``key`` if it has opened one."""
    writer = _writers.get(key)
    return writer if writer is not None and writer.pid == os.getpid() else None


def flush(key: str) -> None:
    """Flush this process's writer for ``key``, if it has opened one."""
    writer = current(key)
    if writer is not None:
        writer.flush()


def discard(key: str) -> Writer | None:
    """Forget (and return) this process's writer for ``key``."""
    with _lock:
        writer = _writers.pop(key, None)
    return writer if writer is not None and writer.pid == os.getpid() else None


def close(key: str) -> None:
    """Close this process's writer for ``key``, if it has opened one."""
    _close([key])


def close_below(prefix: str) -> None:
    """Close this process's writers whose key lies under ``prefix``, before
    that folder is deleted: a writer left open would go on writing into a
    file that no longer has a name, and its marks would be lost."""
    prefix = prefix.rstrip("/") + "/"
    _close([key for key in _writers if key.startswith(prefix)])


def _close(keys: list[str]) -> None:
    for key in keys:
        writer = discard(key)
        if writer is not None:
            getattr(writer, "close", writer.flush)()


@atexit.register
def close_all() -> None:
    """Flush every writer of this process and release its files.

    A process ending after an error may find its checkpoint unwritable (an
    object store that went away): its last marks are then lost, which only
    replays their partitions, and a warning says so instead of a traceback
    after the error that ended the run."""
    for key in list(_writers):
        try:
            _close([key])
        except Exception as error:  # each backend raises its own types
            logger.warning("the last completion marks for %s were not saved (%s): their partitions run again "
                           "on the next run", key, type(error).__name__)
