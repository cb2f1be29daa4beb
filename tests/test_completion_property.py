"""Completion is exact: a source partition is marked complete exactly when every
one of its descendants has terminated (filtered or written by the sink) and
none failed, whatever order and however often the terminal events arrive.

Hypothesis builds random stage graphs (fan-outs, filters, failures, empty
lists, pass-throughs, batches with M inputs and K outputs), runs them through
``lineage.derive``/``derive_batch`` from real sources, and keeps its own
record of which sources each task descends from. That record is the oracle
the ledgers are checked against at every prefix of the delivery order, and
the stateful completion's keyed state (``tally``) against the fused one's
ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_curator.checkpoint import CreditLedger, union_complete
from beam_curator.stages.lineage import StepOutcome, derive, derive_batch, derive_sources
from beam_curator.tasks import EmptyTask, FailedTask, NoneTask, Task
from beam_curator.transforms.stateful_completion import Returned, tally

# What a stage does with one task. Lists of filters only are left out here:
# see test_lineage.test_a_fan_out_of_only_filters_is_a_filter.
KEEPING = ["same", "new", "fan_out", "fan_out_same", "fan_out_with_filters"]
FILTERING = ["none", "none_task", "list_of_none"]
LOSING = ["failed", "fan_out_with_failed", "empty"]


@dataclass
class Simulation:
    """The graph as it runs, plus the oracle's own view of it."""

    sources: list[str] = field(default_factory=list)
    doomed: set[str] = field(default_factory=set)  # lost credit somewhere: may never complete
    ancestry: dict[str, frozenset[str]] = field(default_factory=dict)  # task id -> sources it stands for
    terminal: list[Task] = field(default_factory=list)

    def expected_complete(self, delivered: set[str]) -> set[str]:
        """Sources that are not doomed and whose terminal tasks were all delivered."""
        return {
            source for source in self.sources
            if source not in self.doomed
            and all(task.task_id in delivered for task in self.terminal if source in self.ancestry[task.task_id])
        }


def stage_result(data: st.DataObject, parent: Task, kind: str) -> object:
    if kind == "same":
        return parent
    if kind == "new":
        return Task(data="new")
    if kind == "fan_out":
        return [Task(data=i) for i in range(data.draw(st.integers(2, 3)))]
    if kind == "fan_out_same":
        return [parent, parent]
    if kind == "fan_out_with_filters":
        return [None, Task(data="kept"), NoneTask(), Task(data="kept too")]
    if kind == "none":
        return None
    if kind == "none_task":
        return NoneTask()
    if kind == "list_of_none":
        return [None]
    if kind == "failed":
        return FailedTask("broken input")
    if kind == "fan_out_with_failed":
        return [Task(data="ok"), FailedTask("one child broke")]
    assert kind == "empty"
    return []


def record(sim: Simulation, parents: list[Task], outcome: StepOutcome, kinds: list[str], is_sink: bool) -> list[Task]:
    """Check one step against the oracle and return the tasks that go on.

    ``kinds`` holds one behaviour per parent, or a single one for a batch
    whose results were pooled (then every output stands for all parents).
    """
    ids = [p.task_id for p in parents]
    pooled = frozenset().union(*(sim.ancestry[i] for i in ids))
    for parent_id, kind in zip(ids, kinds):
        if kind in LOSING:
            sim.doomed |= pooled if len(kinds) < len(ids) else sim.ancestry[parent_id]
    for task in outcome.outputs:
        parent_id = task.task_id.rsplit("_", 1)[0]
        assert parent_id in ids, task.task_id
        sim.ancestry[task.task_id] = pooled if len(kinds) < len(ids) else sim.ancestry[parent_id]
    for task in outcome.outputs + outcome.filtered:
        assert set(task._credits) == set(sim.ancestry[task.task_id]), (task.task_id, task._credits)
    sim.terminal.extend(outcome.filtered)
    if is_sink:
        sim.terminal.extend(outcome.outputs)
        return []
    return outcome.outputs


def run_task_stage(data: st.DataObject, sim: Simulation, tasks: list[Task], is_sink: bool) -> list[Task]:
    survivors: list[Task] = []
    for parent in tasks:
        kind = data.draw(st.sampled_from(KEEPING + FILTERING + LOSING))
        before = (parent.task_id, dict(parent._credits))
        outcome = derive(parent, stage_result(data, parent, kind), "stage")
        assert (parent.task_id, parent._credits) == before, "derive mutated its parent"
        if kind in FILTERING:
            assert outcome.filtered == [parent]
        survivors += record(sim, [parent], outcome, [kind], is_sink)
    return survivors


