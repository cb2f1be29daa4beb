"""Writing files so that a full disk loses nothing.

Every file the package writes (sink outputs, cache files, phase markers,
checkpoint marks) goes through ``writing(path)``: a write that fails for lack
of space (``ENOSPC``, or ``EDQUOT`` past a quota) becomes an
``OutputWriteError`` naming the path and what to do, instead of an
``OSError`` that names no file (a full disk fails on whichever write comes
next, often a checkpoint's, far from the output that filled it). Files are
written by ``write_atomically`` so that no half-written file ever has a final
name, and a partition's mark comes only after its files are in place.
"""

from __future__ import annotations

import errno
import os
import uuid
from contextlib import contextmanager, suppress
from typing import BinaryIO, Callable, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from beam_curator.errors import OutputWriteError

# Object stores whose fsspec files upload on close: one PUT, or a multipart upload that only becomes an object
# once completed. A rename there is a copy and a delete, so their files are written under the final name directly.
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl"})

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


def write_atomically(url: str, write: Callable[[BinaryIO], object], *, durable: bool = True) -> int:
    """Write ``url`` so that it exists whole or not at all; return its size in bytes.

    On an object store the object appears only when its upload completes, so
    it is written under its final name; a failed write aborts the upload
    instead of completing it (fsspec completes uploads on close, even on an
    error), and a killed process leaves no object, only an unfinished
    multipart upload the store's lifecycle rules expire. Elsewhere the file is
    written to a temporary sibling, made durable and renamed: a failed write
    removes it, and one a killed process leaves behind is a dotfile, which the
    readers skip. Either way the partition it belonged to was never marked, so
    the next run writes the file again.

    ``durable=False`` skips making a local file durable before its rename
    (one ``fsync``, milliseconds each): for files whose loss costs nothing,
    such as progress totals rewritten every second and read only for display.
    A crash of the machine may then leave the file empty or an older one,
    never half-written under its name by this process.
    """
    fs, final = fsspec.core.url_to_fs(url)
    folder, name = final.rsplit("/", 1)
    direct = bool(_OBJECT_STORES & set(_protocols(fs)))
    target = final if direct else f"{folder}/.tmp-{uuid.uuid4().hex}-{name}"
    with writing(url):
        fs.makedirs(folder, exist_ok=True)
        handle = fs.open(target, "wb")
        try:
            write(handle)
            size = handle.tell()
            if durable and isinstance(fs, LocalFileSystem):
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            _abandon(fs, handle, None if direct else target)
            raise
        handle.close()
        if not direct:
            fs.mv(target, final)
    return size


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    return (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)


def _abandon(fs: fsspec.AbstractFileSystem, handle: BinaryIO, temporary: str | None) -> None:
    """Leave nothing of a failed write: abort an upload, remove a temporary file."""
    if isinstance(handle, AbstractBufferedFile):
        handle.discard()  # aborts a started multipart upload; closing would complete it
        handle.closed = True
    else:
        with suppress(OSError):  # closing flushes, which fails again on a full disk: the file goes anyway
            handle.close()
    if temporary is not None and fs.exists(temporary):
        fs.rm(temporary)
