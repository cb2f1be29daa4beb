"""``RunSummary``: what a run did, and how Beam's metrics and the checkpoint become one.

Every stage's DoFn counts partitions and tasks in Beam counters of the
package's namespace; the driver reads them back per chain once the job ends.
Which partitions completed is read from the checkpoint itself
(``counted_in_checkpoint``): an engine that retries a failed task may lose
the counts of the attempt that completed it (Spark).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from beam_curator.checkpoint import CheckpointStore
from beam_curator.stages.text.filters.dropped import DOCUMENTS_DROPPED, DOCUMENTS_IN, DOCUMENTS_KEPT
from beam_curator.transforms.stage_dofns import NAMESPACE


@dataclass
class RunSummary:
    """What a run did: its partitions as the checkpoint has them, its tasks as Beam's metrics count them
    (none on Dask)."""

    partitions_pending: int = 0
    partitions_skipped: int = 0
    partitions_completed: int = 0
    partitions_changed: int = 0
    partitions_incomplete: int = 0  # pending but not marked complete after the run
    started: bool = True  # False: a step of ``run_in_order`` whose step before did not complete
    counters: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # of the Beam pipeline that ran it (steps of ``run_in_order`` share one)

    @property
    def tasks_failed(self) -> int:
        return sum(value for name, value in self.counters.items() if name.endswith(".failed"))

    @property
    def filters(self) -> dict[str, dict[str, int]]:
        """Each filter's documents ``in``, ``kept`` and ``dropped``, by the name its counters have
        (the stage's, or ``<stage>.<filter>`` in a chain): why the documents that went, went."""
        suffixes = {f".{DOCUMENTS_IN}": "in", f".{DOCUMENTS_KEPT}": "kept", f".{DOCUMENTS_DROPPED}": "dropped"}
        counts: dict[str, dict[str, int]] = {}
        for name, value in self.counters.items():
            for suffix, what in suffixes.items():
                if name.endswith(suffix):
                    counts.setdefault(name[:-len(suffix)], {"in": 0, "kept": 0, "dropped": 0})[what] = value
        return counts

    @property
    def complete(self) -> bool:
        """Every pending partition completed and no task failed: the next step of ``run_in_order`` may start."""
        return self.started and not self.tasks_failed and not self.partitions_incomplete and (
            self.partitions_completed >= self.partitions_pending
        )

    def __str__(self) -> str:
        if not self.started:
            return "not started: the step before it did not complete"
        changed = (
            f" ({self.partitions_changed} of them with changed files: see the warnings)" if self.partitions_changed else ""
        )
        return (
            f"{self.partitions_pending} partitions pending, {self.partitions_skipped} skipped as complete{changed}, "
            f"{self.partitions_completed} completed this run, {self.tasks_failed} tasks failed"
            + (f", {self.partitions_incomplete} partitions not completed" if self.partitions_incomplete else "")
            + f" ({self.seconds:.1f} s)"
            + "".join(f"\n  {name}: {count['in']} documents in, {count['kept']} kept, {count['dropped']} dropped"
                      for name, count in sorted(self.filters.items()))
        )


def summary_from_metrics(result: PipelineResult, name: str, seconds: float) -> RunSummary:
    """The summary of the chain applied as ``name`` in the finished job ``result``."""
    counters = _counters(result, name)
    return RunSummary(
        partitions_pending=counters.get("partitions_pending", 0),
        partitions_skipped=counters.get("partitions_skipped", 0),
        partitions_completed=counters.get("partitions_completed", 0),
        partitions_changed=counters.get("partitions_changed", 0),
        counters=counters,
        seconds=seconds,
    )


def counted_in_checkpoint(summary: RunSummary, pending_keys: set[str], store: CheckpointStore) -> RunSummary:
    """``summary`` with its partitions counted from the keys the run listed as pending and the marks
    ``store`` holds now: those marked complete, and those that are not."""
    completed = len(pending_keys & store.completed())
    summary.partitions_pending = len(pending_keys)
    summary.partitions_completed = completed
    summary.partitions_incomplete = len(pending_keys) - completed
    return summary


def _counters(result: PipelineResult, name: str) -> dict[str, int]:
    """The counters of the chain applied as ``name``. Its stages are labelled ``name/NN-stage``;
    Java job servers (Flink, Spark) report the step as the transform's id in the pipeline proto
    instead, ``ref_AppliedPTransform_<label with / as ->_<n>``."""
    proto_id = re.compile(rf"^ref_AppliedPTransform_{re.escape(re.sub(r'[^a-zA-Z0-9_-]+', '-', name))}-\d\d-")
    counters: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        step = counter.key.step
        if not (step.startswith(f"{name}/") or proto_id.match(step)):
            continue
        try:
            value = counter.committed
        except Exception:  # some portable runners only report attempted values
            value = None
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value or counter.attempted or 0)
    return counters
