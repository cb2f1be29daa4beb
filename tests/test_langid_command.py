"""``beam-curator langid`` (issue 44): the command run on real Debian descriptions in 18 languages,
its folders per language checked against ``identify_language`` applied directly, read back by
pyarrow as a hive dataset and by our own readers, resumed, and repaired after a deleted file."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from shared_data import MULTILINGUAL, shared_data  # noqa: E402

from beam_curator.cli.main import main  # noqa: E402
from beam_curator.stages.io import JsonlReader, ParquetReader  # noqa: E402
from beam_curator.stages.io.hive import NULL_FOLDER  # noqa: E402
from beam_curator.stages.text.language import identify_language  # noqa: E402


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    """120 descriptions spread over every language of the file (it is sorted by language), and an
    empty text, each with its language and score as ``identify_language`` gives them."""
    with gzip.open(shared_data(MULTILINGUAL), "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    texts = [row["text"] for row in rows[:: len(rows) // 120][:120]] + ["   "]
    return [{"id": f"doc-{index}", "text": text, "found": identify_language(text)} for index, text in enumerate(texts)]


def write_input(folder: Path, documents: list[dict], filetype: str = "jsonl") -> Path:
    """The documents (id and text) dealt into 3 files of ``filetype``."""
    folder.mkdir()
    for part in range(3):
        rows = [{"id": document["id"], "text": document["text"]} for document in documents[part::3]]
        if filetype == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), folder / f"part-{part}.parquet")
        else:
            (folder / f"part-{part}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def langid(capsys: pytest.CaptureFixture, *args: str) -> str:
    """The command's summary, after checking it succeeded."""
    assert main(["langid", "--quiet", *args]) == 0
    return capsys.readouterr().out


def rows_of(summary: str) -> dict[str, str]:
    """The summary's rows, ``{name: value}``; a language's row is indented under "documents out"."""
    rows = {}
    for line in summary.splitlines()[2:]:
        name, value = line.strip().rsplit(None, 1) if line.startswith("    ") else (line[2:18].strip(), line[19:])
        rows[name] = value
    return rows


def split_output(output: Path) -> dict[str, list[str]]:
    """The ids in each ``language=...`` folder of a JSONL output, sorted."""
    found: dict[str, list[str]] = {}
    for file in output.glob("language=*/*.jsonl"):
        rows = [json.loads(line) for line in file.read_text().splitlines()]
        assert all("language" not in row and 0.0 <= row["language_score"] <= 1.0 for row in rows)
        found.setdefault(file.parent.name.removeprefix("language="), []).extend(row["id"] for row in rows)
    return {language: sorted(ids) for language, ids in found.items()}


def files_of(output: Path) -> dict[str, bytes]:
    return {str(file.relative_to(output)): file.read_bytes() for file in output.glob("language=*/*")}


def test_split_folders_hold_each_language_and_read_back_as_a_hive_dataset(
        tmp_path: Path, documents: list[dict], capsys: pytest.CaptureFixture) -> None:
    inputs, output = write_input(tmp_path / "in", documents), tmp_path / "out"
    summary = langid(capsys, "--input", str(inputs), "--output", str(output), "--split")
    expected: dict[str, list[str]] = {}
    for document in documents:
        expected.setdefault(document["found"][0] or NULL_FOLDER, []).append(document["id"])
    assert split_output(output) == {language: sorted(ids) for language, ids in expected.items()}
    assert len(expected) >= 15, "the sample spans the file's languages"
    rows = rows_of(summary)
    assert "3 partition(s) identified" in rows["this run"]
    assert rows["documents out"] == str(len(documents))
    assert {name: int(count) for name, count in rows.items() if name not in ("this run", "documents out", "output")} == {
        ("(empty text)" if language == NULL_FOLDER else language): len(ids) for language, ids in expected.items()}

    table = ds.dataset(output, format="json", partitioning="hive").to_table()
    assert dict(zip(table["id"].to_pylist(), table["language"].to_pylist())) == {
        document["id"]: document["found"][0] or None for document in documents}
    reader = JsonlReader(str(output))
    read = pa.concat_tables(reader.reader.process(task).to_pyarrow() for task in reader.partitioning.process(None))
    assert sorted(zip(read["id"].to_pylist(), read["language"].to_pylist())) == sorted(
        zip(table["id"].to_pylist(), table["language"].to_pylist()))

    before = files_of(output)
    rerun = langid(capsys, "--input", str(inputs), "--output", str(output), "--split")
    assert "nothing to do" in rerun and rows_of(rerun)["documents out"] == str(len(documents))
    assert files_of(output) == before


