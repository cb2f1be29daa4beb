"""``completion="stateful"``: partitions completed by a keyed, stateful DoFn.

The fused completion (the default) returns credits from inside the sink's
and the filters' DoFns, into each worker process's own ledger. Here those
DoFns emit each credit as an element keyed by its source partition instead;
:class:`CompleteByState` keeps the credits returned for a partition in Beam
state, one entry per task id (so a retried or duplicated element credits
nothing twice), and the moment they sum to exactly 1 writes the partition's
mark, with every file its tasks wrote, through the same
``CheckpointStore.record`` the fused path calls. It then clears the credits
and keeps only a flag, so a late duplicate cannot start a second tally.

A runner sees the keyed DoFn after a shuffle, so when the marks appear
depends on it: as partitions finish on a streaming runner (Flink with
``--streaming``), only once the stages before it have finished everywhere on
a batch runner (measured on the local runner, Spark and Flink); docs/pipelines.md's "Stateful
completion" gives the figures. The state of a partition
that never completes (a task failed) lives until its global window ends,
which a bounded pipeline reaches when its input is exhausted: no timer is
needed to collect it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterator, Tuple

import apache_beam as beam
from apache_beam.coders import BooleanCoder, PickleCoder
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec

from beam_curator.checkpoint import CreditLedger
from beam_curator.transforms.stage_dofns import Recording

COMPLETIONS = ("fused", "stateful")

# One returned credit: (task id, its share of the partition, the files it wrote or None).
Returned = tuple[str, Fraction, Any]
CREDIT_TYPE = Tuple[str, Any]  # (source partition, Returned): a str key, whose coder is deterministic as state needs


def check_completion(completion: str, runner: str | None = None) -> str:
    """``completion`` if it names a completion mode that ``runner`` can run; a ValueError naming it otherwise."""
    if completion not in COMPLETIONS:
        raise ValueError(
            f"completion must be 'fused' (marks written by the sink's DoFn; the default) or 'stateful' "
            f"(marks written by a keyed stateful DoFn), not {completion!r}"
        )
    if completion == "stateful" and runner == "dask":
        raise ValueError(
            "completion='stateful' cannot run on Dask: Beam's DaskRunner has no state API (its stateful DoFns "
            "fail on their first element); use completion='fused', which marks partitions as they finish there"
        )
    if completion == "stateful" and runner == "in-process":
        raise ValueError(
            "completion='stateful' needs a Beam runner's state API, and runner 'in-process' runs no Beam pipeline; "
            "use completion='fused', which marks partitions as they finish there too"
        )
    return completion


def runner_flags(completion: str, runner: str | None, beam_args: list[str] | None) -> list[str]:
    """Beam flags stateful completion needs on ``runner``, to go before the user's ``beam_args``.

    Flink in streaming mode sends a bundle's outputs on only once the whole
    bundle is processed, and its bundles take up to 1000 elements or 1 s:
    every partition listed at once lands in one bundle per slot, and all
    credits reached the keyed DoFn together, at the end (10 partitions of
    1 s on 2 slots: all marked within 0.1 s). One element per bundle lets
    each partition's credits go on as it finishes; a partition's work
    outweighs a bundle's overhead.
    """
    streaming = any(arg == "--streaming" or arg.startswith("--streaming=") for arg in beam_args or [])
    return ["--max_bundle_size=1"] if completion == "stateful" and runner == "flink" and streaming else []


def tally(returned: list[Returned], new: Returned) -> tuple[bool, bool]:
    """What one more credit does to a partition that already holds ``returned``
    (the state of :class:`CompleteByState`, as a pure function):
    ``(kept, complete)``. A task id already returned is not kept again."""
    if any(task_id == new[0] for task_id, _, _ in returned):
        return False, False
    ledger = CreditLedger()
    for task_id, share, _ in (*returned, new):
        finished = ledger.add(task_id, {"partition": share})
    return True, bool(finished)


@beam.typehints.with_input_types(CREDIT_TYPE)
@beam.typehints.with_output_types(str)
class CompleteByState(Recording):
    """Keyed by source partition: its returned credits in state, its mark once they sum to 1.

    Emits the key of each partition it marks (what ``AfterComplete`` waits for).
    """

    RETURNED = BagStateSpec("returned", PickleCoder())
    MARKED = ReadModifyWriteStateSpec("marked", BooleanCoder())

    def process(
        self,
        element: tuple[str, Returned],
        returned=beam.DoFn.StateParam(RETURNED),
        marked=beam.DoFn.StateParam(MARKED),
    ) -> Iterator[str]:
        source, new = element
        if marked.read():
            return
        held = list(returned.read())
        kept, complete = tally(held, new)
        if not complete:
            if kept:
                returned.add(new)
            return
        for task_id, share, written in (*held, new):
            self._record(task_id, {source: share}, written, None)
        returned.clear()
        marked.write(True)
        yield source
