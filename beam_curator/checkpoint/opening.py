"""Choosing the store for a checkpoint path.

The one module that knows both concrete stores: they build on ``store``,
and this builds on them, so no import runs in a circle.
"""

from __future__ import annotations

from fsspec.core import split_protocol

from beam_curator.checkpoint.fsspec_store import FsspecCheckpointStore
from beam_curator.checkpoint.lmdb_store import LmdbCheckpointStore
from beam_curator.checkpoint.store import CheckpointStore


def open_store(path: str, map_size: int = 1 << 30) -> CheckpointStore:
    """The store that suits ``path``: LMDB on a local or shared POSIX folder,
    small per-writer files through fsspec on object stores (LMDB needs mmap)."""
    protocol, _ = split_protocol(path)
    if protocol in (None, "file", "local"):
        return LmdbCheckpointStore(path, map_size=map_size)
    return FsspecCheckpointStore(path)