def test_a_file_deleted_in_one_language_folder_reruns_only_its_partition(
        tmp_path: Path, documents: list[dict], capsys: pytest.CaptureFixture) -> None:
    inputs, output, fresh = write_input(tmp_path / "in", documents), tmp_path / "out", tmp_path / "fresh"
    langid(capsys, "--input", str(inputs), "--output", str(output), "--split")
    victim = sorted((output / "language=de").glob("part-1-*.jsonl"))[0]
    untouched = {name: data for name, data in files_of(output).items() if "part-1-" not in name}
    victim.unlink()
    rerun = langid(capsys, "--input", str(inputs), "--output", str(output), "--split")
    assert "1 partition(s) identified, 2 complete before" in rerun
    langid(capsys, "--input", str(inputs), "--output", str(fresh), "--split")
    assert files_of(output) == files_of(fresh)
    assert {name: data for name, data in files_of(output).items() if "part-1-" not in name} == untouched


def test_languages_and_min_score_keep_only_those_documents(
        tmp_path: Path, documents: list[dict], capsys: pytest.CaptureFixture) -> None:
    inputs, output = write_input(tmp_path / "in", documents), tmp_path / "out"
    summary = langid(capsys, "--input", str(inputs), "--output", str(output), "--languages", "cs,sk,de",
                     "--min-score", "0.9")
    rows = [json.loads(line) for file in output.glob("*.jsonl") for line in file.read_text().splitlines()]
    kept = {document["id"] for document in documents
            if document["found"][0] in {"cs", "sk", "de"} and document["found"][1] >= 0.9}
    assert {row["id"] for row in rows} == kept and kept
    assert {row["language"] for row in rows} <= {"cs", "sk", "de"} and min(row["language_score"] for row in rows) >= 0.9
    assert rows_of(summary)["documents out"] == str(len(kept))


def test_parquet_in_gives_parquet_out(tmp_path: Path, documents: list[dict], capsys: pytest.CaptureFixture) -> None:
    inputs, output = write_input(tmp_path / "in", documents, "parquet"), tmp_path / "out"
    langid(capsys, "--input", str(inputs), "--output", str(output), "--split", "--input-filetype", "parquet")
    assert not list(output.glob("language=*/*.jsonl"))
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    assert sorted(zip(table["id"].to_pylist(), table["language"].to_pylist())) == sorted(
        (document["id"], document["found"][0] or None) for document in documents)
    reader = ParquetReader(str(output), fields=["id", "language"])
    read = pa.concat_tables(reader.reader.process(task).to_pyarrow() for task in reader.partitioning.process(None))
    assert sorted(zip(read["id"].to_pylist(), read["language"].to_pylist()), key=str) == sorted(
        zip(table["id"].to_pylist(), table["language"].to_pylist()), key=str)


def test_without_the_extra_the_command_names_it_before_any_work(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "part.jsonl").write_text(json.dumps({"text": "Ein kurzer Satz."}) + "\n")
    blocked = ("import sys; sys.modules['py3langid'] = None\n"
               "from beam_curator.cli.main import main\n"
               f"sys.exit(main(['langid', '--input', {str(inputs)!r}, '--output', {str(tmp_path / 'out')!r}]))")
    run = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr[-2000:]
    assert 'pip install "beam-curator[langid]"' in run.stderr
    assert not (tmp_path / "out").exists()