def run_batch_stage(data: st.DataObject, sim: Simulation, tasks: list[Task], is_sink: bool) -> list[Task]:
    """``process_batch`` over random batches: one result per input, or K != M results."""
    tasks = data.draw(st.permutations(tasks))
    survivors: list[Task] = []
    while tasks:
        size = data.draw(st.integers(1, 3))
        batch, tasks = tasks[:size], tasks[size:]
        if data.draw(st.booleans()):
            kinds = [data.draw(st.sampled_from(KEEPING + FILTERING + LOSING)) for _ in batch]
            results = [stage_result(data, parent, kind) for parent, kind in zip(batch, kinds)]
        else:
            count = data.draw(st.integers(0, 4).filter(lambda k: k != len(batch)))
            shapes = [data.draw(st.sampled_from(["task", "task", "none", "failed"])) for _ in range(count)]
            if count and "task" not in shapes and "failed" not in shapes:
                shapes[0] = "task"  # not only filters (see the module note)
            results = [{"task": Task(data="merged"), "none": None, "failed": FailedTask("batch")}[s] for s in shapes]
            kinds = ["empty" if not count else "failed" if "failed" in shapes else "new"]
        outcome = derive_batch(batch, results, "batch")
        survivors += record(sim, batch, outcome, kinds, is_sink)
    return survivors


@st.composite
def simulations(draw: st.DrawFn) -> Simulation:
    data = draw(st.data())
    sim = Simulation()
    roots = [Task(data=i) for i in range(draw(st.integers(1, 4)))]
    tasks = derive_sources(EmptyTask(), roots, "source").outputs
    sim.sources = [task.task_id for task in tasks]
    sim.ancestry = {task.task_id: frozenset([task.task_id]) for task in tasks}
    layers = draw(st.integers(1, 3))
    for layer in range(layers):
        run = run_batch_stage if draw(st.booleans()) else run_task_stage
        tasks = run(data, sim, tasks, is_sink=layer == layers - 1)
    assert len({task.task_id for task in sim.terminal}) == len(sim.terminal), "terminal ids must be unique"
    for source in sim.sources:
        returned = sum((t._credits[source] for t in sim.terminal if source in t._credits), Fraction(0))
        assert (returned == 1) == (source not in sim.doomed), (source, returned)
    return sim


@st.composite
def deliveries(draw: st.DrawFn, terminal: list[Task]) -> list[Task]:
    """The terminal events in a random order, some of them repeated (retried bundles)."""
    repeats = draw(st.lists(st.sampled_from(terminal), max_size=len(terminal))) if terminal else []
    return draw(st.permutations(terminal + repeats))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_one_ledger_completes_a_source_exactly_when_its_last_descendant_terminates(data: st.DataObject) -> None:
    sim = data.draw(simulations())
    ledger = CreditLedger()
    delivered: set[str] = set()
    reported: list[str] = []
    for task in data.draw(deliveries(sim.terminal)):
        reported += ledger.add(task.task_id, task._credits)
        delivered.add(task.task_id)
        assert ledger.complete == sim.expected_complete(delivered)
    assert sorted(reported) == sorted(set(sim.sources) - sim.doomed), "each source is reported once"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 4))
def test_writers_split_the_events_and_their_union_is_exact(data: st.DataObject, writers: int) -> None:
    sim = data.draw(simulations())
    ledgers = [CreditLedger() for _ in range(writers)]
    delivered: set[str] = set()
    for task in data.draw(deliveries(sim.terminal)):
        ledgers[data.draw(st.integers(0, writers - 1))].add(task.task_id, task._credits)
        delivered.add(task.task_id)
        done = set().union(*(ledger.complete for ledger in ledgers))
        partials = [
            (source, task_id, share)
            for ledger in ledgers
            for source in sim.sources
            for task_id, share in ledger.partial(source).items()
        ]
        assert union_complete(done, partials) == sim.expected_complete(delivered)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_stateful_completion_marks_exactly_what_the_fused_one_marks(data: st.DataObject) -> None:
    """Each terminal task's credits become one element per source, delivered in any order and
    repeated; per key, ``CompleteByState`` keeps what ``tally`` keeps and marks when it says so."""
    sim = data.draw(simulations())
    fused = CreditLedger()
    held: dict[str, list[Returned]] = {}
    marked: list[str] = []
    for task in data.draw(deliveries(sim.terminal)):
        fused.add(task.task_id, task._credits)
        for source, share in data.draw(st.permutations(list(task._credits.items()))):
            if source in marked:
                continue
            kept, complete = tally(held.get(source, []), (task.task_id, share, None))
            if complete:
                marked.append(source)
                held.pop(source, None)
            elif kept:
                held.setdefault(source, []).append((task.task_id, share, None))
        assert set(marked) == fused.complete
    assert sorted(marked) == sorted(set(sim.sources) - sim.doomed), "each source is marked once"


def test_batch_with_k_outputs_completes_all_its_sources_together() -> None:
    a, b, c = derive_sources(EmptyTask(), [Task(), Task(), Task()], "source").outputs
    merged = derive_batch([a, b], [Task(data=i) for i in range(3)], "merge").outputs
    [alone] = derive_batch([c], [Task(data="c")], "merge").outputs
    assert len(merged) == 3
    ledger = CreditLedger()
    assert ledger.add(merged[0].task_id, merged[0]._credits) == []
    assert ledger.add(alone.task_id, alone._credits) == [c.task_id]
    assert ledger.add(merged[2].task_id, merged[2]._credits) == []
    assert ledger.add(merged[2].task_id, merged[2]._credits) == [], "a retried event must not complete early"
    assert sorted(ledger.add(merged[1].task_id, merged[1]._credits)) == sorted([a.task_id, b.task_id])
