"""Outputs, caches and checkpoints that overlap inputs are refused before any work (issue: a run
that read its own output back as input kept 13 rows where a fresh run keeps 34)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from beam_curator import Pipeline
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.overlap import check_no_overlap
from beam_curator.workflows import TextSemanticDeduplicationWorkflow


def corpus(folder: Path, files: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        rows = [{"doc_id": f"{index}-{row}", "text": f"document {index} row {row} " * 3} for row in range(3)]
        (folder / f"part-{index}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


@pytest.mark.parametrize(("output", "how"), [
    ("{d}/in", "is"), ("{d}/in/", "is"), ("file://{d}/in", "is"), ("{d}/in/../in/out", "lies inside"),
    ("{d}/link/out", "lies inside"), ("{d}", "contains"), ("{d}/in/sub/deeper", "lies inside"),
])
def test_every_spelling_of_an_overlap_is_seen(tmp_path: Path, output: str, how: str) -> None:
    (tmp_path / "in").mkdir()
    os.symlink(tmp_path / "in", tmp_path / "link")
    with pytest.raises(CuratorInputError, match=f"output_path '.*' {how} input_path '.*': a run would"):
        check_no_overlap({"input_path": str(tmp_path / "in")}, {"output_path": output.format(d=tmp_path)})


@pytest.mark.parametrize(("inputs", "output"), [
    ("{d}/in", "{d}/in-out"),                      # a name that starts like the input's is not inside it
    ("{d}/in/*.jsonl", "{d}/out"),
    (["{d}/in/a.jsonl", "{d}/in/b.jsonl"], "{d}/out"),
    ("memory://bucket/in", "memory://bucket/out"),
    ("memory://bucket/in", "{d}/in"),              # another filesystem
])
def test_paths_side_by_side_pass(tmp_path: Path, inputs: str | list[str], output: str) -> None:
    given = [path.format(d=tmp_path) for path in inputs] if isinstance(inputs, list) else inputs.format(d=tmp_path)
    check_no_overlap({"input_path": given}, {"output_path": output.format(d=tmp_path), "cache_path": None})


def test_globs_files_and_object_store_prefixes_are_compared_by_location(tmp_path: Path) -> None:
    with pytest.raises(CuratorInputError, match="lies inside input_path"):
        check_no_overlap({"input_path": f"{tmp_path}/in/*.jsonl"}, {"output_path": f"{tmp_path}/in/out"})
    with pytest.raises(CuratorInputError, match="contains input_path"):
        check_no_overlap({"input_path": [f"{tmp_path}/data/a.jsonl"]}, {"output_path": f"{tmp_path}/data"})
    with pytest.raises(CuratorInputError, match="cache_path 'memory://bucket/in/cache/' lies inside"):
        check_no_overlap({"input_path": "memory://bucket/in"}, {"cache_path": "memory://bucket/in/cache/"})


def test_the_workflow_refuses_an_output_inside_its_input_and_creates_nothing(tmp_path: Path) -> None:
    source = corpus(tmp_path / "in")
    before = sorted(path.name for path in source.iterdir())
    for output, cache in ((source / "out", tmp_path / "cache"), (source, tmp_path / "cache"),
                          (tmp_path / "out", source / "cache")):
        workflow = TextSemanticDeduplicationWorkflow(str(source), str(output), str(cache), id_field="doc_id",
                                                     input_filetype="jsonl", n_clusters=2, eps=0.01, runner="local")
        with pytest.raises(CuratorInputError, match="a run would read its own output back as input"):
            workflow.run()
    assert sorted(path.name for path in source.iterdir()) == before, "nothing written into the input"
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists(), "no folder created"


def test_a_pipeline_writing_or_checkpointing_inside_what_it_reads_is_refused(tmp_path: Path) -> None:
    source = corpus(tmp_path / "in")
    inside = Pipeline("copy", stages=[JsonlReader(str(source)), JsonlWriter(str(source / "copied"))])
    with pytest.raises(CuratorInputError, match=r"JsonlWriter path '.*/in/copied' lies inside file_paths"):
        inside.run(str(tmp_path / "ckpt"))
    apart = Pipeline("copy", stages=[JsonlReader(str(source)), JsonlWriter(str(tmp_path / "copied"))])
    with pytest.raises(CuratorInputError, match=r"checkpoint_path '.*/in/ckpt' lies inside file_paths"):
        apart.run(str(source / "ckpt"))
    assert sorted(path.name for path in source.iterdir()) == ["part-0.jsonl", "part-1.jsonl"]
    summary = apart.run(str(tmp_path / "ckpt"))
    assert summary.partitions_completed == 2
