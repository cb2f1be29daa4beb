"""Steps run in order in one Beam pipeline: the second reads what the first
wrote, in full, and does not start when the first left a partition pending."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pytest

from beam_curator import Pipeline
from beam_curator.pipeline import run_in_order
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.transforms import PipelineDefinitionError
from stages_for_tests import FailShort, write_corpus, written_records

PARTITIONS = 10  # two of them hold only short texts


def two_steps(tmp_path: Path, min_length: int) -> list[tuple[Pipeline, str]]:
    corpus = write_corpus(tmp_path / "input", PARTITIONS)
    first = Pipeline("first", stages=[
        JsonlReader(str(corpus), files_per_partition=1), FailShort(min_length), JsonlWriter(str(tmp_path / "middle")),
    ])
    # Lists its files when it starts: only a barrier lets it see all the first step wrote.
    second = Pipeline("second", stages=[
        JsonlReader(str(tmp_path / "middle"), files_per_partition=1), JsonlWriter(str(tmp_path / "out")),
    ])
    return [(first, str(tmp_path / "ckpt-first")), (second, str(tmp_path / "ckpt-second"))]


def count_beam_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    runs: list[int] = []
    real_run = beam.Pipeline.run

    def counted(self, *args, **kwargs):
        runs.append(1)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", counted)
    return runs


@pytest.mark.parametrize("runner", ["local", "local-multiprocess", "dask", "in-process"])
def test_the_second_step_reads_all_the_first_wrote(
    runner: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    worker_pythonpath: None,
) -> None:
    settings = {
        "local": {}, "local-multiprocess": {"num_workers": 2}, "in-process": {},
        "dask": {"dask_address": request.getfixturevalue("dask_cluster").scheduler_address} if runner == "dask" else {},
    }[runner]
    runs = count_beam_runs(monkeypatch)
    first, second = run_in_order(two_steps(tmp_path, min_length=0), runner, **settings)
    assert (first.partitions_pending, first.partitions_completed) == (PARTITIONS, PARTITIONS)
    assert (second.partitions_pending, second.partitions_completed) == (PARTITIONS, PARTITIONS)
    assert len(written_records(tmp_path / "out")) == len(written_records(tmp_path / "input"))
    if runner == "in-process":
        assert not runs, "no Beam pipeline at all"
    elif runner != "dask":  # where each step is a Beam pipeline of its own (see run_in_order)
        assert len(runs) == 1, "one Beam pipeline for both steps"
    again = run_in_order(two_steps(tmp_path, min_length=0), runner, **settings)
    assert [(s.partitions_pending, s.partitions_skipped) for s in again] == [(0, PARTITIONS), (0, PARTITIONS)]


@pytest.mark.parametrize("runner", ["local", "local-multiprocess", "in-process"])
def test_a_first_step_with_a_failed_partition_keeps_the_second_from_starting(
    runner: str, tmp_path: Path, worker_pythonpath: None,
) -> None:
    settings = {"num_workers": 2} if runner == "local-multiprocess" else {}
    first, second = run_in_order(two_steps(tmp_path, min_length=5), runner, **settings)
    # Counted from the checkpoint on every runner (an engine's metrics may lose a retried task's counts):
    # the two partitions with a failed task are pending and not marked.
    assert (first.partitions_pending, first.partitions_completed, first.tasks_failed) == (PARTITIONS, 8, 2)
    assert first.partitions_incomplete == 2 and "2 partitions not completed" in str(first)
    assert not second.started and "not started" in str(second)
    assert not (tmp_path / "out").exists(), "the second step read a part of the first one's output"
    # Fixed (a changed setting, so the old marks are kept on purpose), the rerun completes the two
    # failed partitions, then runs the second step over everything.
    first, second = run_in_order(two_steps(tmp_path, min_length=0), runner, changed_pipeline="keep", **settings)
    assert (first.partitions_pending, first.partitions_skipped, first.partitions_completed) == (2, 8, 2)
    assert second.started and second.partitions_completed == PARTITIONS
    assert len(written_records(tmp_path / "out")) == len(written_records(tmp_path / "input"))


def test_steps_before_the_last_need_a_checkpoint(tmp_path: Path) -> None:
    (first, _), second = two_steps(tmp_path, min_length=0)
    with pytest.raises(PipelineDefinitionError, match=r"checkpoint each but the last \(without one: \['first'\]\)"):
        run_in_order([(first, None), second])
