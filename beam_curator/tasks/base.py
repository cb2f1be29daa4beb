"""The unit of work that flows between stages.

A task carries its payload plus two pieces of framework-owned lineage state:
``task_id`` (re-derived at every stage boundary, so stage code never sets it)
and ``_credits`` (the share of each source partition it stands for). Keeping
both on the task lets the completion tracker work from terminal events alone,
wherever and in whatever order they happen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Task(Generic[T]):
    """Base class of all tasks: ``data`` is the payload, ``_metadata`` is free-form.

    ``_stage_perf`` holds per-stage performance records as in NeMo Curator
    (accepted so that code building tasks with it ports; Beam's metrics,
    not this list, carry our per-stage counters).
    """

    task_id: str = ""
    dataset_name: str = ""
    data: T | None = None
    _metadata: dict[str, Any] = field(default_factory=dict)
    _credits: dict[str, Fraction] = field(default_factory=dict, repr=False)
    _stage_perf: list[Any] = field(default_factory=list, repr=False)

    def add_stage_perf(self, perf_stats: Any) -> None:
        self._stage_perf.append(perf_stats)

    @property
    def num_items(self) -> int:
        """How many records the task holds (1 for opaque payloads)."""
        return 1

    def get_deterministic_id(self) -> str | None:
        """A stable id for a source partition, or None to fall back to its position.

        Overridden by task types whose identity can be derived from their
        content description (file paths, shard names), so that a rerun finds
        the same partitions under the same ids.
        """
        return None

    def validate(self) -> bool:
        return True


@dataclass
class EmptyTask(Task[None]):
    """The root of every lineage: the single input of the source stage."""

    task_id: str = "0"


class _Sentinel(Task[None]):
    """A marker a stage returns instead of a real task."""


class NoneTask(_Sentinel):
    """Returned to filter a task out: its partition can still complete."""


class FailedTask(_Sentinel):
    """Returned when a task could not be processed: its source partition stays
    incomplete and is replayed on the next run."""

    def __init__(self, reason: str = "") -> None:
        super().__init__()
        self.reason = reason
