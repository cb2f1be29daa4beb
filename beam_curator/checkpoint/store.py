"""The checkpoint store interface, independent of storage and engine.

Every writing process owns one writer file and is the only one to write it;
a run starts by reading the union of all writers' files. That needs no
coordination between workers and survives any of them dying.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

METADATA_DIR = ".beam_curator_metadata"


def writer_name() -> str:
    """``<hostname>-<pid>``: unique per live process, stable for its lifetime."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class CheckpointStatus:
    path: str
    completed: int
    writer_files: list[str] = field(default_factory=list)
    unreadable_files: list[str] = field(default_factory=list)
    live_writers: list[str] = field(default_factory=list)


class CheckpointStore(ABC):
    """Where completion marks live. Instances hold configuration only, so they
    pickle cheaply into workers; open handles live in per-process registries."""

    def __init__(self, path: str) -> None:
        self.path = path

    @abstractmethod
    def check_writable(self) -> None:
        """Fail before the run starts if marks could not be written."""

    @abstractmethod
    def completed(self) -> set[str]:
        """Source partitions complete according to the union of all writers."""

    @abstractmethod
    def record(self, task_id: str, credits: Mapping[str, Fraction]) -> list[str]:
        """Durably return a terminal task's credits from this process; return
        the partitions this completed."""

    def flush(self) -> None:
        """Make this process's recorded marks durable now (called at bundle ends)."""

    @abstractmethod
    def status(self) -> CheckpointStatus:
        """What is on disk."""

    @abstractmethod
    def reset(self, force: bool = False) -> None:
        """Forget every mark. Refuses while a writer is alive unless ``force``."""


class CheckpointBusyError(RuntimeError):
    """A reset was refused because a writer process is still running."""


def open_store(path: str, map_size: int = 1 << 30) -> CheckpointStore:
    """The store that suits ``path``: LMDB on a local or shared POSIX folder,
    small per-writer files through fsspec on object stores (LMDB needs mmap)."""
    from fsspec.core import split_protocol

    protocol, _ = split_protocol(path)
    if protocol in (None, "file", "local"):
        from beam_curator.checkpoint.lmdb_store import LmdbCheckpointStore

        return LmdbCheckpointStore(path, map_size=map_size)
    from beam_curator.checkpoint.fsspec_store import FsspecCheckpointStore

    return FsspecCheckpointStore(path)
