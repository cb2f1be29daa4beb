"""A group of input files, or one block of one file: the usual source partition."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import NamedTuple

from beam_curator.tasks.base import Task


class FileBlock(NamedTuple):
    """The ``index``-th block of a file: ``[start, stop)`` in the units its
    reader splits the file by (bytes of JSON Lines, row groups of Parquet)."""

    index: int
    start: int
    stop: int


@dataclass
class FileGroupTask(Task[list[str]]):
    """File paths that are read together, or (``block`` set) one block of one file.

    A file larger than the reader's ``blocksize`` becomes several partitions,
    so that each finishes, and is marked complete, on its own.

    Its deterministic id hashes the sorted paths and the block's index (never
    the contents, nor where the block starts), so the id of a group does not
    change when other files are added or removed, or when a file is rewritten
    in place: a rewritten file's blocks overwrite their own outputs.
    """

    block: FileBlock | None = None

    @property
    def num_items(self) -> int:
        return len(self.data or [])

    def get_deterministic_id(self) -> str:
        described = "\n".join(sorted(self.data or []))
        if self.block is not None:
            described += f"\0block {self.block.index}"
        return hashlib.sha256(described.encode()).hexdigest()[:16]
