"""Exact deduplication: planted copies found, NeMo Curator's facts, reruns,
input changes, a killed run, the command, and the runners giving one answer."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from beam_curator.cli.exact import exact_summary
from beam_curator.cli.main import main
from beam_curator.errors import CuratorSettingsError
from beam_curator.workflows import ExactDeduplicationWorkflow
from beam_curator.workflows.exact.identification import bucket_count, digest_range, removal_ids
from beam_curator.workflows.semantic.ids import FileRegistry
from stages_for_tests import kill_in_phase_and_resume, killed_on_a_runner_and_resumed

GENERATED = "_curator_dedup_id"


def write_corpus(folder: Path, files: int = 4, per_file: int = 6) -> None:
    """Texts ``t<k>``; every third document repeats an earlier text, across files too."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(files):
        rows = []
        for row in range(per_file):
            serial = number * per_file + row
            text = f"text {serial // 3}" if serial % 3 == 2 else f"text {serial}"
            rows.append({"doc_id": f"f{number}r{row}", "text": text})
        (folder / f"part{number}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def removed(output: Path, column: str) -> list:
    return sorted(pd.read_parquet(output / "ExactDuplicateIds")[column])


def located(output: Path, cache: Path) -> list[tuple[str, int]]:
    """Generated ids removed, as (file name, row): comparable across id registries."""
    registry = FileRegistry(str(cache))
    return sorted((Path(path).name, row) for path, row in map(registry.locate, removed(output, GENERATED)))


def expected(folder: Path) -> list[str]:
    """All but the smallest id of each text's copies."""
    copies: dict[str, list[str]] = {}
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            copies.setdefault(record["text"], []).append(record["doc_id"])
    return sorted(doc_id for ids in copies.values() for doc_id in sorted(ids)[1:])


def exact(tmp_path: Path, name: str = "out", **settings: object) -> dict:
    settings = {"input_filetype": "jsonl", "assign_id": False, "id_field": "doc_id", **settings}
    return ExactDeduplicationWorkflow(str(tmp_path / name), str(tmp_path / "input"), **settings).run().metadata


def test_planted_copies_all_but_the_smallest_id_are_listed_and_removed(tmp_path: Path) -> None:
    write_corpus(tmp_path / "input")
    metadata = exact(tmp_path, perform_removal=True)
    assert removed(tmp_path / "out", "doc_id") == expected(tmp_path / "input")
    assert metadata["num_duplicates"] == len(expected(tmp_path / "input")) == 6 and metadata["num_documents"] == 24
    assert metadata["phases_run"] == ["hashing", "identification", "removal"]
    kept = pd.concat(pd.read_json(path, lines=True) for path in (tmp_path / "out" / "deduplicated").glob("*.jsonl"))
    assert len(kept) == 18 and kept["text"].is_unique


def test_grouping_by_digest_range_finds_copies_in_any_bucket(tmp_path: Path) -> None:
    """Ranges tile the digests; within one, the smallest id is kept, a
    generated id ranking by (file, row) as a fresh run numbers it."""
    assert bucket_count(1) == 1 and bucket_count((1 << 22) + 1) == 2
    assert digest_range(0, 1) == [] and digest_range(1, 3) == [
        ("_exact_duplicate_group", ">=", "55555555"), ("_exact_duplicate_group", "<", "aaaaaaaa")]
    import pyarrow as pa

    table = pa.table({"id": [5, 6, 7, 8], "_exact_duplicate_group": ["b", "a", "b", "a"],
                      "_curator_file": pa.array([1, 0, 0, 0], pa.int32()), "_curator_row": [0, 3, 1, 2]})
    assert removal_ids(table, "id").to_pylist() == [7, 8]
    generated = table.rename_columns([GENERATED, *table.column_names[1:]])
    assert removal_ids(generated, GENERATED).to_pylist() == [5, 6]


# NeMo Curator's tests/stages/deduplication/exact/test_workflow.py and test_identification.py.

def nemo_parquet(folder: Path) -> list[Path]:
    folder.mkdir()
    files = [folder / "data_part1.parquet", folder / "data_part2.parquet"]
    pd.DataFrame({"id": [1, 2, 300], "text": ["Small String", "Large String", "Medium String"]}).to_parquet(files[0])
    pd.DataFrame({"id": [4, -1], "text": ["Large String", "Small String"]}).to_parquet(files[1])
    return files


@pytest.mark.parametrize("assign_id", [True, False])
def test_nemo_dup_one_document_of_each_group_is_kept(tmp_path: Path, assign_id: bool) -> None:
    files = nemo_parquet(tmp_path / "input")
    ExactDeduplicationWorkflow(str(tmp_path / "out"), str(tmp_path / "input"), input_filetype="parquet",
                               assign_id=assign_id, id_field=None if assign_id else "id", text_field="text").run()
    ids = pd.read_parquet(tmp_path / "out" / "ExactDuplicateIds")
    if assign_id:
        # NeMo's helper: IdGeneratorBase.from_disk(...).get_batch_range(task.data) numbers each task's rows.
        state = json.loads((tmp_path / "out" / "exact_id_generator.json").read_text())
        assert set(state) == {"next_id", "batch_registry"}
        frames = []
        for path in files:
            low, high = state["batch_registry"][str(uuid.uuid5(uuid.NAMESPACE_URL, str(path)))]
            frames.append(pd.read_parquet(path).assign(**{GENERATED: np.arange(low, high + 1)}))
        assert list(ids.columns) == [GENERATED]
        ids = ids.merge(pd.concat(frames), on=GENERATED, how="left")
    else:
        assert list(ids.columns) == ["id"]
    assert all(len(group - set(ids["id"])) == 1 for group in ({1, -1}, {2, 4}))
    assert len(ids) == 2


def test_nemo_no_dedup_leaves_an_empty_list(tmp_path: Path) -> None:
    (tmp_path / "input").mkdir()
    pd.DataFrame({"id": [1, 2, 300], "content": ["abc", "aba", "abb"]}).to_json(
        tmp_path / "input" / "no_dedup_data.jsonl", orient="records", lines=True)
    ExactDeduplicationWorkflow(str(tmp_path / "out"), str(tmp_path / "input"), input_filetype="jsonl",
                               assign_id=True, text_field="content").run()
    assert len(pd.read_parquet(tmp_path / "out" / "ExactDuplicateIds")) == 0


def test_nemo_bad_inputs_are_settings_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="id_field must be None if assign_id is True"):
        ExactDeduplicationWorkflow(str(tmp_path), "/dummy", assign_id=True, id_field="id")
    with pytest.raises(CuratorSettingsError, match="id_field must be provided if assign_id is False"):
        ExactDeduplicationWorkflow(str(tmp_path), "/dummy", assign_id=False)
    with pytest.raises(ValueError, match="input_path to the dataset must be provided"):
        ExactDeduplicationWorkflow(output_path=str(tmp_path)).run()
    with pytest.raises(TypeError, match="did you mean 'runner'"):
        ExactDeduplicationWorkflow(str(tmp_path), "/dummy", runer="local")
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "a.jsonl").write_text('{"doc_id": 1, "text": 5}\n')
    with pytest.raises(ValueError, match=r"a.jsonl, line 1: text_field 'text' holds a integer"):
        exact(tmp_path)
    with pytest.raises(ValueError, match="overlap|inside|within"):
        ExactDeduplicationWorkflow(str(tmp_path / "input" / "out"), str(tmp_path / "input"),
                                   input_filetype="jsonl").run()
    assert not (tmp_path / "out").exists() and not (tmp_path / "input" / "out").exists()


