"""The in-process runner (``runner="in-process"``): chains run without Beam, through the same DoFns.

It must give what the local runner gives: the same outputs of the three dedup workflows, checkpoint
marks that either runner resumes from, and, before anything runs, a refusal of what it cannot run.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import apache_beam as beam
import pandas as pd
import pytest

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.cli.main import main
from beam_curator.data import sample_corpus_path
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.tasks import Task
from beam_curator.transforms import PipelineDefinitionError
from beam_curator.transforms.transform_stage import TransformStage
from beam_curator.workflows import (
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    TextSemanticDeduplicationWorkflow,
)
from stages_for_tests import writer_pids
from test_semdedup_workers import PHASE_PARTITIONS, output_times, phase_checkpoint, write_input


def corpus_with_copies(folder: Path) -> Path:
    """The bundled sample, and a file of exact and near copies of some of its records under new ids."""
    shutil.copytree(sample_corpus_path(), folder)
    first = (folder / sorted(os.listdir(folder))[0]).read_text().splitlines()[:40]
    records = [json.loads(line) for line in first]
    copies = [{**record, "doc_id": f"zz-copy-{n}"} for n, record in enumerate(records[:20])]
    near = [{**record, "doc_id": f"zz-near-{n}", "text": record["text"].replace(" a ", " one ", 1) + " (updated)"}
            for n, record in enumerate(records[20:])]
    (folder / "zz-copies.jsonl").write_text("".join(json.dumps(row) + "\n" for row in copies + near))
    return folder


def kept_ids(folder: Path) -> list[str]:
    return sorted(json.loads(line)["doc_id"] for path in glob.glob(f"{folder}/**/*.jsonl", recursive=True)
                  for line in Path(path).read_text().splitlines())


def removal_settings(kind: str) -> dict:
    common = {"input_filetype": "jsonl", "output_filetype": "jsonl", "perform_removal": True}
    return {**common, "assign_id": False, "id_field": "doc_id"} if kind == "exact" else \
        {**common, "id_field": "doc_id"}


@pytest.mark.parametrize("kind", ["exact", "fuzzy"])
def test_exact_and_fuzzy_dedup_in_process_keep_what_the_local_runner_keeps(kind: str, tmp_path: Path) -> None:
    corpus = corpus_with_copies(tmp_path / "input")
    kept = {}
    for runner in ("local", "in-process"):
        output = tmp_path / runner
        if kind == "exact":  # NeMo Curator's order: output_path, input_path
            ExactDeduplicationWorkflow(str(output), str(corpus), runner=runner, **removal_settings(kind)).run()
        else:  # cache_path, output_path, input_path
            FuzzyDeduplicationWorkflow(str(output / "cache"), str(output), str(corpus), runner=runner,
                                       **removal_settings(kind)).run()
        kept[runner] = kept_ids(output / "deduplicated")
    assert kept["in-process"] == kept["local"]
    assert not any(doc.startswith("zz-copy-") for doc in kept["local"]), "every exact copy removed"
    assert len(kept["local"]) < 614 + 20


def semantic(tmp_path: Path, runner: str) -> dict:
    return TextSemanticDeduplicationWorkflow(
        str(tmp_path / "input"), str(tmp_path / "output"), str(tmp_path / "cache"), id_field="doc_id",
        input_filetype="jsonl", output_filetype="jsonl", embedding_backend="sentence-transformers", n_clusters=2,
        eps=0.01, runner=runner,
    ).run().metadata


def test_semantic_dedup_in_process_equals_the_local_runner_and_each_resumes_the_other(tmp_path: Path) -> None:
    """The full model embeds through the stage's own ``process`` (no RunInference); every phase marks its
    partitions from this process; a rerun on either runner then finds nothing to do."""
    for runner in ("local", "in-process"):
        write_input(tmp_path / runner / "input")
        assert semantic(tmp_path / runner, runner)["num_duplicates"] == 2
    assert kept_ids(tmp_path / "in-process" / "output" / "deduplicated") == \
        kept_ids(tmp_path / "local" / "output" / "deduplicated")
    pairs = [pd.read_parquet(tmp_path / runner / "output" / "duplicate_pairs").sort_values("id").reset_index(drop=True)
             for runner in ("local", "in-process")]
    pd.testing.assert_frame_equal(*pairs)
    for phase, partitions in PHASE_PARTITIONS:
        checkpoint = phase_checkpoint(tmp_path / "in-process" / "cache", phase)
        assert writer_pids(checkpoint) == {os.getpid()}
        assert len(open_store(str(checkpoint)).completed()) == partitions
    written = output_times(tmp_path / "in-process" / "output")
    for runner in ("in-process", "local"):
        again = semantic(tmp_path / "in-process", runner)
        assert again["num_duplicates"] == 2 and again["phases_run"] == [], (runner, again["phases_run"])
        assert output_times(tmp_path / "in-process" / "output") == written, f"a rerun on {runner} wrote output"


class BeamOnly(TransformStage):
    """A stage that exists only as a Beam transform."""

    def transform(self) -> beam.PTransform:
        return beam.Map(lambda task: (task, task))


def chain(tmp_path: Path, *middle) -> Pipeline:
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    return Pipeline("chain", stages=[JsonlReader(str(tmp_path / "in")), *middle, JsonlWriter(str(tmp_path / "out"))])


@pytest.mark.parametrize("settings, refused", [
    ({"stages": [BeamOnly()]}, (PipelineDefinitionError, r"stage BeamOnly of 'chain' is a Beam transform without")),
    ({"beam_args": ["--direct_num_workers=2"]}, (ValueError, r"beam_args do not apply to runner 'in-process'")),
    ({"completion": "stateful"}, (ValueError, r"completion='stateful' needs a Beam runner's state API")),
    ({"num_workers": 2}, (ValueError, r"num_workers does not apply to runner 'in-process'")),
])
def test_what_the_in_process_runner_cannot_run_is_refused_before_anything_runs(
    settings: dict, refused: tuple, tmp_path: Path,
) -> None:
    pipeline = chain(tmp_path, *settings.pop("stages", []))
    error, message = refused
    with pytest.raises(error, match=message):
        pipeline.run(checkpoint_path=str(tmp_path / "ckpt"), runner="in-process", **settings)
    assert not (tmp_path / "out").exists() and not (tmp_path / "ckpt").exists()


def test_an_error_in_a_stage_reaches_the_caller_as_raised_and_the_partition_stays_pending(tmp_path: Path) -> None:
    class Broken(TransformStage):
        def transform(self) -> beam.PTransform:
            raise AssertionError("not called in process")

        def process(self, task: Task) -> Task:
            raise RuntimeError("stage broke")

    with pytest.raises(RuntimeError, match="stage broke"):
        chain(tmp_path, Broken()).run(checkpoint_path=str(tmp_path / "ckpt"), runner="in-process")
    assert open_store(str(tmp_path / "ckpt")).completed() == set()
    summary = chain(tmp_path).run(checkpoint_path=str(tmp_path / "ckpt"), runner="in-process", changed_pipeline="keep")
    assert (summary.partitions_pending, summary.partitions_completed) == (1, 1)
    assert (summary.counters["jsonl_writer.items_out"], summary.counters["partitions_completed"]) == (1, 1)


@pytest.mark.parametrize("runner", ["local", "in-process"])
def test_a_beam_transform_as_the_sink_is_refused_on_either_runner(runner: str, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    class Both(BeamOnly):
        def process(self, task: Task) -> Task:
            return task

    pipeline = Pipeline("ends-in-a-transform", stages=[JsonlReader(str(tmp_path / "in")), Both()])
    with pytest.raises(PipelineDefinitionError, match="Both is a transform stage and cannot be the sink"):
        pipeline.run(runner=runner)


def test_the_command_runs_in_process(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write_input(tmp_path / "input")
    code = main(["semdedup", "--input", str(tmp_path / "input"), "--output", str(tmp_path / "output"),
                 "--cache", str(tmp_path / "cache"), "--embedding-backend", "sentence-transformers",
                 "--id-field", "doc_id", "--n-clusters", "2", "--eps", "0.01", "--runner", "in-process"])
    assert code == 0, capsys.readouterr().err
    assert len(kept_ids(tmp_path / "output" / "deduplicated")) == len(write_input(tmp_path / "again")) - 2
