"""The stage and task API facts NeMo Curator's backend tests assert, on our
lineage code: how task ids are derived (filters keep positions, a returned
input gets a new id, source partitions take their content id, other stages
their position), a source stage returning FailedTask raises ValueError;
plus ``Resources``, ``with_`` and ``Task(_stage_perf=...)``."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest

from beam_curator.stages import ProcessingStage, Resources
from beam_curator.stages.lineage import derive, derive_batch, derive_sources
from beam_curator.tasks import EmptyTask, FailedTask, FileGroupTask, NoneTask, Task


def task(task_id: str) -> Task:
    return Task(task_id=task_id, dataset_name="d", data=[], _credits={task_id: Fraction(1)})


def test_a_filtered_slot_keeps_positions_in_a_batch():
    parents = [task("0_0"), task("0_1"), task("0_2")]
    outcome = derive_batch(parents, [Task(data=0), NoneTask(), Task(data=2)], "noop")
    assert [child.task_id for child in outcome.outputs] == ["0_0_0", "0_2_0"]
    assert [parent.task_id for parent in outcome.filtered] == ["0_1"]


def test_a_returned_input_gets_a_new_segment():
    parent = task("0_5")
    assert [child.task_id for child in derive(parent, parent, "noop").outputs] == ["0_5_0"]


def test_source_partitions_take_their_content_id_rooted_at_the_input():
    a = FileGroupTask(dataset_name="d", data=["a.parquet"])
    b = FileGroupTask(dataset_name="d", data=["b.parquet"])
    outcome = derive_sources(EmptyTask(), [a, b], "source")
    assert [t.task_id for t in outcome.outputs] == [f"0_{a.get_deterministic_id()}", f"0_{b.get_deterministic_id()}"]


def test_other_stages_ignore_content_ids():
    outcome = derive(task("0_2"), FileGroupTask(dataset_name="d", data=["a.parquet"]), "noop")
    assert [t.task_id for t in outcome.outputs] == ["0_2_0"]


def test_a_batch_with_another_number_of_outputs_gets_deterministic_ids():
    # NeMo gives these random "r<uuid>" ids; we pool the batch's credits instead (README parity table).
    first = derive_batch([task("0_0"), task("0_1")], [Task(), Task(), Task()], "noop")
    again = derive_batch([task("0_0"), task("0_1")], [Task(), Task(), Task()], "noop")
    assert [t.task_id for t in first.outputs] == [t.task_id for t in again.outputs] == ["0_0_0", "0_0_1", "0_0_2"]
    assert sum(t._credits["0_0"] + t._credits["0_1"] for t in first.outputs) == 2


def test_a_source_stage_returning_failed_task_raises_value_error():
    with pytest.raises(ValueError, match="Source stage source emitted FailedTask"):
        derive_sources(EmptyTask(), [FailedTask("no files")], "source")


class Tokenize(ProcessingStage):
    def __init__(self, field: str = "text", lowercase: bool = False) -> None:
        self.field = field
        self.lowercase = lowercase

    def process(self, task: Task) -> Task:
        return task


def test_resources_and_with_():
    stage = Tokenize().with_(name="tokenize", resources=Resources(cpus=2.0, gpu_memory_gb=10.0), batch_size=4)
    assert (stage.name, stage.batch_size, stage.resources.cpus) == ("tokenize", 4, 2.0)
    assert stage.resources.requires_gpu and stage.resources.gpus_requested == 1
    assert Tokenize().resources == Resources() and not Resources().requires_gpu
    with pytest.raises(ValueError, match="not both"):
        Resources(gpus=1, gpu_memory_gb=10)


def test_task_accepts_stage_perf():
    stats = {"stage": "tokenize", "process_time": 0.1}
    made = Task(dataset_name="d", data=[], _stage_perf=[stats])
    made.add_stage_perf({"stage": "next"})
    assert made._stage_perf == [stats, {"stage": "next"}]


def test_unknown_stage_keyword_is_refused_with_the_closest_names():
    with pytest.raises(TypeError, match=r"'lowercas'.*did you mean 'lowercase'"):
        Tokenize(lowercas=True)


@dataclass
class Score(ProcessingStage):
    """NeMo Curator's stages are often dataclasses."""

    field: str = "text"
    threshold: float = 0.5

    def process(self, task: Task) -> Task:
        return task


def test_dataclass_stages_refuse_unknown_keywords_too():
    assert Score(threshold=0.7).threshold == 0.7
    with pytest.raises(TypeError, match=r"'treshold'.*did you mean 'threshold'"):
        Score(treshold=0.7)