def test_reruns_follow_changed_added_and_removed_files_like_a_fresh_run(tmp_path: Path) -> None:
    write_corpus(tmp_path / "input")
    first = exact(tmp_path, assign_id=True, id_field=None, perform_removal=True)
    assert first["phases_run"] == ["hashing", "identification", "removal"]
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "out").rglob("*") if path.is_file()}
    again = exact(tmp_path, assign_id=True, id_field=None, perform_removal=True)
    assert again["phases_run"] == [] and again["num_duplicates"] == first["num_duplicates"]
    assert {path: path.stat().st_mtime_ns for path in written} == written, "a rerun with nothing to do wrote"
    hashes = tmp_path / "out" / "exact" / "hashes"
    before = {path.name: path.stat().st_mtime_ns for path in hashes.glob("*.parquet")}
    (tmp_path / "input" / "part1.jsonl").write_text('{"doc_id": "n1", "text": "text 0"}\n')  # changed
    (tmp_path / "input" / "part3.jsonl").unlink()  # removed
    (tmp_path / "input" / "a_new.jsonl").write_text('{"doc_id": "n2", "text": "text 13"}\n')  # added, sorts first
    changed = exact(tmp_path, assign_id=True, id_field=None, perform_removal=True)
    after = {path.name: path.stat().st_mtime_ns for path in hashes.glob("*.parquet")}
    assert {name for name in after if name not in before or after[name] != before[name]} == {
        name for name in after if name.startswith(("part1", "a_new"))}, "only changed and added files are hashed"
    assert not any(name.startswith("part3") for name in after)
    fresh = exact(tmp_path, "fresh", assign_id=True, id_field=None, perform_removal=True)
    assert located(tmp_path / "out", tmp_path / "out") == located(tmp_path / "fresh", tmp_path / "fresh")
    assert changed["num_duplicates"] == fresh["num_duplicates"] == len(located(tmp_path / "fresh", tmp_path / "fresh")) > 0
    texts = [sorted(pd.concat(pd.read_json(p, lines=True) for p in (tmp_path / name / "deduplicated").glob("*.jsonl"))
                    .astype(str).itertuples(index=False)) for name in ("out", "fresh")]
    assert texts[0] == texts[1]


