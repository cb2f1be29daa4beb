"""What every phase of a workflow shares: run stages on Beam, remember what is
done, and check that what was done is still there.

A phase that finished leaves a small ``<name>.done.json`` holding the
fingerprint of its inputs and settings and a record of the files it produced
(names relative to the cache or output folder, sizes). A rerun skips the
phase only when the fingerprint matches and every recorded file is still
there at its size (one listing per folder); otherwise it runs the phase, whose
per-partition checkpoints redo only the partitions whose outputs are missing.
A marker that cannot be read is reported and treated as absent.

The exact, fuzzy and semantic workflows each keep a book; it logs through the
logger its workflow hands it, so that a phase's messages come under the name of
the workflow that ran it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem

from beam_curator.checkpoint import open_store, registry
from beam_curator.object_stores import delete_tree
from beam_curator.checkpoint.files import check_files, describe_files, join, relative_name
from beam_curator.pipeline import Pipeline, RunSummary, run_in_order
from beam_curator.stages import ProcessingStage
from beam_curator.stages.base import flatten_stages
from beam_curator.stages.io.partitioning import is_hidden
from beam_curator.writing import write_atomically
from beam_curator.stages.lineage import derive_sources, source_key
from beam_curator.tasks import EmptyTask
from beam_curator.transforms import locate_source_and_sink


class PhaseFailedError(RuntimeError):
    """Some partitions of a phase failed; they stay pending for the next run."""


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def remove_tree(url: str) -> None:
    """Delete a folder (or file), closing this process's checkpoint writers in it first."""
    fs, path = fsspec.core.url_to_fs(url)
    registry.close_below(os.path.abspath(url) if isinstance(fs, LocalFileSystem) else url)
    if fs.exists(path):
        delete_tree(fs, path)


def files_below(url: str) -> list[str]:
    """Every data file below ``url`` (none if it does not exist); names
    starting with ``.`` or ``_`` are not data."""
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return []
    root = path.rstrip("/") + "/"
    found = sorted(file for file in fs.find(path) if not is_hidden(file, root))
    return [join(url, file[len(root):]) for file in found]


@dataclass
class BeamSettings:
    """How phases run: a runner preset, its settings, and raw Beam flags."""

    runner: str | None = "local"
    beam_args: list[str] = field(default_factory=list)
    runner_settings: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FeederStep:
    """A Beam step that writes only what the next step of its phase reads:
    ``stages`` with their ``checkpoint``, writing into ``folder``."""

    name: str
    stages: list[ProcessingStage]
    checkpoint: str
    folder: str


