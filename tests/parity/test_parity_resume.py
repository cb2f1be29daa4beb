"""NeMo Curator's resumability facts (``tests/backends/test_resumability_functional.py``)
on our pipeline and a real Beam runner: three source partitions, one of which
fails on the first run; the rerun processes only that one. A partition whose
task is filtered, or fanned out into tasks that all reach the sink, counts as
complete; a finished pipeline rerun processes nothing."""

from __future__ import annotations

from pathlib import Path

from beam_curator import Pipeline
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import EmptyTask, FailedTask, Task


class Numbers(ProcessingStage):
    is_source_stage = True

    def process(self, task: EmptyTask) -> list[Task]:
        return [Task(dataset_name="numbers", data=number) for number in range(3)]


class Route(ProcessingStage):
    """Fails ``fail`` (unless ``marker`` exists), filters ``drop``, splits ``split`` in two."""

    def __init__(self, marker: str, fail: int | None = None, drop: int | None = None, split: int | None = None) -> None:
        self.marker, self.fail, self.drop, self.split = marker, fail, drop, split

    def process(self, task: Task) -> Task | list[Task] | FailedTask | None:
        if task.data == self.fail and not Path(self.marker).exists():
            return FailedTask("not yet")
        if task.data == self.drop:
            return None
        if task.data == self.split:
            return [Task(data=task.data), Task(data=task.data)]
        return task


class Record(ProcessingStage):
    """The sink: one file per task it receives, named after the source number and task id."""

    is_sink_stage = True

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def fingerprint(self) -> object:
        """Each round records into a folder of its own, to show what it wrote: not a setting."""
        return {}

    def process(self, task: Task) -> Task:
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        (Path(self.folder) / f"{task.data}-{task.task_id}").touch()
        return task


def run(tmp_path: Path, round_: int, **routing: int) -> tuple[set[str], object]:
    sink = tmp_path / f"sink{round_}"
    summary = Pipeline("resume", stages=[Numbers(), Route(str(tmp_path / "fixed"), **routing), Record(str(sink))]).run(
        str(tmp_path / "checkpoint"), "local")
    return {path.name for path in sink.glob("*")} if sink.exists() else set(), summary


def test_failed_partition_alone_reruns(tmp_path):
    first, summary = run(tmp_path, 1, fail=1)
    assert {name.split("-")[0] for name in first} == {"0", "2"} and summary.partitions_completed == 2
    (tmp_path / "fixed").touch()
    second, summary = run(tmp_path, 2, fail=1)
    assert second == {"1-0_1_0"} and summary.partitions_skipped == 2 and summary.partitions_completed == 1
    third, summary = run(tmp_path, 3, fail=1)
    assert third == set() and summary.partitions_skipped == 3 and summary.partitions_completed == 0


def test_filtered_and_fanned_out_partitions_complete(tmp_path):
    first, summary = run(tmp_path, 1, drop=1, split=2)
    assert first == {"0-0_0_0", "2-0_2_0", "2-0_2_1"}
    assert summary.partitions_completed == 3
    second, summary = run(tmp_path, 2, drop=1, split=2)
    assert second == set() and summary.partitions_skipped == 3
