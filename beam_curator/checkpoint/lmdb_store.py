"""Completion marks in LMDB files: one per writing process, unioned at start-up.

Layout: ``<path>/.beam_curator_metadata/<hostname>-<pid>.mdb`` (plus a
``.lock`` file the writer holds with ``flock`` while it lives). Keys:
``d/<source>`` marks a partition this writer saw finish; ``c/<source>/<task>``
holds a credit returned here for a partition not (yet) finished here, so a
partition whose descendants ran on several workers completes when the
writers' credits are summed at the next start-up. ``o/<source>/<task>`` keeps
what a terminal task wrote (JSON), ``f/<source>`` what the partition's files
looked like when it started (JSON), so that a rerun can check both.

py-lmdb refuses to open one file twice in a process, so open environments
live in this module's registry (importable from every worker), not in the
store objects that are pickled into DoFns.
"""

from __future__ import annotations

import fcntl
import glob
import json
import logging
import os
import shutil
import threading
import time
from fractions import Fraction
from typing import Any, Iterator, Mapping

import lmdb

from beam_curator.checkpoint import registry
from beam_curator.checkpoint.ledger import CreditLedger
from beam_curator.checkpoint.store import (
    METADATA_DIR,
    CheckpointBusyError,
    CheckpointStatus,
    CheckpointStore,
    OutputRecord,
    Snapshot,
    writer_name,
)
from beam_curator.errors import OutputWriteError
from beam_curator.writing import writing

logger = logging.getLogger(__name__)

_DONE = b"d/"
_CREDIT = b"c/"
_OUTPUT = b"o/"
_INPUT = b"f/"


class _Writer:
    """This process's LMDB file for one checkpoint folder.

    Every mark is committed at once, so it reaches the kernel and survives the
    process being killed; the file is synced to disk at most every
    ``sync_seconds`` and at each bundle's end, not per mark (an fsync per
    partition doubled the cost of small partitions). A machine crash can
    thus lose the last second of marks, which only replays those partitions:
    their outputs were synced before they were marked.
    """

    def __init__(self, metadata_dir: str, map_size: int, sync_seconds: float = 1.0) -> None:
        self.pid = os.getpid()
        self.file = os.path.join(metadata_dir, f"{writer_name()}.mdb")
        created = not os.path.exists(self.file)
        with writing(self.file):
            os.makedirs(metadata_dir, exist_ok=True)
            self._lock_file = open(self.file + ".lock", "w")
            try:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # lock=False: only this process writes the file and readers open it read-only.
                self.env = lmdb.open(self.file, subdir=False, map_size=map_size, lock=False, sync=False, metasync=False)
            except BaseException:
                # Let go of the lock, or a rerun in this process could not take it, and of a file
                # that a full disk left half made (it holds no mark, and no LMDB can open it again).
                self._lock_file.close()
                if created and os.path.exists(self.file):
                    os.remove(self.file)
                raise
        self.ledger = CreditLedger()
        self.mutex = threading.Lock()
        self.sync_seconds = sync_seconds
        self.synced_at = time.monotonic()
        self.dirty = False

    def record(self, task_id: str, credits: Mapping[str, Fraction], outputs: list[OutputRecord] | None) -> list[str]:
        # A commit that fails (a full disk: LMDB reports "No space left on device") writes nothing, and
        # the ledger counts the task only once it is committed.
        with self.mutex, writing(self.file):
            finished = self.ledger.add(task_id, credits, lambda done: self._commit(task_id, credits, outputs, done))
            self._committed()
            return finished

    def _commit(self, task_id: str, credits: Mapping[str, Fraction], outputs: list[OutputRecord] | None,
                finished: list[str]) -> None:
        with self.env.begin(write=True) as txn:
            for source, share in credits.items():
                if outputs:
                    txn.put(_OUTPUT + f"{source}/{task_id}".encode(), json.dumps(outputs).encode())
                if source not in finished and source not in self.ledger.complete:
                    key = _CREDIT + f"{source}/{task_id}".encode()
                    txn.put(key, f"{share.numerator}/{share.denominator}".encode())
            for source in finished:
                txn.put(_DONE + source.encode(), b"")
                _delete_prefix(txn, _CREDIT + f"{source}/".encode())

    def record_inputs(self, inputs: Mapping[str, dict[str, Any]]) -> None:
        with self.mutex, writing(self.file):
            with self.env.begin(write=True) as txn:
                for source, files in inputs.items():
                    txn.put(_INPUT + source.encode(), json.dumps({"files": files, "t": time.time()}).encode())
            self._committed()

    def _committed(self) -> None:
        self.dirty = True
        if time.monotonic() - self.synced_at >= self.sync_seconds:
            self._sync()

    def _sync(self) -> None:
        with writing(self.file):
            self.env.sync(True)
        self.synced_at = time.monotonic()
        self.dirty = False

    def flush(self) -> None:
        with self.mutex:
            if self.dirty:
                self._sync()

    def close(self) -> None:
        with self.mutex:  # not in the middle of another thread's commit
            if self.dirty:
                self._sync()
            self.env.close()
            self._lock_file.close()


