"""Completion marks as small files, for object stores where LMDB cannot live.

LMDB needs mmap and POSIX locks, which gs://, s3:// and friends do not give.
Here each writing process appends numbered JSON files under
``<path>/.beam_curator_metadata/<hostname>-<pid>/``: one per recorded
terminal task, written whole (an object-store PUT is atomic). Start-up lists
and unions them exactly like the LMDB files. Object stores have no process
locks, so a reset cannot tell whether a writer is alive: stop runs first.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import uuid
from fractions import Fraction
from typing import Mapping

import fsspec

from beam_curator.checkpoint.ledger import CreditLedger, union_complete
from beam_curator.checkpoint.store import METADATA_DIR, CheckpointStatus, CheckpointStore, writer_name

logger = logging.getLogger(__name__)


class _Writer:
    def __init__(self, fs: fsspec.AbstractFileSystem, folder: str) -> None:
        self.pid = os.getpid()
        self.fs = fs
        self.folder = folder
        self.ledger = CreditLedger()
        self.sequence = itertools.count()
        self.token = uuid.uuid4().hex[:12]
        fs.makedirs(folder, exist_ok=True)
        self.mutex = threading.Lock()

    def record(self, task_id: str, credits: Mapping[str, Fraction]) -> list[str]:
        with self.mutex:
            finished = self.ledger.add(task_id, credits)
            entry = {
                "done": finished,
                "credits": [[s, task_id, str(c)] for s, c in credits.items() if s not in self.ledger.complete],
            }
            with self.fs.open(f"{self.folder}/{self.token}-{next(self.sequence):012d}.json", "w") as handle:
                json.dump(entry, handle)
            return finished


_writers: dict[str, _Writer] = {}
_registry_lock = threading.Lock()


class FsspecCheckpointStore(CheckpointStore):
    """Per-writer completion files through fsspec (gs://, s3://, memory://...)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.metadata_dir = f"{path.rstrip('/')}/{METADATA_DIR}"

    def _fs(self) -> fsspec.AbstractFileSystem:
        fs, _ = fsspec.core.url_to_fs(self.metadata_dir)
        return fs

    def check_writable(self) -> None:
        probe = f"{self.metadata_dir}/.probe-{writer_name()}"
        try:
            fs = self._fs()
            with fs.open(probe, "w") as handle:
                handle.write("ok")
            fs.rm(probe)
        except Exception as error:  # each backend raises its own types
            raise PermissionError(
                f"checkpoint folder {self.metadata_dir} is not writable ({error}); "
                "check credentials or choose another checkpoint_path"
            ) from error

    def _entries(self) -> tuple[set[str], list[tuple[str, str, Fraction]], list[str], list[str]]:
        fs = self._fs()
        done: set[str] = set()
        partials: list[tuple[str, str, Fraction]] = []
        unreadable: list[str] = []
        files = sorted(fs.glob(f"{self.metadata_dir}/*/*.json"))
        for file in files:
            try:
                with fs.open(file, "r") as handle:
                    entry = json.load(handle)
                done.update(entry["done"])
                partials.extend((s, t, Fraction(c)) for s, t, c in entry["credits"])
            except (ValueError, KeyError, TypeError, OSError) as error:
                logger.warning("skipping unreadable checkpoint file %s: %s", file, error)
                unreadable.append(file)
        writers = sorted({file.rsplit("/", 2)[-2] for file in files})
        return done, partials, unreadable, writers

    def completed(self) -> set[str]:
        done, partials, _, _ = self._entries()
        return union_complete(done, partials)

    def record(self, task_id: str, credits: Mapping[str, Fraction]) -> list[str]:
        with _registry_lock:
            writer = _writers.get(self.metadata_dir)
            if writer is None or writer.pid != os.getpid():
                writer = _writers[self.metadata_dir] = _Writer(self._fs(), f"{self.metadata_dir}/{writer_name()}")
        return writer.record(task_id, credits)

    def status(self) -> CheckpointStatus:
        done, partials, unreadable, writers = self._entries()
        return CheckpointStatus(
            path=self.path, completed=len(union_complete(done, partials)),
            writer_files=writers, unreadable_files=unreadable,
        )

    def reset(self, force: bool = False) -> None:
        with _registry_lock:
            _writers.pop(self.metadata_dir, None)
        fs = self._fs()
        if fs.exists(self.metadata_dir):
            fs.rm(self.metadata_dir, recursive=True)
