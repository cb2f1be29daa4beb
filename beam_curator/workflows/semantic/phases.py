"""What every phase of a workflow shares: run stages on Beam, remember what is done.

A phase that finished leaves a small ``<name>.done.json`` holding the
fingerprint of its inputs and settings; a rerun with the same fingerprint
skips the phase entirely, and a different fingerprint clears the phase's
outputs so that stale results are never mixed with new ones. Inside a phase,
the per-partition checkpoints make an interrupted run resume.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import fsspec

from beam_curator.pipeline import Pipeline, RunSummary
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.writer import write_atomically

logger = logging.getLogger(__name__)


class PhaseFailedError(RuntimeError):
    """Some partitions of a phase failed; they stay pending for the next run."""


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def remove_tree(url: str) -> None:
    fs, path = fsspec.core.url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


@dataclass
class BeamSettings:
    """How phases run: a runner preset, its settings, and raw Beam flags."""

    runner: str | None = "local"
    beam_args: list[str] = field(default_factory=list)
    runner_settings: dict[str, object] = field(default_factory=dict)


class PhaseBook:
    """Done-markers of one workflow's phases under ``folder``."""

    def __init__(self, folder: str, beam: BeamSettings) -> None:
        self.folder = folder.rstrip("/")
        self.beam = beam
        self.times: dict[str, float] = {}

    def _marker(self, name: str) -> str:
        return f"{self.folder}/{name}.done.json"

    def details(self, name: str) -> dict:
        """What the marker of ``name`` holds ({} when there is none)."""
        fs, path = fsspec.core.url_to_fs(self._marker(name))
        if not fs.exists(path):
            return {}
        with fs.open(path, "r") as handle:
            return json.load(handle)

    def is_done(self, name: str, fingerprint: str) -> bool:
        return self.details(name).get("fingerprint") == fingerprint

    def mark_done(self, name: str, fingerprint: str, **details: object) -> None:
        fs, path = fsspec.core.url_to_fs(self._marker(name))
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        payload = json.dumps({"fingerprint": fingerprint, **details}, default=str).encode()
        write_atomically(self._marker(name), lambda handle: handle.write(payload))

    def forget(self, name: str) -> None:
        remove_tree(self._marker(name))

    def run_stages(self, name: str, stages: list[ProcessingStage], checkpoint: str) -> RunSummary:
        summary = Pipeline(name, stages=stages).run(
            checkpoint, self.beam.runner, beam_args=self.beam.beam_args, **self.beam.runner_settings
        )
        logger.info("%s: %s", name, summary)
        if summary.tasks_failed:
            raise PhaseFailedError(
                f"phase {name}: {summary.tasks_failed} task(s) failed (see the log above); "
                "their partitions stay pending, so rerun the same command to retry them"
            )
        return summary

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.monotonic() - start
