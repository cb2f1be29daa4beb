"""The checkpoint store interface, independent of storage and engine.

Every writing process owns one writer file and is the only one to write it;
a run starts by reading the union of all writers' files. That needs no
coordination between workers and survives any of them dying.
"""

from __future__ import annotations

import json
import os
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Protocol

import fsspec

from beam_curator.checkpoint import registry
from beam_curator.checkpoint.ledger import union_complete
from beam_curator.writing import write_atomically

METADATA_DIR = ".beam_curator_metadata"
PIPELINE_FILE = "pipeline.json"

# One written file of a terminal task: [name relative to the sink's folder, bytes, records].
OutputRecord = list


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


@dataclass
class Snapshot:
    """Everything the writer files hold, unioned.

    ``inputs[key]`` is what the partition's files looked like when it was last
    started (``{"files": {path: [size, mtime]}, "t": time}``; the latest wins).
    ``outputs[key][task_id]`` lists what each writer recorded that terminal
    task wrote: several candidates when a task was written again after its
    output went missing, of which one must match the disk.
    """

    done: set[str] = field(default_factory=set)
    partials: list[tuple[str, str, Fraction]] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, list[list[OutputRecord]]]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    def completed(self) -> set[str]:
        return union_complete(self.done, self.partials)

    def add_inputs(self, key: str, record: dict[str, Any]) -> None:
        if record.get("t", 0) >= self.inputs.get(key, {}).get("t", -1):
            self.inputs[key] = record

    def add_outputs(self, key: str, task_id: str, records: list[OutputRecord]) -> None:
        candidates = self.outputs.setdefault(key, {}).setdefault(task_id, [])
        if records not in candidates:
            candidates.append(records)


class StoreWriter(Protocol):
    """One process's writer of a store's files."""

    pid: int

    def record(self, task_id: str, credits: Mapping[str, Fraction], outputs: list[OutputRecord] | None) -> list[str]: ...

    def record_inputs(self, inputs: Mapping[str, dict[str, Any]]) -> None: ...

    def flush(self) -> None: ...


class CheckpointStore(ABC):
    """Where completion marks live. Instances hold configuration only, so they
    pickle cheaply into workers; open handles live in per-process registries."""

    metadata_dir: str

    def __init__(self, path: str) -> None:
        self.path = path

    @abstractmethod
    def check_writable(self) -> None:
        """Fail before the run starts if marks could not be written."""

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """The union of all writers' files."""

    def completed(self) -> set[str]:
        """Source partitions complete according to the union of all writers."""
        return self.snapshot().completed()

    @abstractmethod
    def _writer(self) -> StoreWriter:
        """This process's writer, opened on first use (kept in ``registry``)."""

    def record(
        self, task_id: str, credits: Mapping[str, Fraction], outputs: list[OutputRecord] | None = None
    ) -> list[str]:
        """Durably return a terminal task's credits from this process, with the
        files it wrote (if any); return the partitions this completed."""
        return self._writer().record(task_id, credits, outputs)

    def record_inputs(self, inputs: Mapping[str, dict[str, Any]]) -> None:
        """Durably keep what started partitions' files look like (``{key: {path: [size, mtime]}}``)."""
        self._writer().record_inputs(inputs)

    def open_writer(self) -> None:
        """Open this process's writer for a run now (and hold its lock, where
        the store has one), so that a reset started meanwhile sees a live run.
        A writer an earlier run of this process left open is closed first, so
        that each run writes as a new process would: that writer remembers
        its run's complete partitions (and reports each only once), and its
        file may have been deleted since (a user starting afresh), so its
        marks would go where no reader looks."""
        registry.close(self.metadata_dir)
        self._writer()

    def close_writer(self) -> None:
        """Close this process's writer (its marks made durable, its lock let go) once its run has ended:
        a notebook or service that ran a pipeline and lives on would otherwise hold the checkpoint as a
        live run does, and a reset from a shell would be refused."""
        registry.close(self.metadata_dir)

    def flush(self) -> None:
        """Make this process's recorded marks durable now (called at bundle ends)."""
        registry.flush(self.metadata_dir)

    def recorded_pipeline(self) -> Any:
        """What the marks here were made by (``record_pipeline``), or None if nothing was recorded."""
        fs, path = fsspec.core.url_to_fs(f"{self.metadata_dir}/{PIPELINE_FILE}")
        try:
            return json.loads(fs.cat_file(path))
        except (FileNotFoundError, ValueError):
            return None

    def record_pipeline(self, description: Any) -> None:
        """Keep ``description`` (of the stages and their settings) with the marks; a reset forgets it."""
        payload = json.dumps(description, indent=1).encode()
        write_atomically(f"{self.metadata_dir}/{PIPELINE_FILE}", lambda handle: handle.write(payload))

    @abstractmethod
    def status(self) -> CheckpointStatus:
        """What is on disk."""

    @abstractmethod
    def reset(self, force: bool = False) -> None:
        """Forget every mark. Refuses while a writer is alive unless ``force``."""


class CheckpointBusyError(RuntimeError):
    """A reset was refused because a writer process is still running."""

