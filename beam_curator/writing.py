"""Writing files so that a full disk loses nothing.

Every file the package writes (sink outputs, cache files, phase markers,
checkpoint marks) goes through ``writing(path)``: a write that fails for lack
of space (``ENOSPC``, or ``EDQUOT`` past a quota) becomes an
``OutputWriteError`` naming the path and what to do, instead of an
``OSError`` that names no file (a full disk fails on whichever write comes
next, often a checkpoint's, far from the output that filled it). Files are
written by ``write_atomically``: a temporary sibling, flushed, closed and
renamed, so no half-written file ever has a final name, and a partition's
mark comes only after its files are renamed into place.
"""

from __future__ import annotations

import errno
import os
import uuid
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem

from beam_curator.errors import OutputWriteError

_NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def _no_space_reason(error: BaseException, path: str) -> str | None:
    """Why writing ``path`` failed for lack of space, or None.

    Libraries that report the system's error only as text (LMDB:
    ``mdb_txn_commit: No space left on device``) are recognised by the
    system's own wording. LMDB reports a write cut short by a full disk as
    an I/O error (measured on a tmpfs), so an I/O error on a filesystem left
    with (nearly) no room is taken for what it is.
    """
    text = str(error)
    for code, reason in _NO_SPACE.items():
        if getattr(error, "errno", None) == code or os.strerror(code) in text:
            return reason
    short_write = getattr(error, "errno", None) == errno.EIO or os.strerror(errno.EIO) in text
    return _NO_SPACE[errno.ENOSPC] if short_write and _room_left(path) < _NEARLY_FULL else None


_NEARLY_FULL = 1 << 20


def _room_left(path: str) -> float:
    """Bytes free on the local filesystem that holds ``path`` (infinite for other filesystems)."""
    folder = os.path.abspath(path) if "://" not in path else ""
    while folder and not os.path.exists(folder) and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    if not folder:
        return float("inf")
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


@contextmanager
def writing(path: str) -> Iterator[None]:
    """Raise running out of space inside the block as ``OutputWriteError`` naming ``path``."""
    try:
        yield
    except OutputWriteError:
        raise
    except Exception as error:
        reason = _no_space_reason(error, path)
        if reason is None:
            raise
        raise OutputWriteError(
            f"{reason} writing {path}: free space and rerun the same command (finished partitions are kept "
            "and not redone), or choose another output, cache or checkpoint folder"
        ) from error


def write_atomically(url: str, write: Callable[[BinaryIO], object]) -> int:
    """Write through a temporary sibling, make it durable, then rename it to ``url``.

    A failed write removes its temporary file. A killed process can leave one
    behind: it is a dotfile, which the readers skip, and the partition it
    belonged to was never marked, so the next run writes the file again.
    Returns the file's size in bytes.
    """
    fs, final = fsspec.core.url_to_fs(url)
    folder, name = final.rsplit("/", 1)
    temporary = f"{folder}/.tmp-{uuid.uuid4().hex}-{name}"
    with writing(url):
        fs.makedirs(folder, exist_ok=True)
        try:
            with fs.open(temporary, "wb") as handle:
                write(handle)
                size = handle.tell()
                if isinstance(fs, LocalFileSystem):
                    handle.flush()
                    os.fsync(handle.fileno())
        except BaseException:
            if fs.exists(temporary):
                fs.rm(temporary)
            raise
        fs.mv(temporary, final)
    return size
