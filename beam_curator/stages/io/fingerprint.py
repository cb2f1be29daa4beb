"""What an input file looked like: the evidence that a finished partition
still stands for the files it was made from.

Two levels, both computed where the files are listed (no Beam):

- ``file_stats``: size and modification time, from the listing itself. The
  completion mark of every file partition keeps them, so that a rerun can say
  which finished partitions' files changed since.
- ``fingerprint``: a digest that keys a partition to its content.
  ``"stat"`` is cheap (size, modification time and a hash of the first and
  last 64 KiB, so a rewrite inside the same second of a small file is still
  seen); ``"content"`` hashes every byte, for folders whose tools restore
  modification times.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import fsspec

from beam_curator.tasks import FileBlock

FINGERPRINT_MODES = (None, "stat", "content")
_EDGE = 64 << 10
_CHUNK = 8 << 20


def check_mode(mode: str | None) -> str | None:
    if mode not in FINGERPRINT_MODES:
        raise ValueError(f"fingerprint must be None, 'stat' or 'content', not {mode!r}")
    return mode


def modified_time(info: dict[str, Any]) -> str:
    """A filesystem's modification time, whatever it calls it, as text."""
    for key in ("mtime", "LastModified", "updated", "last_modified", "created"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def file_stats(infos: dict[str, dict[str, Any]]) -> dict[str, list]:
    """``{path: [size, modification time]}`` from fsspec ``info`` dicts."""
    return {path: [int(info.get("size") or 0), modified_time(info)] for path, info in infos.items()}


def file_fingerprint(path: str, mode: str, info: dict[str, Any] | None = None) -> str:
    """A hex digest of one file under ``mode`` (``"stat"`` or ``"content"``)."""
    fs, local = fsspec.core.url_to_fs(path)
    info = info or fs.info(local)
    size = int(info.get("size") or 0)
    digest = hashlib.sha256(str(size).encode())
    with fs.open(local, "rb") as handle:
        if mode == "content":
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        else:
            digest.update(modified_time(info).encode())
            digest.update(handle.read(_EDGE))
            if size > _EDGE:
                handle.seek(max(size - _EDGE, _EDGE))
                digest.update(handle.read(_EDGE))
    return digest.hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """The SHA-256 of a local file's bytes, for records that say which file was produced."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def group_fingerprint(paths: list[str], mode: str, infos: dict[str, dict[str, Any]]) -> str:
    """A short digest of a group of files, order-independent."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(f"{path}\0{file_fingerprint(path, mode, infos.get(path))}\n".encode())
    return digest.hexdigest()[:16]


def block_fingerprint(file_fingerprint: str, block: FileBlock) -> str:
    """A short digest of a block of a file: the file's fingerprint and the block's range."""
    return hashlib.sha256(f"{file_fingerprint}\0{block.start}-{block.stop}".encode()).hexdigest()[:16]