def _delete_prefix(txn: lmdb.Transaction, prefix: bytes) -> None:
    cursor = txn.cursor()
    if cursor.set_range(prefix):
        while cursor.key().startswith(prefix):
            if not cursor.delete():
                break


def _read_rows(env: lmdb.Environment) -> Iterator[tuple[bytes, bytes]]:
    with env.begin() as txn:
        yield from txn.cursor()


class LmdbCheckpointStore(CheckpointStore):
    """The default store for local and shared POSIX folders."""

    def __init__(self, path: str, map_size: int = 1 << 30) -> None:
        super().__init__(path)
        self.map_size = map_size
        self.metadata_dir = os.path.abspath(os.path.join(path, METADATA_DIR))

    def check_writable(self) -> None:
        probe = os.path.join(self.metadata_dir, f".probe-{os.getpid()}")
        try:
            with writing(probe):
                os.makedirs(self.metadata_dir, exist_ok=True)
                with open(probe, "w") as handle:
                    handle.write("ok")
                os.remove(probe)
        except OutputWriteError:
            raise
        except OSError as error:
            raise PermissionError(
                f"checkpoint folder {self.metadata_dir} is not writable ({error.strerror}); "
                "choose another checkpoint_path or fix its permissions"
            ) from error

    def writer_files(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.metadata_dir, "*.mdb")))

    def _read_file(self, file: str) -> list[tuple[bytes, bytes]]:
        """The rows of another writer's file, read again once if the first read fails: while a stopped
        run's worker processes are torn down, a thread of theirs in this process that closes a
        descriptor late can close the one lmdb has just opened ("Bad file descriptor", seen once on
        the multi-process runner); a file that is really unreadable fails twice."""
        try:
            return self._read_once(file)
        except lmdb.Error:
            return self._read_once(file)

    def _read_once(self, file: str) -> list[tuple[bytes, bytes]]:
        env = lmdb.open(file, subdir=False, readonly=True, lock=False, map_size=self.map_size)
        try:
            return list(_read_rows(env))
        finally:
            env.close()

    def snapshot(self) -> Snapshot:
        found = Snapshot()
        own = registry.current(self.metadata_dir)
        for file in self.writer_files():
            try:
                rows = list(_read_rows(own.env)) if own is not None and own.file == file else self._read_file(file)
                for key, value in rows:
                    prefix, rest = key[:2], key[2:].decode()
                    if prefix == _DONE:
                        found.done.add(rest)
                    elif prefix == _CREDIT:
                        source, task_id = rest.split("/", 1)
                        found.partials.append((source, task_id, Fraction(value.decode())))
                    elif prefix == _OUTPUT:
                        source, task_id = rest.split("/", 1)
                        found.add_outputs(source, task_id, json.loads(value))
                    elif prefix == _INPUT:
                        found.add_inputs(rest, json.loads(value))
            except (lmdb.Error, UnicodeDecodeError, ValueError) as error:
                logger.warning("skipping unreadable checkpoint file %s: %s", file, error)
                found.unreadable.append(file)
        return found

    def _writer(self) -> _Writer:
        return registry.writer_for(self.metadata_dir, lambda: _Writer(self.metadata_dir, self.map_size))

    def _live_writers(self) -> list[str]:
        live = []
        for lock_path in sorted(glob.glob(os.path.join(self.metadata_dir, "*.mdb.lock"))):
            with open(lock_path, "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    live.append(lock_path[: -len(".lock")])
        return live

    def status(self) -> CheckpointStatus:
        found = self.snapshot()
        return CheckpointStatus(
            path=self.path,
            completed=len(found.completed()),
            writer_files=self.writer_files(),
            unreadable_files=found.unreadable,
            live_writers=self._live_writers(),
        )

    def reset(self, force: bool = False) -> None:
        writer = registry.discard(self.metadata_dir)
        if writer is not None:
            writer.close()
        live = self._live_writers()
        if live and not force:
            raise CheckpointBusyError(
                f"checkpoint {self.path} is in use by running writers ({', '.join(live)}); "
                "stop that run first, or reset with force=True (--force) if it is dead"
            )
        shutil.rmtree(self.metadata_dir, ignore_errors=True)
