"""``beam-curator filter``: real runs of the command (in-process, as ``tests/test_cli.py`` runs it) on
Debian's package descriptions, each checked against the same stages applied directly to the data."""

from __future__ import annotations

import gzip
import json
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shared_data import DEBIAN, shared_data

from beam_curator.cli.main import main
from beam_curator.configs import load_filter_config, preset_path
from beam_curator.tasks import DocumentBatch

DOCUMENTS, FILES = 240, 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JSONL folder of Debian's descriptions (``package`` and ``text``), a few files of them."""
    with gzip.open(shared_data(DEBIAN), "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in islice(handle, DOCUMENTS)]
    folder = tmp_path_factory.mktemp("debian")
    share = DOCUMENTS // FILES
    for index in range(FILES):
        rows = records[index * share:(index + 1) * share]
        (folder / f"part-{index}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def applied_directly(config: str, rows: list[dict]) -> list[dict]:
    """What the file's stages keep of ``rows``, run one after another on one batch, without Beam."""
    batch = DocumentBatch(data=pa.Table.from_pylist(rows))
    for stage in load_filter_config(config).stages:
        stage.setup()
        batch = stage.process(batch)
    return batch.to_pyarrow().to_pylist()


def by_package(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: row["package"])


@pytest.mark.parametrize("preset", ["nemo-heuristic-en", "gopher", "c4", "fineweb"])
def test_each_preset_keeps_what_its_stages_keep(preset: str, corpus: Path, tmp_path: Path, capsys) -> None:
    assert main(["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--preset", preset]) == 0
    kept = records(tmp_path / "out")
    expected = applied_directly(preset_path(preset), records(corpus))
    assert 0 < len(kept) < DOCUMENTS  # the set drops some, keeps some: the comparison says something
    assert by_package(kept) == by_package(expected)  # the same documents, with the same text and fields
    summary = capsys.readouterr().out
    assert f"documents in     {DOCUMENTS}" in summary and f"kept             {len(kept)}" in summary
    assert "3 partition(s) filtered" in summary


def test_c4_rewrites_the_text_of_kept_documents(corpus: Path, tmp_path: Path) -> None:
    assert main(["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--preset", "c4"]) == 0
    inputs = {row["package"]: row["text"] for row in records(corpus)}
    assert any(row["text"] != inputs[row["package"]] for row in records(tmp_path / "out"))


NEMO_LAYOUT = """\
# The layout of NeMo Curator's config/text/heuristic_filter_english_pipeline.yaml, shortened.
defaults:
  - _self_
  - override hydra/job_logging: none
hydra:
  run:
    dir: .
  output_subdir: null
documentation: |
  A shortened English heuristic pipeline.
input_path: ???
output_path: ???
text_field: text
stages:
  - _target_: nemo_curator.stages.text.io.reader.JsonlReader
    file_paths: ${input_path}
    files_per_partition: null
    blocksize: null
    fields: null
  - _target_: nemo_curator.stages.text.filters.score_filter.ScoreFilter
    filter_obj:
      _target_: nemo_curator.stages.text.filters.heuristic.string.WordCountFilter
      min_words: 50
      max_words: 100000
    text_field: ${text_field}
    score_field: null
  - _target_: nemo_curator.stages.text.filters.score_filter.ScoreFilter
    filter_obj:
      _target_: nemo_curator.stages.text.filters.heuristic.repetition.RepeatingTopNGramsFilter
      n: 2
      max_repeating_ngram_ratio: 0.2
    text_field: ${text_field}
    score_field: null
  - _target_: nemo_curator.stages.text.modifiers.Modify
    modifier_fn:
      _target_: nemo_curator.stages.text.modifiers.unicode.UnicodeReformatter
  - _target_: nemo_curator.stages.text.io.writer.JsonlWriter
    path: ${output_path}
    fields: null
"""


def test_a_nemo_curator_file_runs_as_it_is(corpus: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "heuristic.yaml"
    config.write_text(NEMO_LAYOUT)
    assert main(["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--config", str(config)]) == 0
    kept = records(tmp_path / "out")
    assert 0 < len(kept) < DOCUMENTS
    assert by_package(kept) == by_package(applied_directly(str(config), records(corpus)))
    summary = capsys.readouterr().out
    assert "word_count" in summary and "repeating_top_2grams" in summary


def test_parquet_in_parquet_out_with_every_field(corpus: Path, tmp_path: Path) -> None:
    rows = records(corpus)
    folder = tmp_path / "parquet"
    folder.mkdir()
    table = pa.Table.from_pylist(rows).append_column("rank", pa.array(range(len(rows)), pa.int64()))
    pq.write_table(table, folder / "part-0.parquet")
    output = tmp_path / "out"
    assert main(["filter", "--input", str(folder), "--output", str(output), "--input-filetype", "parquet",
                 "--preset", "gopher"]) == 0
    written = sorted(output.glob("*.parquet"))
    assert written and not list(output.glob("*.jsonl"))
    kept = pa.concat_tables(pq.read_table(path) for path in written)
    assert kept.schema.names == ["package", "text", "rank"]
    assert by_package(kept.to_pylist()) == by_package(applied_directly(preset_path("gopher"), table.to_pylist()))


def line_of(text: str, config: str) -> int:
    """The line of ``config`` that holds ``text`` (1-based)."""
    return next(number for number, line in enumerate(config.splitlines(), 1) if text in line)


@pytest.mark.parametrize("wrong, expected", [
    ("nemo_curator.stages.text.filters.heuristic.string.WordCountFiltr",
     "(did you mean nemo_curator.stages.text.filters.heuristic.string.WordCountFilter?)"),
    ("nemo_curator.stages.text.filters.fasttext.FastTextQualityFilter",
     "beam_curator has no beam_curator.stages.text.filters.fasttext.FastTextQualityFilter"),
])
def test_an_unknown_filter_is_named_with_its_line_and_nothing_is_written(
        wrong: str, expected: str, corpus: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "wrong.yaml"
    config.write_text(NEMO_LAYOUT.replace("nemo_curator.stages.text.filters.heuristic.string.WordCountFilter", wrong))
    line = line_of(wrong, config.read_text())
    assert main(["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert f"{config}:{line}: unknown filter or stage {wrong}" in error and expected in error
    assert not (tmp_path / "out").exists()


def test_a_misspelt_parameter_is_named_with_its_line_and_the_right_name(corpus: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "wrong.yaml"
    config.write_text(NEMO_LAYOUT.replace("max_repeating_ngram_ratio", "max_repeating_ngram_ration"))
    assert main(["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--config", str(config)]) == 2
    error = capsys.readouterr().err
    line = line_of("max_repeating_ngram_ration", config.read_text())
    assert (f"{config}:{line}: RepeatingTopNGramsFilter has no parameter 'max_repeating_ngram_ration' "
            "(did you mean max_repeating_ngram_ratio?)") in error
    assert not (tmp_path / "out").exists()


def test_a_rerun_skips_every_complete_partition(corpus: Path, tmp_path: Path, capsys) -> None:
    command = ["filter", "--input", str(corpus), "--output", str(tmp_path / "out"), "--preset", "gopher"]
    assert main(command) == 0
    first = {path.name: path.stat().st_mtime_ns for path in (tmp_path / "out").glob("*.jsonl")}
    capsys.readouterr()
    assert main(command) == 0
    summary = capsys.readouterr().out
    assert f"0 partition(s) filtered, {FILES} skipped as complete" in summary
    assert "documents in     0" in summary
    assert {path.name: path.stat().st_mtime_ns for path in (tmp_path / "out").glob("*.jsonl")} == first
    assert (tmp_path / "out" / "checkpoints" / "filter").is_dir()
