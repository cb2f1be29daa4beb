"""Lineage ids and completion credits, applied at every stage boundary.

Ids: root ``0``; a source output appends its deterministic id (or its
position), and its checkpoint key adds a digest of its content where the
source computed one; a one-to-one result appends ``_0``; a fan-out appends each child's
position. Credits: a source partition starts with exactly 1
(``fractions.Fraction``), a task's credit is split equally among its
children, and each terminal task (written by the sink, or filtered) returns
its share. A partition is complete when the returned shares sum to exactly 1,
whatever order they arrive in (credit-recovery termination detection).

This module is pure: the Beam DoFns and the property tests both drive it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable

from beam_curator.stages.base import ProcessingStage, StageResult
from beam_curator.tasks import FailedTask, NoneTask, Task

logger = logging.getLogger(__name__)
Credits = dict[str, Fraction]


class LineageError(ValueError):
    """A stage broke a lineage rule (e.g. an underscore in a deterministic id)."""


@dataclass
class StepOutcome:
    """What one call of a stage produced, sorted by what happens to it next."""

    outputs: list[Task] = field(default_factory=list)
    filtered: list[Task] = field(default_factory=list)
    failed: list[FailedTask] = field(default_factory=list)

    def extend(self, other: "StepOutcome") -> None:
        self.outputs.extend(other.outputs)
        self.filtered.extend(other.filtered)
        self.failed.extend(other.failed)


def split_credits(credits: Credits, parts: int) -> Credits:
    return {source: share / parts for source, share in credits.items()}


def _as_list(result: StageResult) -> list:
    if result is None:
        return [None]
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _child(task: Task, task_id: str, credits: Credits, inherited: dict | None = None) -> Task:
    """A copy of ``task`` under a new id: returning the same object (or the same
    object twice) must still give distinct lineage nodes. The parent's
    metadata (``inherited``) fills what the stage's result leaves out, so that
    ``source_files`` survives a stage that builds a fresh task."""
    child = copy.copy(task)
    child._metadata = {**(inherited or {}), **task._metadata}
    child.task_id = task_id
    child._credits = credits
    return child


def _is_filtered(result: object) -> bool:
    return result is None or isinstance(result, NoneTask)


def derive(parent: Task, result: StageResult, stage_name: str) -> StepOutcome:
    """Give the results of ``stage.process(parent)`` their ids and credits."""
    outcome = StepOutcome()
    items = _as_list(result)
    if items and all(_is_filtered(item) for item in items):
        outcome.filtered.append(parent)
        return outcome
    # An empty list returns no credit: the partition stays pending (replayed).
    kept = [item for item in items if not _is_filtered(item)]
    share = split_credits(parent._credits, len(kept)) if kept else {}
    for position, item in enumerate(kept):
        _check_task(item, stage_name)
        if isinstance(item, FailedTask):
            logger.warning("stage %s failed task %s: %s", stage_name, parent.task_id, item.reason or "no reason given")
            outcome.failed.append(item)
        else:
            outcome.outputs.append(_child(item, f"{parent.task_id}_{position}", share, parent._metadata))
    return outcome


def derive_batch(parents: list[Task], results: list[StageResult], stage_name: str) -> StepOutcome:
    """Give the results of ``stage.process_batch(parents)`` ids and credits.

    One result per input is matched by position. Any other count cannot be
    attributed to single inputs, so the batch is treated as one merged task:
    its pooled credits are split equally among the outputs. That keeps every
    source's credit exact (it completes only when all the outputs terminate),
    at the price of tying the inputs' partitions together.
    """
    if len(results) == len(parents):
        outcome = StepOutcome()
        for parent, result in zip(parents, results):
            outcome.extend(derive(parent, result, stage_name))
        return outcome
    logger.warning(
        "stage %s returned %d results for a batch of %d tasks; their partitions complete together",
        stage_name, len(results), len(parents),
    )
    pooled: Credits = {}
    for parent in parents:
        for source, share in parent._credits.items():
            pooled[source] = pooled.get(source, Fraction(0)) + share
    anchor = min(parents, key=lambda task: task.task_id)
    merged = _child(anchor, anchor.task_id, pooled)
    return derive(merged, results, stage_name)


def derive_sources(root: Task, result: StageResult, stage_name: str) -> StepOutcome:
    """Turn the source stage's outputs into source partitions, each with credit 1."""
    outcome = StepOutcome()
    seen: set[str] = set()
    kept = [item for item in _as_list(result) if not _is_filtered(item)]
    for position, item in enumerate(kept):
        _check_task(item, stage_name)
        if isinstance(item, FailedTask):  # nothing to replay: no partition exists yet
            raise ValueError(
                f"Source stage {stage_name} emitted FailedTask ({item.reason or 'no reason given'}); a source stage "
                "lists partitions and cannot fail one: raise an exception naming the bad input instead"
            )
        segment = item.get_deterministic_id()
        if segment is None:
            segment = str(position)
        elif "_" in segment or "/" in segment:
            raise LineageError(
                f"stage {stage_name}: deterministic id {segment!r} of {type(item).__name__} contains '_' or '/', "
                "which separate lineage segments and checkpoint keys; return an id without them from "
                "get_deterministic_id()"
            )
        task_id = f"{root.task_id}_{segment}"
        if task_id in seen:
            raise LineageError(
                f"stage {stage_name}: two source partitions share the id {task_id!r}; "
                "make get_deterministic_id() unique per partition (are two groups built from the same files?)"
            )
        seen.add(task_id)
        outcome.outputs.append(_child(item, task_id, {partition_key(task_id, item): Fraction(1)}))
    return outcome


def partition_key(task_id: str, partition: Task) -> str:
    """The checkpoint key of a source partition: its lineage id, plus the
    digest of its content when its source computed one
    (``_metadata["fingerprint"]``). Output names keep following the lineage
    id, so a changed partition rewrites its own files, while credits of the
    old and the new content can never add up."""
    fingerprint = partition._metadata.get("fingerprint")
    return f"{task_id}@{fingerprint}" if fingerprint else task_id


def source_key(partition: Task) -> str:
    """The checkpoint key of a partition that ``derive_sources`` produced."""
    (key,) = partition._credits
    return key


def _check_task(item: object, stage_name: str) -> None:
    if not isinstance(item, Task):
        raise TypeError(
            f"stage {stage_name} returned {type(item).__name__}; process() must return a Task, "
            "a list of Tasks, None (filter) or FailedTask()"
        )


def run_stage(stage: ProcessingStage, tasks: Iterable[Task]) -> StepOutcome:
    """Apply a stage to tasks outside any engine (tests, local debugging)."""
    tasks = list(tasks)
    if stage.uses_batches():
        return derive_batch(tasks, stage.process_batch(tasks), stage.stage_name)
    outcome = StepOutcome()
    for task in tasks:
        outcome.extend(derive(task, stage.process(task), stage.stage_name))
    return outcome
