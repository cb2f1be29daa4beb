"""Lineage ids at every stage boundary, through the pure ``lineage`` module.

Ids are what make a rerun find the same partitions and what let the ledger
deduplicate retried terminal tasks, so their format is part of the contract.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import FilePartitioningStage
from beam_curator.stages.lineage import LineageError, derive, derive_batch, derive_sources, run_stage
from beam_curator.tasks import DocumentBatch, EmptyTask, FailedTask, FileGroupTask, NoneTask, Task

SOURCE_ID = re.compile(r"^0_[0-9a-f]{16}$")


def source(task_id: str = "0_a") -> Task:
    return Task(task_id=task_id, data="payload", _metadata={"k": 1}, _credits={task_id: Fraction(1)})


class UnderscoreTask(Task):
    def get_deterministic_id(self) -> str:
        return "shard_7"


class CustomIdTask(Task):
    def get_deterministic_id(self) -> str:
        return str(self.data)


def partition_ids(folder: Path, **grouping: object) -> dict[tuple[str, ...], str]:
    """Source ids the real partitioning stage gives, keyed by the files of each group."""
    stage = FilePartitioningStage(str(folder), **grouping)
    outcome = derive_sources(EmptyTask(), stage.process(EmptyTask()), stage.stage_name)
    return {tuple(task.data): task.task_id for task in outcome.outputs}


def test_source_ids_are_root_then_sixteen_hex_digits_with_whole_credit(tmp_path: Path) -> None:
    groups = [FileGroupTask(data=[str(tmp_path / "a.jsonl")]), FileGroupTask(data=[str(tmp_path / "b.jsonl")])]
    outcome = derive_sources(EmptyTask(), groups, "partitioning")
    assert [task.task_id for task in outcome.outputs] == [f"0_{g.get_deterministic_id()}" for g in groups]
    for task in outcome.outputs:
        assert SOURCE_ID.match(task.task_id), task.task_id
        assert task._credits == {task.task_id: Fraction(1)}
    # The stage's own objects keep no lineage state.
    assert [g.task_id for g in groups] == ["", ""]


def test_one_to_one_appends_zero_and_keeps_credit() -> None:
    parent = source()
    [child] = derive(parent, Task(data="new"), "stage").outputs
    assert child.task_id == "0_a_0"
    assert child._credits == {"0_a": Fraction(1)}
    assert child.data == "new"


def test_fan_out_appends_positions_and_splits_credit() -> None:
    parent = source()
    outcome = derive(parent, [Task(data=i) for i in range(3)], "stage")
    assert [task.task_id for task in outcome.outputs] == ["0_a_0", "0_a_1", "0_a_2"]
    assert [task.data for task in outcome.outputs] == [0, 1, 2]
    assert all(task._credits == {"0_a": Fraction(1, 3)} for task in outcome.outputs)
    # Grandchildren extend the id again, and the credits still sum to one.
    grandchildren = derive(outcome.outputs[1], [Task(), Task()], "next").outputs
    assert [task.task_id for task in grandchildren] == ["0_a_1_0", "0_a_1_1"]
    assert sum(task._credits["0_a"] for task in grandchildren) == Fraction(1, 3)


def test_filtered_entries_of_a_fan_out_take_no_position_or_credit() -> None:
    outcome = derive(source(), [Task(data="x"), None, NoneTask(), Task(data="y")], "stage")
    assert [(task.task_id, task.data) for task in outcome.outputs] == [("0_a_0", "x"), ("0_a_1", "y")]
    assert all(task._credits == {"0_a": Fraction(1, 2)} for task in outcome.outputs)


@pytest.mark.parametrize("result", [None, NoneTask(), [None]], ids=["None", "NoneTask", "list-of-None"])
def test_a_filter_returns_the_parent_as_terminal(result: object) -> None:
    parent = source()
    outcome = derive(parent, result, "stage")
    assert outcome.outputs == [] and outcome.failed == []
    assert outcome.filtered == [parent]


def test_failed_task_and_empty_list_lose_the_credit() -> None:
    failed = derive(source(), FailedTask("broken"), "stage")
    assert failed.outputs == [] and failed.filtered == [] and [f.reason for f in failed.failed] == ["broken"]
    empty = derive(source(), [], "stage")
    assert (empty.outputs, empty.filtered, empty.failed) == ([], [], [])


def test_returning_the_same_object_gives_a_new_node_and_leaves_the_parent_alone() -> None:
    parent = source()
    [child] = derive(parent, parent, "stage").outputs
    assert child is not parent
    assert child.task_id == "0_a_0"
    assert parent.task_id == "0_a" and parent._credits == {"0_a": Fraction(1)}
    child._metadata["k"] = 2
    assert parent._metadata == {"k": 1}
    twice = derive(parent, [parent, parent], "stage").outputs
    assert [task.task_id for task in twice] == ["0_a_0", "0_a_1"]
    assert twice[0] is not twice[1]
    assert parent.task_id == "0_a" and parent._credits == {"0_a": Fraction(1)}


def test_a_real_stage_returning_its_input_still_gets_the_segment() -> None:
    class PassThrough(ProcessingStage):
        def process(self, task: Task) -> Task:
            task.data = "seen"
            return task

    parent = source()
    [child] = run_stage(PassThrough(), [parent]).outputs
    assert (child.task_id, child.data) == ("0_a_0", "seen")
    assert parent.task_id == "0_a"


def test_underscore_in_a_custom_deterministic_id_is_rejected_clearly() -> None:
    with pytest.raises(LineageError) as error:
        derive_sources(EmptyTask(), [UnderscoreTask()], "shards")
    message = str(error.value)
    assert "'shard_7'" in message and "UnderscoreTask" in message and "shards" in message
    assert "get_deterministic_id" in message


def test_custom_deterministic_ids_are_used_verbatim() -> None:
    outcome = derive_sources(EmptyTask(), [CustomIdTask(data="shardB"), CustomIdTask(data="shardA")], "shards")
    assert [task.task_id for task in outcome.outputs] == ["0_shardB", "0_shardA"]


def test_position_is_the_fallback_without_a_deterministic_id() -> None:
    outcome = derive_sources(EmptyTask(), [Task(data="a"), Task(data="b"), Task(data="c")], "source")
    assert [task.task_id for task in outcome.outputs] == ["0_0", "0_1", "0_2"]
    assert [task._credits for task in outcome.outputs] == [{f"0_{i}": Fraction(1)} for i in range(3)]


def test_duplicate_source_ids_are_rejected() -> None:
    same_files = ["/data/a.jsonl", "/data/b.jsonl"]
    with pytest.raises(LineageError, match="share the id") as error:
        derive_sources(EmptyTask(), [FileGroupTask(data=same_files), FileGroupTask(data=same_files[::-1])], "src")
    assert f"0_{FileGroupTask(data=same_files).get_deterministic_id()}" in str(error.value)


def test_file_group_id_ignores_path_order() -> None:
    paths = ["/d/c.jsonl", "/d/a.jsonl", "/d/b.jsonl"]
    ids = {FileGroupTask(data=order).get_deterministic_id() for order in (paths, sorted(paths), paths[::-1])}
    assert len(ids) == 1
    assert FileGroupTask(data=paths[:2]).get_deterministic_id() not in ids


def test_file_group_ids_survive_other_groups_being_added_or_removed(tmp_path: Path) -> None:
    for name in ("b", "d", "f"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    before = partition_ids(tmp_path)
    (tmp_path / "a.jsonl").write_text("{}\n")  # sorts first: shifts every position
    (tmp_path / "e.jsonl").write_text("{}\n")
    grown = partition_ids(tmp_path)
    assert len(grown) == 5
    assert all(grown[files] == task_id for files, task_id in before.items())
    (tmp_path / "b.jsonl").unlink()
    shrunk = partition_ids(tmp_path)
    assert all(shrunk[files] == grown[files] for files in shrunk)
    assert all(SOURCE_ID.match(task_id) for task_id in shrunk.values())


def test_file_group_id_does_not_depend_on_file_contents(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n')
    before = partition_ids(tmp_path)
    (tmp_path / "a.jsonl").write_text('{"text": "rewritten"}\n{"text": "longer"}\n')
    assert partition_ids(tmp_path) == before


def test_batch_with_one_result_per_input_matches_by_position() -> None:
    parents = [source("0_a"), source("0_b")]
    outcome = derive_batch(parents, [Task(data="x"), [Task(data="y"), Task(data="z")]], "batch")
    assert [(task.task_id, task._credits) for task in outcome.outputs] == [
        ("0_a_0", {"0_a": Fraction(1)}),
        ("0_b_0", {"0_b": Fraction(1, 2)}),
        ("0_b_1", {"0_b": Fraction(1, 2)}),
    ]


def test_batch_with_another_number_of_results_pools_credits() -> None:
    parents = [source("0_b"), source("0_a"), source("0_c")]
    outcome = derive_batch(parents, [DocumentBatch(), DocumentBatch()], "merge")
    # Named after the smallest input id, so a replayed batch gets the same ids.
    assert [task.task_id for task in outcome.outputs] == ["0_a_0", "0_a_1"]
    share = {"0_a": Fraction(1, 2), "0_b": Fraction(1, 2), "0_c": Fraction(1, 2)}
    assert all(task._credits == share for task in outcome.outputs)


def test_a_fan_out_of_only_filters_is_a_filter() -> None:
    """``[None]`` filters the parent, so ``[None, None]`` must too: otherwise
    its partition can never complete and is replayed on every run."""
    parent = source()
    outcome = derive(parent, [None, NoneTask()], "stage")
    assert outcome.filtered == [parent]
    pooled = derive_batch([source("0_a"), source("0_b")], [None], "merge")
    assert [task._credits for task in pooled.filtered] == [{"0_a": Fraction(1), "0_b": Fraction(1)}]


def test_slash_in_a_custom_deterministic_id_is_rejected() -> None:
    """Ids become LMDB keys ``c/<source>/<task>`` (split at the first '/') and
    output file names, so a '/' would credit the wrong partition."""

    class SlashTask(Task):
        def get_deterministic_id(self) -> str:
            return "bucket/shard"

    with pytest.raises(LineageError, match="bucket/shard"):
        derive_sources(EmptyTask(), [SlashTask()], "shards")
