"""``completion="stateful"``: the same marks as the fused completion, from a
keyed stateful DoFn; refused where the runner has no state, and any other
value refused before anything runs."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.util import assert_that, equal_to

from beam_curator.checkpoint import open_store
from beam_curator.pipeline import run_in_order
from beam_curator.runners import pipeline_options
from beam_curator.transforms import CuratorStages
from beam_curator.transforms.stateful_completion import CompleteByState
from beam_curator.workflows.semantic.workflow import SemanticDeduplicationWorkflow

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
import curator_helpers  # noqa: E402
from test_semdedup_workers import check_run_and_rerun  # noqa: E402

FILES = 6  # file 2 is filtered whole, the others fan out into chunks, some of them filtered


def run(tmp_path: Path, completion: str, name: str) -> tuple[object, object]:
    """A run and its rerun of the fan-out-and-filter pipeline; the checkpoint's snapshot after them."""
    corpus = curator_helpers.write_corpus(tmp_path / "in", FILES)
    pipeline = curator_helpers.resume_pipeline(str(corpus), str(tmp_path / f"{name}-out"), str(tmp_path / "log"), 0)
    checkpoint = str(tmp_path / f"{name}-ckpt")
    summaries = [pipeline.run(checkpoint, progress=False, completion=completion) for _ in range(2)]
    return summaries, open_store(checkpoint).snapshot()


def test_stateful_marks_what_fused_marks_and_a_rerun_skips_all(tmp_path: Path) -> None:
    (fused, rerun_fused), fused_marks = run(tmp_path, "fused", "fused")
    (stateful, rerun_stateful), stateful_marks = run(tmp_path, "stateful", "stateful")
    every = {curator_helpers.source_id([file]) for file in (tmp_path / "in").glob("*.jsonl")}
    assert fused_marks.completed() == stateful_marks.completed() == every
    assert fused_marks.outputs == stateful_marks.outputs, "the marks keep the same written files"
    assert (stateful.partitions_pending, stateful.partitions_completed) == (FILES, FILES) == (
        fused.partitions_pending, fused.partitions_completed)
    assert (rerun_stateful.partitions_skipped, rerun_stateful.partitions_pending) == (FILES, 0)
    assert (rerun_fused.partitions_skipped, rerun_fused.partitions_pending) == (FILES, 0)
    assert curator_helpers.output_rows(tmp_path / "stateful-out") == curator_helpers.output_rows(tmp_path / "fused-out")


def test_the_completion_is_a_stateful_dofn_in_the_pipeline_graph(tmp_path: Path) -> None:
    corpus = curator_helpers.write_corpus(tmp_path / "in", 2)
    stages = curator_helpers.resume_pipeline(str(corpus), str(tmp_path / "out"), str(tmp_path / "log"), 0).stages
    graph = beam.Pipeline(options=pipeline_options("local"))
    _ = graph | "resume" >> CuratorStages(stages, str(tmp_path / "ckpt"), completion="stateful")
    pardos = {t.unique_name: beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
              for t in graph.to_runner_api().components.transforms.values() if t.spec.urn == "beam:transform:pardo:v1"}
    stateful = {name: sorted(payload.state_specs) for name, payload in pardos.items() if payload.state_specs}
    assert list(stateful.values()) == [["marked", "returned"]] and next(iter(stateful)).endswith("-Complete"), stateful


def test_duplicated_and_reordered_credits_mark_once_and_only_when_whole(tmp_path: Path) -> None:
    """A real Beam run of the keyed DoFn alone: each credit twice, in shuffled order; ``b`` lacks a quarter."""
    third = Fraction(1, 3)
    credits = [("a", ("a_0", third, [["a0.jsonl", 5, 1]])), ("a", ("a_1", third, None)),
               ("a", ("a_2", third, [["a2.jsonl", 7, 2]])), ("b", ("b_0", Fraction(1, 2), None)),
               ("b", ("b_1", Fraction(1, 4), None))]
    shuffled = [credits[i] for i in (4, 2, 0, 3, 2, 1, 4, 0, 1, 3)]
    store = open_store(str(tmp_path / "ckpt"))
    with beam.Pipeline(options=pipeline_options("local")) as p:
        marked = (p | beam.Create(shuffled).with_output_types(beam.typehints.Tuple[str, beam.typehints.Any])
                  | beam.ParDo(CompleteByState(store)))
        assert_that(marked, equal_to(["a"]))
    snapshot = store.snapshot()
    assert snapshot.completed() == {"a"}
    assert snapshot.outputs["a"] == {"a_0": [[["a0.jsonl", 5, 1]]], "a_2": [[["a2.jsonl", 7, 2]]]}


def test_steps_in_order_wait_for_the_stateful_marks(tmp_path: Path) -> None:
    corpus = curator_helpers.write_corpus(tmp_path / "in", 4)
    first = curator_helpers.resume_pipeline(str(corpus), str(tmp_path / "middle"), str(tmp_path / "log"), 0)
    second = curator_helpers.resume_pipeline(str(tmp_path / "middle"), str(tmp_path / "out"), str(tmp_path / "log"), 0)
    second.name = "again"
    summaries = run_in_order([(first, str(tmp_path / "ckpt-1")), (second, str(tmp_path / "ckpt-2"))],
                             progress=False, completion="stateful")
    written = len(list((tmp_path / "middle").glob("*.jsonl")))
    assert [(s.started, s.partitions_pending, s.partitions_completed) for s in summaries] == [
        (True, 4, 4), (True, written, written)], "the second step starts, on all the first wrote"
    assert curator_helpers.output_rows(tmp_path / "out") == curator_helpers.output_rows(tmp_path / "middle")


def test_completion_is_checked_before_anything_runs(tmp_path: Path) -> None:
    pipeline = curator_helpers.resume_pipeline(str(tmp_path), str(tmp_path / "out"), str(tmp_path / "log"), 0)
    with pytest.raises(ValueError, match="completion must be 'fused'.*'stateful'.*not 'keyed'"):
        pipeline.run(str(tmp_path / "ckpt"), completion="keyed")
    with pytest.raises(ValueError, match="completion='stateful' cannot run on Dask.*completion='fused'"):
        pipeline.run(str(tmp_path / "ckpt"), runner="dask", completion="stateful")
    with pytest.raises(ValueError, match="completion must be"):
        SemanticDeduplicationWorkflow(str(tmp_path / "emb"), str(tmp_path / "res"), n_clusters=2, completion="fast")
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "res").exists()
    SemanticDeduplicationWorkflow(str(tmp_path / "emb"), str(tmp_path / "res"), n_clusters=2, completion="stateful")


@pytest.mark.slow
def test_semantic_dedup_with_stateful_completion_on_worker_processes(tmp_path: Path, worker_pythonpath: None) -> None:
    """Every phase's chain, and the steps that wait for one another, with the marks made by keyed state."""
    check_run_and_rerun(tmp_path, runner="local-multiprocess", num_workers=2, completion="stateful")