KILLED_RUN = ("ExactDeduplicationWorkflow(sys.argv[1], sys.argv[2], input_filetype='jsonl', assign_id=False, "
              "id_field='doc_id')")
KILLED_IN_HASHING = ("hashing", "exact/hashes/[!.]*.parquet", 2)
KILLED_IN_EACH_PHASE = [KILLED_IN_HASHING, ("identification", "ExactDuplicateIds/[!.]*.parquet", 1)]


@pytest.mark.parametrize(("phase", "outputs", "at"), [
    ("hashing", "exact/hashes/[!.]*.parquet", 5),
    ("identification", "ExactDuplicateIds/[!.]*.parquet", 1),
])
def test_a_run_killed_in_a_phase_resumes_and_matches_a_fresh_run(tmp_path: Path, phase: str, outputs: str,
                                                                 at: int) -> None:
    """The rerun starts in the killed phase, or in the next where the kill
    came after the phase's last write, and ends where a fresh run ends."""
    write_corpus(tmp_path / "input", files=60, per_file=3)
    phases_run = kill_in_phase_and_resume(tmp_path, KILLED_RUN, outputs, at,
                                          lambda name: exact(tmp_path, name, perform_removal=True), perform_removal=True)
    later = ["hashing", "identification", "removal"][["hashing", "identification"].index(phase):]
    assert phases_run in (later, later[1:]), phases_run
    assert removed(tmp_path / "out", "doc_id") == removed(tmp_path / "fresh", "doc_id") == expected(tmp_path / "input")


def test_the_exact_command_prints_a_summary_and_says_when_nothing_is_left(tmp_path: Path, capsys) -> None:
    write_corpus(tmp_path / "input")
    command = ["exact", "--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--id-field", "doc_id"]
    assert main(command) == 0  # jsonl by default
    printed = capsys.readouterr().out
    assert "exact deduplication summary" in printed and "ran hashing, identification, removal" in printed
    assert "documents in     24" in printed and "removed          6" in printed and "kept             18" in printed
    # The copy kept is the one with the smallest id: of the user's ids, with --id-field.
    assert "duplicates       6 (every copy of each text but the smallest doc_id)\n" in printed
    assert "time (s)         hashing " in printed
    assert main(command) == 0
    again = capsys.readouterr().out
    assert "nothing to do" in again
    # Phases reused, not run, are not listed with seconds of their own.
    assert re.search(r"^  time \(s\)         total \d+\.\d$", again, re.MULTILINE), again
    assert main([*command, "--output", str(tmp_path / "other"), "--text-field", "body"]) == 2
    assert "error: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--n-clusters", "3"])
    assert exit_.value.code == 2


def test_the_summary_says_which_copy_is_kept_without_an_id_field() -> None:
    printed = exact_summary({"num_documents": 3, "num_duplicates": 1, "duplicates_path": "out/ExactDuplicateIds"}, None)
    assert "(every copy of each text but the first in input order, files by path then rows)\n" in printed


def test_runners_with_workers_resume_runs_killed_in_each_phase_to_the_local_runners_ids(tmp_path: Path, worker_runner: dict) -> None:
    write_corpus(tmp_path / "input", files=6, per_file=6)
    killed_on_a_runner_and_resumed(tmp_path, KILLED_RUN, KILLED_IN_EACH_PHASE, ["hashing", "identification"],
                                   lambda name, **settings: exact(tmp_path, name, **settings),
                                   lambda name: removed(tmp_path / name, "doc_id"), worker_runner)
    assert removed(tmp_path / "local", "doc_id") == expected(tmp_path / "input")
