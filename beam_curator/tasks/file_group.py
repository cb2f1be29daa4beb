"""A group of input files: the usual source partition."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from beam_curator.tasks.base import Task


@dataclass
class FileGroupTask(Task[list[str]]):
    """File paths that are read together.

    Its deterministic id hashes the sorted paths (never the contents), so the
    id of a group does not change when other files are added or removed, or
    when a file is rewritten in place.
    """

    @property
    def num_items(self) -> int:
        return len(self.data or [])

    def get_deterministic_id(self) -> str:
        digest = hashlib.sha256("\n".join(sorted(self.data or [])).encode()).hexdigest()
        return digest[:16]
