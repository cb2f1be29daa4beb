"""Completion marks as small files, for object stores where LMDB cannot live.

LMDB needs mmap and POSIX locks, which gs://, s3:// and friends do not give.
Here each writing process appends numbered JSON files under
``<path>/.beam_curator_metadata/<hostname>-<pid>/``, each written whole (an
object-store PUT is atomic). A file holds the marks of up to
``flush_seconds`` (and is written at every bundle's end), because one PUT per
partition would cost more than small partitions themselves; a crash loses at
most those seconds of marks, which only replays their partitions. Start-up
lists and reads them concurrently, and unions them exactly like the LMDB
files. Object stores have no process
locks, so a reset cannot tell whether a writer is alive: stop runs first.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
import uuid
from fractions import Fraction
from typing import Any, Mapping

import fsspec

from beam_curator.checkpoint import registry
from beam_curator.checkpoint.ledger import CreditLedger
from beam_curator.checkpoint.store import (
    METADATA_DIR,
    CheckpointStatus,
    CheckpointStore,
    OutputRecord,
    Snapshot,
    writer_name,
)
from beam_curator.object_stores import delete_tree
from beam_curator.writing import writing

def _empty() -> dict[str, Any]:
    """The contents of one marks file with nothing in it yet."""
    return {"done": [], "credits": [], "outputs": [], "inputs": {}}

logger = logging.getLogger(__name__)


class _Writer:
    def __init__(self, fs: fsspec.AbstractFileSystem, folder: str, flush_seconds: float = 1.0) -> None:
        self.pid = os.getpid()
        self.fs = fs
        self.folder = folder
        self.ledger = CreditLedger()
        self.sequence = itertools.count()
        # A restarted container can reuse hostname and pid: never overwrite its files.
        self.token = uuid.uuid4().hex[:12]
        fs.makedirs(folder, exist_ok=True)
        self.mutex = threading.Lock()
        self.flush_seconds = flush_seconds
        self.flushed_at = time.monotonic()
        self.pending = _empty()

    def record(self, task_id: str, credits: Mapping[str, Fraction], outputs: list[OutputRecord] | None) -> list[str]:
        with self.mutex:
            finished = self.ledger.add(task_id, credits)
            self.pending["done"] += finished
            self.pending["credits"] += [
                [s, task_id, str(c)] for s, c in credits.items() if s not in self.ledger.complete
            ]
            if outputs:
                self.pending["outputs"] += [[s, task_id, outputs] for s in credits]
            self._maybe_write()
            return finished

    def record_inputs(self, inputs: Mapping[str, dict[str, Any]]) -> None:
        with self.mutex:
            now = time.time()
            self.pending["inputs"].update({key: {"files": files, "t": now} for key, files in inputs.items()})
            self._maybe_write()

    def _maybe_write(self) -> None:
        if time.monotonic() - self.flushed_at >= self.flush_seconds:
            self._write()

    def _write(self) -> None:
        if any(self.pending.values()):
            name = f"{self.folder}/{self.token}-{next(self.sequence):012d}.json"
            with writing(name), self.fs.open(name, "w") as handle:
                json.dump(self.pending, handle)
            self.pending = _empty()
        self.flushed_at = time.monotonic()

    def flush(self) -> None:
        with self.mutex:
            self._write()


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
            fs.rm_file(probe)  # one object: S3's DeleteObject, not the bulk DeleteObjects some servers refuse
        except Exception as error:  # each backend raises its own types
            raise PermissionError(
                f"checkpoint folder {self.metadata_dir} is not writable ({error}); "
                "check credentials or choose another checkpoint_path"
            ) from error

    def _entries(self) -> tuple[Snapshot, list[str]]:
        self.flush()  # this process's own marks first
        fs = self._fs()
        found = Snapshot()
        files = sorted(fs.glob(f"{self.metadata_dir}/*/*.json"))
        contents = fs.cat(files, on_error="return") if files else {}
        for file in files:
            try:
                content = contents[file]
                if isinstance(content, Exception):
                    raise OSError(str(content))
                entry = {**_empty(), **json.loads(content)}
                found.done.update(entry["done"])
                found.partials.extend((s, t, Fraction(c)) for s, t, c in entry["credits"])
                for source, task_id, records in entry["outputs"]:
                    found.add_outputs(source, task_id, records)
                for source, record in entry["inputs"].items():
                    found.add_inputs(source, record)
            except (ValueError, KeyError, TypeError, OSError) as error:
                logger.warning("skipping unreadable checkpoint file %s: %s", file, error)
                found.unreadable.append(file)
        writers = sorted({file.rsplit("/", 2)[-2] for file in files})
        return found, writers

    def snapshot(self) -> Snapshot:
        return self._entries()[0]

    def _writer(self) -> _Writer:
        folder = f"{self.metadata_dir}/{writer_name()}"
        return registry.writer_for(self.metadata_dir, lambda: _Writer(self._fs(), folder))

    def status(self) -> CheckpointStatus:
        found, writers = self._entries()
        return CheckpointStatus(
            path=self.path, completed=len(found.completed()),
            writer_files=writers, unreadable_files=found.unreadable,
        )

    def reset(self, force: bool = False) -> None:
        registry.discard(self.metadata_dir)
        fs = self._fs()
        if fs.exists(self.metadata_dir):
            delete_tree(fs, self.metadata_dir)
