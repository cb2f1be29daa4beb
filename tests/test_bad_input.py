"""Bad input fails with a message that says where and what to do, through a
real run: Beam re-raises worker errors, so the original text must survive in
the exception it raises. A partition whose input failed is never marked."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import output_rows, source_id, write_corpus, written_file  # noqa: E402

from beam_curator import Pipeline, RunSummary  # noqa: E402
from beam_curator.checkpoint import open_store  # noqa: E402
from beam_curator.stages import ProcessingStage  # noqa: E402
from beam_curator.stages.io import CuratorInputError, JsonlReader, JsonlReaderStage, JsonlWriter  # noqa: E402
from beam_curator.stages.lineage import LineageError, run_stage  # noqa: E402
from beam_curator.tasks import FileGroupTask, Task  # noqa: E402
from beam_curator.transforms import PipelineDefinitionError  # noqa: E402

GOOD = b'{"text": "fine", "id": 1}\n'
MALFORMED = b'{"text": "cut off\n'
NOT_UTF8 = b'{"text": "caf\xe9"}\n'
NO_TEXT = b'{"id": 3}\n'


def run(tmp_path: Path, input_path: Path | str, **reader: object) -> RunSummary:
    """Reader -> writer with a checkpoint, on the in-process runner."""
    return Pipeline("bad_input", stages=[
        JsonlReader(str(input_path), files_per_partition=1, **reader),
        JsonlWriter(str(tmp_path / "out")),
    ]).run(checkpoint_path=str(tmp_path / "ckpt"), runner="local")


def completed(tmp_path: Path) -> set[str]:
    return open_store(str(tmp_path / "ckpt")).completed()


@pytest.mark.parametrize("line, problem, reader", [
    (MALFORMED, "malformed JSON", {}),
    (NOT_UTF8, "not UTF-8 (byte 13 is 0xe9)", {}),
    (NO_TEXT, "missing field(s) text", {"fields": ["text"]}),
    (b"[1, 2]\n", "expected a JSON object, found list", {}),
], ids=["malformed", "not-utf8", "missing-field", "not-an-object"])
def test_a_bad_line_names_file_and_line_as_the_packages_error(tmp_path: Path, line: bytes, problem: str, reader: dict) -> None:
    bad = tmp_path / "in" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_bytes(GOOD + b"\n" + line + GOOD)  # the blank line still counts
    with pytest.raises(CuratorInputError) as error:
        run(tmp_path, bad.parent, **reader)
    message = str(error.value)
    assert f"{bad}, line 3: {problem}" in message
    assert "on_bad_record='skip'" in message, "the message says how to get past it"
    assert "while running" not in message, "Beam's notes of the steps it passed through are dropped"
    assert completed(tmp_path) == set()


class ReplacesTheInputError(ProcessingStage):
    """A user's stage that meets the package's input error and raises its own
    instead, hiding the first with ``from None``."""

    name = "replaces_the_input_error"

    def process(self, task: Task) -> Task:
        try:
            raise CuratorInputError("the package's error, which the stage replaced")
        except CuratorInputError:
            raise RuntimeError("the stage's own error") from None


def test_an_error_raised_from_none_is_reported_not_the_one_it_hid(tmp_path: Path) -> None:
    write_corpus(tmp_path / "in", 1)
    pipeline = Pipeline("hides", stages=[
        JsonlReader(str(tmp_path / "in")), ReplacesTheInputError(), JsonlWriter(str(tmp_path / "out")),
    ])
    with pytest.raises(Exception) as error:
        pipeline.run(checkpoint_path=str(tmp_path / "ckpt"), runner="local")
    assert not isinstance(error.value, CuratorInputError)
    assert "the stage's own error" in str(error.value)
    assert "which the stage replaced" not in str(error.value)


def test_records_of_inconsistent_types_name_the_file_line_and_record(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"text": "a"}\n\n{"id": 7, "text": 5}\n')
    expected = f"{mixed}: line 3: field 'text' holds a int where line 1 holds a str" + r' \({"id": 7, "text": 5}\)'
    with pytest.raises(CuratorInputError, match=expected):
        run_stage(JsonlReaderStage(), [FileGroupTask(data=[str(mixed)])])


def test_an_empty_file_warns_and_its_partition_completes_without_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    input_dir = write_corpus(tmp_path / "in", 2)
    empty = input_dir / "part-empty.jsonl"
    empty.write_text("\n")
    with caplog.at_level(logging.WARNING):
        summary = run(tmp_path, input_dir)
    assert f"input file {empty} holds no records" in caplog.text
    assert (summary.partitions_pending, summary.partitions_completed) == (3, 3)
    assert source_id([empty]) in completed(tmp_path)
    assert written_file(tmp_path / "out", empty).read_text() == ""
    assert len(output_rows(tmp_path / "out")) == 6


def test_a_glob_matching_nothing_says_so(tmp_path: Path) -> None:
    pattern = str(tmp_path / "nowhere" / "*.jsonl")
    with pytest.raises(CuratorInputError) as error:
        run(tmp_path, pattern)
    assert f"input {pattern!r} matches no .jsonl/.jsonl.gz/.json files; check the path or glob" in str(error.value)


def test_an_unwritable_checkpoint_fails_before_anything_runs(tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", 1)
    (tmp_path / "afile").write_text("a regular file, so no folder can be made under it")
    pipeline = Pipeline("bad_checkpoint", stages=[JsonlReader(str(input_dir)), JsonlWriter(str(tmp_path / "out"))])
    with pytest.raises(PermissionError) as error:
        pipeline.run(checkpoint_path=str(tmp_path / "afile" / "sub"), runner="local")
    assert f"checkpoint folder {tmp_path / 'afile' / 'sub'}" in str(error.value)
    assert "choose another checkpoint_path" in str(error.value)
    assert not (tmp_path / "out").exists(), "nothing may run before the checkpoint is known to be writable"


def test_two_source_stages_are_refused_naming_both(tmp_path: Path) -> None:
    write_corpus(tmp_path / "a", 1)
    write_corpus(tmp_path / "b", 1)
    pipeline = Pipeline("two_sources", stages=[
        JsonlReader(str(tmp_path / "a")), JsonlReader(str(tmp_path / "b")), JsonlWriter(str(tmp_path / "out")),
    ])
    with pytest.raises(PipelineDefinitionError, match="only one stage may set is_source_stage") as error:
        pipeline.run(runner="local")
    assert str(error.value).count("file_partitioning") == 2
    assert not (tmp_path / "out").exists()


class ShardTask(Task):
    def get_deterministic_id(self) -> str:
        return str(self.data)


class ShardSource(ProcessingStage):
    """A custom source whose shard names contain underscores."""

    name = "shard_source"

    def process(self, task: Task) -> list[ShardTask]:
        return [ShardTask(data="shard_1"), ShardTask(data="shard_2")]


class Keep(ProcessingStage):
    def process(self, task: Task) -> Task:
        return task


def test_an_underscore_in_a_custom_id_stops_the_run_clearly(tmp_path: Path) -> None:
    with pytest.raises(Exception) as error:
        Pipeline("shards", stages=[ShardSource(), Keep()]).run(checkpoint_path=str(tmp_path), runner="local")
    message = str(error.value)
    assert "deterministic id 'shard_1' of ShardTask contains '_'" in message
    assert "shard_source" in message
    assert isinstance(error.value, LineageError) or LineageError.__name__ in message


def test_skip_drops_bad_lines_counts_them_and_completes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    input_dir = write_corpus(tmp_path / "in", 2)
    bad = input_dir / "part-bad.jsonl"
    bad.write_bytes(GOOD + MALFORMED + NOT_UTF8 + NO_TEXT + GOOD)
    stage = JsonlReaderStage(fields=["text"], on_bad_record="skip")
    [batch] = run_stage(stage, [FileGroupTask(data=[str(bad)])]).outputs
    assert batch.to_pandas()["text"].tolist() == ["fine", "fine"]
    assert batch._metadata["skipped_records"] == 3
    with caplog.at_level(logging.WARNING):
        summary = run(tmp_path, input_dir, fields=["text"], on_bad_record="skip")
    for line in (2, 3, 4):
        assert f"skipping bad record in {bad}, line {line}:" in caplog.text
    assert summary.partitions_completed == 3
    assert completed(tmp_path) == {source_id([file]) for file in input_dir.glob("*.jsonl")}
    assert len(output_rows(tmp_path / "out")) == 2 * 3 + 2


def test_raise_keeps_the_bad_partition_pending_until_it_is_fixed(tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", 3)
    bad = input_dir / "part-bad.jsonl"
    bad.write_bytes(GOOD + MALFORMED)
    good = {source_id([file]) for file in input_dir.glob("*.jsonl")} - {source_id([bad])}
    with pytest.raises(Exception, match="line 2: malformed JSON"):
        run(tmp_path, input_dir)
    # Partitions processed before the failure may be marked; the bad one never is.
    marked = completed(tmp_path)
    assert marked <= good
    assert not written_file(tmp_path / "out", bad).exists()

    bad.write_bytes(GOOD + GOOD)  # the user fixes the file; its partition id is unchanged
    summary = run(tmp_path, input_dir)
    assert (summary.partitions_skipped, summary.partitions_pending) == (len(marked), 4 - len(marked))
    assert completed(tmp_path) == good | {source_id([bad])}
    rows = output_rows(tmp_path / "out")
    assert len(rows) == 3 * 3 + 2 and rows.count(json.loads(GOOD)) == 2


def test_an_empty_file_completes_when_the_writer_selects_fields(tmp_path: Path) -> None:
    """The reader knows the columns it was asked for even when a partition
    holds no records, so a writer selecting them must not fail."""
    input_dir = write_corpus(tmp_path / "in", 1)
    empty = input_dir / "part-empty.jsonl"
    empty.write_text("")
    summary = Pipeline("empty_with_fields", stages=[
        JsonlReader(str(input_dir), fields=["id", "text"]),
        JsonlWriter(str(tmp_path / "out"), fields=["text"]),
    ]).run(checkpoint_path=str(tmp_path / "ckpt"), runner="local")
    assert summary.partitions_completed == 2
    assert written_file(tmp_path / "out", empty).read_text() == ""