class PhaseBook:
    """Done-markers of one workflow's phases under ``folder``.

    ``roots`` names the folders produced files are recorded relative to
    (``{"cache": ..., "output": ...}``), so that a moved cache still matches.
    ``log`` is the logger of the workflow that keeps the book.
    """

    def __init__(self, folder: str, beam: BeamSettings, roots: dict[str, str], log: logging.Logger) -> None:
        self.folder = folder.rstrip("/")
        self.log = log
        self.beam = beam
        self.roots = {name: root.rstrip("/") for name, root in roots.items()}
        self.times: dict[str, float] = {}
        self.ran: list[str] = []  # phases marked done by this run: none means it found everything done

    def _marker(self, name: str) -> str:
        return f"{self.folder}/{name}.done.json"

    def details(self, name: str) -> dict:
        """What the marker of ``name`` holds ({} when there is none, or it is unreadable)."""
        fs, path = fsspec.core.url_to_fs(self._marker(name))
        try:
            with fs.open(path, "r") as handle:
                found = json.load(handle)
            if not isinstance(found, dict):
                raise ValueError(f"expected a JSON object, found {type(found).__name__}")
            return found
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            self.log.warning("phase marker %s is unreadable (%s): phase %s runs again", self._marker(name), error, name)
            return {}

    def is_done(self, name: str, fingerprint: str) -> bool:
        """Done with these inputs and settings, and all it produced still there."""
        found = self.details(name)
        if found.get("fingerprint") != fingerprint:
            return False
        problems = [
            problem for root, records in found.get("produced", {}).items()
            for problem in check_files(self.roots[root], records)
        ]
        if problems:
            shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
            self.log.warning("phase %s ran before, but %s: running what produced it again", name, shown)
            return False
        return True

    def mark_done(self, name: str, fingerprint: str, produced: list[str] = (), **details: object) -> None:
        """Remember ``name`` as done, with the files (or folders' files) it produced."""
        records: dict[str, list] = {}
        for url in produced:
            root = self._root_of(url)
            files = files_below(url) if _is_folder(url) else [url]
            records.setdefault(root, []).extend(describe_files(self.roots[root], files))
        payload = json.dumps({"fingerprint": fingerprint, "produced": records, **details}, default=str).encode()
        write_atomically(self._marker(name), lambda handle: handle.write(payload))
        if not name.endswith("-started") and name not in self.ran:  # "-started": a phase's first step, not a phase
            self.ran.append(name)

    def _root_of(self, url: str) -> str:
        fitting = [name for name, root in self.roots.items() if url == root or url.startswith(root + "/")]
        if not fitting:
            raise ValueError(f"{url} is under none of {self.roots}")
        return max(fitting, key=lambda name: len(self.roots[name]))

    def forget(self, name: str) -> None:
        remove_tree(self._marker(name))

    def run_stages(self, name: str, stages: list[ProcessingStage], checkpoint: str) -> RunSummary:
        (summary,) = self.run_in_order([(name, stages, checkpoint)])
        return summary

    def run_in_order(self, steps: list[tuple[str, list[ProcessingStage], str]]) -> list[RunSummary]:
        """Run ``(name, stages, checkpoint)`` steps one after another in one
        Beam pipeline (see :func:`~beam_curator.pipeline.run_in_order`);
        raise if a partition of any of them did not complete."""
        summaries = run_in_order(
            [(Pipeline(name, stages=stages), checkpoint) for name, stages, checkpoint in steps], self.beam.runner,
            beam_args=self.beam.beam_args, changed_pipeline=None,  # the book keeps a checkpoint per settings
            **self.beam.runner_settings,
        )
        for (name, _, _), summary in zip(steps, summaries):
            self.log.info("%s: %s", name, summary)
        for (name, _, _), summary in zip(steps, summaries):
            if summary.tasks_failed or summary.partitions_incomplete:
                raise PhaseFailedError(
                    f"phase {name}: {summary.tasks_failed or summary.partitions_incomplete} "
                    f"{'task(s) failed' if summary.tasks_failed else 'partition(s) not completed'} "
                    "(see the log above); their partitions stay pending, so rerun the same command to retry them"
                )
        return summaries

    def run_partitioned(
        self, name: str, stages: list[ProcessingStage], checkpoint: str, settings: object, output: str,
        describe: Callable[[], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A phase whose sink writes ``output`` from source partitions that
        follow the current inputs: reused while the same partitions (keys carry
        their content fingerprints) and settings are done and their files are
        there; otherwise run for the partitions that need it, then rid
        ``output`` of files no current partition wrote (inputs removed since).
        Returns the marker's details: ``fingerprint``, ``rows`` (records in
        ``output``), ``files``, ``file_rows`` (records per file, by its name
        in ``output``), and what ``describe()`` adds once the phase ran."""
        keys = current_partitions(stages)
        key = digest([settings, keys])
        if self.is_done(name, key):
            self.log.info("%s: inputs and settings unchanged and outputs in place, nothing to do", name)
            return self.details(name)
        # One checkpoint folder per settings, so that losing the markers loses
        # no marks; those of other settings go first, as their files are about
        # to be overwritten.
        settings_checkpoint = f"{checkpoint.rstrip('/')}/{digest(settings)[:16]}"
        for other in _folders_in(checkpoint):
            if other.rsplit("/", 1)[-1] != settings_checkpoint.rsplit("/", 1)[-1]:
                remove_tree(other)
        self.run_stages(name, stages, settings_checkpoint)
        records = current_outputs(settings_checkpoint, keys)
        kept = {record[0] for record in records}
        stale = [url for url in files_below(output) if relative_name(output, url) not in kept]
        for url in stale:
            fs, path = fsspec.core.url_to_fs(url)
            fs.rm_file(path)
        if stale:
            self.log.info("%s: removed %d file(s) of inputs that are gone, e.g. %s", name, len(stale), stale[0])
        rows = sum(record[2] or 0 for record in records)
        self.mark_done(name, key, [output], rows=rows, files=len(records),
                       file_rows={record[0]: record[2] for record in records}, **(describe() if describe else {}))
        return self.details(name)

    def run_afresh(
        self, name: str, key: str, stages: list[ProcessingStage], checkpoint: str | None, outputs: list[str],
        results: Callable[[], dict[str, Any]], feeder: FeederStep | None = None,
    ) -> dict[str, Any]:
        """A phase over what earlier phases wrote (tasks of its own, not input
        partitions): reused while done with ``key`` and ``outputs`` are in
        place; with a new key, the old outputs and checkpoint go first (once:
        an interrupted run resumes from its checkpoint). ``results()`` runs
        after the stages (if any: a phase may be ``results()`` alone, without a
        checkpoint) and is kept in the marker (``outputs`` may include files it writes).
        A ``feeder`` runs first, in the same Beam pipeline; what it wrote goes
        once the stages are done with it, before the marker is written (a run
        stopped in between finds the stages' checkpoint complete: their outputs
        stand, and at worst the feeder runs again)."""
        if self.is_done(name, key):
            self.log.info("%s: inputs unchanged, reusing %s", name, ", ".join(outputs))
            return dict(self.details(name)["results"])
        if not self.is_done(f"{name}-started", key):
            feeding = [feeder.folder, feeder.checkpoint] if feeder else []
            for stale in (*outputs, *filter(None, [checkpoint]), *feeding):
                remove_tree(stale)
            self.mark_done(f"{name}-started", key)
        if feeder:
            self.run_in_order([(feeder.name, feeder.stages, feeder.checkpoint), (name, stages, checkpoint)])
            remove_tree(feeder.folder)
            remove_tree(feeder.checkpoint)
        elif stages and checkpoint:
            self.run_stages(name, stages, checkpoint)
        found = results()
        self.mark_done(name, key, outputs, results=found)
        return dict(found)

    @contextmanager
    def timed(self, name: str, always_runs: bool = False) -> Iterator[None]:
        """Count the block's seconds as ``name``'s in :attr:`times` if it ran a
        phase (marked one done): a block that found its phases done and reused
        them did no work of this run, and a summary must not list it as if it
        had. ``always_runs``: a block that keeps no marker and runs every time."""
        start, ran_before = time.monotonic(), len(self.ran)
        try:
            yield
        finally:
            if always_runs or len(self.ran) > ran_before:
                self.times[name] = self.times.get(name, 0.0) + time.monotonic() - start


def current_partitions(stages: list[ProcessingStage]) -> list[str]:
    """The checkpoint keys of the partitions the source stage lists now
    (computed in the driver: for file readers, one listing)."""
    flat = flatten_stages(list(stages))
    source = flat[locate_source_and_sink(flat)[0]]
    outcome = derive_sources(EmptyTask(), source.process(EmptyTask()), source.stage_name)
    return sorted(source_key(task) for task in outcome.outputs)


def current_outputs(checkpoint: str, keys: list[str]) -> list[list]:
    """The file records the sink wrote for these partitions (the latest candidate per task)."""
    outputs = open_store(checkpoint).snapshot().outputs
    return [
        record for key in keys for candidates in outputs.get(key, {}).values() for record in candidates[-1]
    ]


def _folders_in(url: str) -> list[str]:
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return []
    return [join(url, info["name"].rstrip("/").rsplit("/", 1)[-1]) for info in fs.ls(path, detail=True)
            if info["type"] == "directory"]


def _is_folder(url: str) -> bool:
    fs, path = fsspec.core.url_to_fs(url)
    return fs.isdir(path)
