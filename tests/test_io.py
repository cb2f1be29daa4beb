"""Readers and writers on real JSONL and parquet files.

Most tests drive the stages through ``lineage`` exactly as the engine does
(source ids, then one stage at a time) without starting Beam; one round trip
per format runs the whole pipeline.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.stages.io import (
    CuratorInputError,
    FilePartitioningStage,
    JsonlReader,
    JsonlWriter,
    ParquetReader,
    ParquetWriter,
)
from beam_curator.stages.io.reader import FileReader
from beam_curator.stages.lineage import derive_sources, run_stage
from beam_curator.tasks import DocumentBatch, EmptyTask, FileGroupTask

ROWS = [
    {"id": 1, "text": "première ligne", "lang": "fr"},
    {"id": 2, "text": "second line", "lang": "en"},
    {"id": 3, "text": "三行目", "lang": "ja"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def read(reader: FileReader) -> list[DocumentBatch]:
    """Partition and read as a run would, without Beam."""
    partitioning, reading = reader.decompose()
    sources = derive_sources(EmptyTask(), partitioning.process(EmptyTask()), partitioning.stage_name).outputs
    return run_stage(reading, sources).outputs


def groups(folder: Path, **grouping: object) -> list[list[str]]:
    """File names per partition, in order."""
    stage = FilePartitioningStage(str(folder), **grouping)
    return [[Path(p).name for p in task.data] for task in stage.process(EmptyTask())]


def test_jsonl_round_trip_keeps_rows_and_unicode(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "in" / "a.jsonl", ROWS)
    [batch] = read(JsonlReader(str(tmp_path / "in")))
    writer = JsonlWriter(str(tmp_path / "out"))
    writer.setup()
    [written] = run_stage(writer, [batch]).outputs
    [path] = written.data
    assert path == f"{tmp_path / 'out'}/a-{hashlib.sha256(batch.task_id.encode()).hexdigest()[:16]}.jsonl", \
        "named after its input file and its lineage id"
    assert "première" in Path(path).read_text(encoding="utf-8"), "non-ASCII text is written as is"
    assert [json.loads(line) for line in Path(path).read_text().splitlines()] == ROWS
    assert written._metadata["num_records"] == 3


def test_compressed_jsonl_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in ROWS).encode()))
    [batch] = read(JsonlReader(str(tmp_path)))
    assert batch.to_pyarrow().to_pylist() == ROWS


def test_a_byte_order_mark_is_read_as_utf8_and_crlf_still_works(tmp_path: Path) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in ROWS)
    (tmp_path / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    [batch] = read(JsonlReader(str(tmp_path)))
    assert batch.to_pyarrow().to_pylist() == ROWS


def test_fields_select_and_order_columns(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", ROWS)
    [batch] = read(JsonlReader(str(tmp_path), fields=["text", "id"]))
    assert batch.to_pyarrow().column_names == ["text", "id"]
    assert batch.to_pyarrow().to_pylist() == [{"text": r["text"], "id": r["id"]} for r in ROWS]


def test_file_and_row_columns_locate_each_record_in_its_file(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", ROWS[:2])
    second = write_jsonl(tmp_path / "b.jsonl", ROWS[2:])
    [batch] = read(JsonlReader(str(tmp_path), files_per_partition=2, file_column="file", row_column="row"))
    table = batch.to_pyarrow()
    assert list(zip(table["file"].to_pylist(), table["row"].to_pylist(), table["id"].to_pylist())) == [
        (str(first), 0, 1), (str(first), 1, 2), (str(second), 0, 3),
    ]
    assert batch._metadata["source_files"] == [str(first), str(second)]


def test_files_per_partition_groups_sorted_files_the_same_way_every_time(tmp_path: Path) -> None:
    names = [f"f{i}.jsonl" for i in range(5)]
    for name in random.Random(7).sample(names, len(names)):  # creation order must not matter
        write_jsonl(tmp_path / name, ROWS[:1])
    expected = [["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]
    assert groups(tmp_path, files_per_partition=2) == expected
    assert groups(tmp_path, files_per_partition=2) == expected
    assert groups(tmp_path) == [[name] for name in names], "one file per partition by default"


def test_blocksize_closes_a_group_once_it_holds_enough_bytes(tmp_path: Path) -> None:
    for index, size in enumerate([600, 600, 600, 100, 100, 100]):
        (tmp_path / f"f{index}.jsonl").write_bytes(b" " * (size - 1) + b"\n")
    assert groups(tmp_path, blocksize="1KB") == [
        ["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl", "f4.jsonl", "f5.jsonl"],
    ]
    assert groups(tmp_path, blocksize=1000, files_per_partition=3) == [
        ["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl", "f4.jsonl"], ["f5.jsonl"],
    ], "whichever limit comes first closes the group"


def test_partition_ids_do_not_depend_on_how_inputs_are_listed(tmp_path: Path) -> None:
    for name in ("b", "a", "c"):
        write_jsonl(tmp_path / f"{name}.jsonl", ROWS[:1])
    by_folder = read(JsonlReader(str(tmp_path), files_per_partition=2))
    by_list = read(JsonlReader([str(tmp_path / "c.jsonl"), str(tmp_path / "*.jsonl")], files_per_partition=2))
    assert [b.task_id for b in by_folder] == [b.task_id for b in by_list]
    assert [b._metadata["source_files"] for b in by_folder] == [
        [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], [str(tmp_path / "c.jsonl")],
    ]


def test_writer_names_files_by_input_and_task_and_a_replay_overwrites(tmp_path: Path) -> None:
    writer = JsonlWriter(str(tmp_path / "out"), fields=["text"])
    writer.setup()
    task_id = "0_0123456789abcdef_0"
    source = {"source_files": ["gs://bucket/deb-00.jsonl.gz", "gs://bucket/deb-01.jsonl.gz"]}
    name = f"deb-00-{hashlib.sha256(task_id.encode()).hexdigest()[:16]}.jsonl"
    writer.process(DocumentBatch(task_id=task_id, data=pa.Table.from_pylist(ROWS), _metadata=source))
    result = writer.process(DocumentBatch(task_id=task_id, data=pa.Table.from_pylist(ROWS[:1]), _metadata=source))
    assert isinstance(result, FileGroupTask) and result.data == [f"{tmp_path / 'out'}/{name}"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == [name], "replayed, not duplicated"
    assert (tmp_path / "out" / name).read_text() == '{"text": "première ligne"}\n'
    sibling = writer.process(DocumentBatch(task_id=f"{task_id}_1", data=pa.Table.from_pylist(ROWS), _metadata=source))
    assert sibling.data[0].rsplit("/", 1)[1].startswith("deb-00-") and sibling.data != result.data, \
        "another task from the same input gets its own file"
    nameless = writer.process(DocumentBatch(task_id="0_2_0", data=pa.Table.from_pylist(ROWS)))
    assert nameless.data[0].rsplit("/", 1)[1].startswith("part-"), "tasks read from no file get a generic stem"


def test_a_failed_write_leaves_no_file_behind(tmp_path: Path) -> None:
    """A write that stops midway (an error, Ctrl-C) must leave neither a
    partial final file nor a temporary one that a later reader would pick up."""

    class BreaksMidway(JsonlWriter):
        def serialize(self, table: pa.Table, handle) -> None:
            handle.write(b'{"text": "half a file"}\n')
            raise KeyboardInterrupt

    writer = BreaksMidway(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        writer.process(DocumentBatch(task_id="0_a_0", data=pa.Table.from_pylist(ROWS)))
    assert list(tmp_path.iterdir()) == []


def test_readers_ignore_temporary_files_of_an_interrupted_writer(tmp_path: Path) -> None:
    """A killed run leaves ``.tmp-<uuid>-<task>.jsonl`` beside the outputs; the
    next pipeline reading that folder must not read it as data."""
    write_jsonl(tmp_path / "0_a_0.jsonl", ROWS)
    write_jsonl(tmp_path / ".tmp-0123abcd-0_a_0.jsonl", ROWS[:2])
    assert groups(tmp_path) == [["0_a_0.jsonl"]]


def test_parquet_round_trip_through_a_pipeline(tmp_path: Path) -> None:
    table = pa.Table.from_pylist(ROWS)
    (tmp_path / "in").mkdir()
    pq.write_table(table.slice(0, 2), tmp_path / "in" / "a.parquet")
    pq.write_table(table.slice(2), tmp_path / "in" / "b.parquet")
    summary = Pipeline("parquet", stages=[
        ParquetReader(str(tmp_path / "in"), fields=["id", "text"], row_column="row"),
        ParquetWriter(str(tmp_path / "out")),
    ]).run(checkpoint_path=str(tmp_path / "ckpt"), runner="local")
    assert summary.partitions_completed == 2
    assert len(open_store(str(tmp_path / "ckpt")).completed()) == 2
    written = sorted(tmp_path.joinpath("out").glob("*.parquet"))
    source_ids = [FileGroupTask(data=[str(tmp_path / "in" / n)]).get_deterministic_id() for n in ("a.parquet", "b.parquet")]
    expected_names = sorted(
        f"{stem}-{hashlib.sha256(f'0_{source}_0'.encode()).hexdigest()[:16]}.parquet"
        for stem, source in zip("ab", source_ids)
    )
    assert [p.name for p in written] == expected_names
    rows = sorted((row for p in written for row in pq.read_table(p).to_pylist()), key=lambda r: r["id"])
    assert rows == [{"id": r["id"], "text": r["text"], "row": i} for r, i in zip(ROWS, [0, 1, 0])]


def test_parquet_reader_names_missing_columns_and_null_rows(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2, 3], "text": ["a", None, "c"]}), tmp_path / "a.parquet")
    with pytest.raises(CuratorInputError, match=r"a\.parquet: no column\(s\) body \(it has id, text\)"):
        read(ParquetReader(str(tmp_path), fields=["body"]))
    with pytest.raises(CuratorInputError, match=r"a\.parquet, row 1: 1 row\(s\) with null in text"):
        read(ParquetReader(str(tmp_path), fields=["text"]))
    [batch] = read(ParquetReader(str(tmp_path), fields=["text"], on_bad_record="skip"))
    assert batch.to_pyarrow()["text"].to_pylist() == ["a", "c"]
    assert batch._metadata["skipped_records"] == 1


def test_a_file_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(CuratorInputError, match=r"broken\.parquet: not a readable parquet file"):
        read(ParquetReader(str(tmp_path)))


# Every way the package reads its parquet files, local and through fsspec (memory://), 30 times;
# whole-file reads last (a script that ends on them aborted most often with Arrow's threads on).
READ_EACH_WAY = r'''
import sys
import fsspec, numpy as np, pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
from beam_curator.stages.io.parquet import ParquetFolder, ParquetInput, parquet_metadata, read_parquet
table = pa.table({"id": np.arange(50_000), "score": np.random.default_rng(0).random(50_000),
                  "text": [f"document {i}" for i in range(50_000)]})
for folder in ("memory://parquet", sys.argv[1]):
    url = f"{folder}/part.parquet"
    with fsspec.open(url, "wb") as handle:
        pq.write_table(table, handle, row_group_size=5_000)
    for _ in range(30):
        assert parquet_metadata(url).num_rows == table.num_rows
        with ParquetInput(url) as parquet:
            assert parquet.read(row_groups=[1, 2]).num_rows == 10_000
            assert sum(batch.num_rows for batch in parquet.iter_batches(1_000, [0, 3], ["id"])) == 10_000
        assert ParquetFolder(folder).count_rows() == table.num_rows
        assert ParquetFolder(folder).to_table(columns=["id"]).num_rows == table.num_rows
        assert sum(batch.num_rows for batch in ParquetFolder(folder).to_batches()) == table.num_rows
    for _ in range(30):
        assert read_parquet(url, filters=ds.field("score") >= 0.5).num_rows == (table["score"].to_numpy() >= 0.5).sum()
        assert read_parquet(url).num_rows == table.num_rows
'''


def test_scripts_that_read_parquet_end_without_an_abort(tmp_path: Path) -> None:
    """A script whose Arrow threads called into Python may abort as it exits
    (apache/arrow#34314; stages/io/parquet.py): each run here is a fresh
    interpreter that reads every way, and every one must exit cleanly."""
    failed = []
    for run in range(8):
        folder = tmp_path / str(run)
        folder.mkdir()
        done = subprocess.run([sys.executable, "-c", READ_EACH_WAY, str(folder)], capture_output=True, text=True)
        if done.returncode:
            failed.append((done.returncode, done.stderr[-300:]))
    assert not failed


def test_vector_columns_are_written_plain_and_read_back_unchanged(tmp_path: Path) -> None:
    """Vectors (list columns) get no dictionary and no statistics, the work Parquet's defaults spend on every
    float of them; the other columns keep both, and every value reads back as written."""
    from beam_curator.stages.io.parquet import write_table

    vectors = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    table = pa.table({"id": np.arange(300), "group": ["a", "b", "c"] * 100,
                      "embeddings": pa.array(list(vectors), type=pa.list_(pa.float32()))})
    with open(tmp_path / "v.parquet", "wb") as handle:
        write_table(table, handle)
    group = pq.ParquetFile(tmp_path / "v.parquet").metadata.row_group(0)
    chunks = {group.column(index).path_in_schema.split(".")[0]: group.column(index) for index in range(group.num_columns)}
    assert not chunks["embeddings"].has_dictionary_page and not chunks["embeddings"].is_stats_set
    assert chunks["group"].has_dictionary_page and chunks["id"].is_stats_set
    assert pq.read_table(tmp_path / "v.parquet").equals(table)


def test_partition_cols_write_hive_folders_that_resume_and_read_back(tmp_path: Path) -> None:
    """Each value gets its folder (unsafe ones escaped as pyarrow does), each file is recorded: a
    file deleted from one folder reruns its partition alone, and a partition whose input changed
    removes its file from the folder of a value it no longer has."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    values = {"a": ["de", "en", "de"], "b": ["", None, "a/b", ".."]}
    for stem, languages in values.items():
        pq.write_table(pa.table({"text": [f"{stem}{i}" for i in range(len(languages))], "language": languages},
                                schema=pa.schema([("text", pa.string()), ("language", pa.string())])),
                       inputs / f"{stem}.parquet")

    def run() -> int:
        pipeline = Pipeline("split", stages=[ParquetReader(str(inputs), fingerprint="stat"),
                                             ParquetWriter(str(tmp_path / "out"), partition_cols=["language"])])
        return pipeline.run(checkpoint_path=str(tmp_path / "ckpt")).partitions_completed

    assert run() == 2
    folders = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert folders == ["language=..", "language=__HIVE_DEFAULT_PARTITION__", "language=a%2Fb", "language=de",
                       "language=en"]
    assert all("language" not in pq.read_schema(file).names for file in (tmp_path / "out").glob("*/*.parquet"))
    table = pq.read_table(tmp_path / "out", partitioning="hive")
    assert sorted(zip(table["text"].to_pylist(), table["language"].to_pylist()), key=str) == sorted(
        [("a0", "de"), ("a1", "en"), ("a2", "de"), ("b0", None), ("b1", None), ("b2", "a/b"), ("b3", "..")], key=str)
    reader = ParquetReader(str(tmp_path / "out"))
    read = pa.concat_tables(reader.reader.process(task).to_pyarrow() for task in reader.partitioning.process(None))
    assert sorted(zip(read["text"].to_pylist(), read["language"].to_pylist()), key=str) == sorted(
        zip(table["text"].to_pylist(), table["language"].to_pylist()), key=str)
    recorded = sorted(name for outputs in open_store(str(tmp_path / "ckpt")).snapshot().outputs.values()
                      for candidates in outputs.values() for name, _, _ in candidates[-1])
    assert recorded == sorted(str(file.relative_to(tmp_path / "out")) for file in (tmp_path / "out").glob("*/*"))

    next((tmp_path / "out" / "language=a%2Fb").iterdir()).unlink()
    assert run() == 1
    assert len(list((tmp_path / "out").glob("*/*.parquet"))) == 5
    pq.write_table(pa.table({"text": ["a0", "a1"], "language": ["de", "de"]}), inputs / "a.parquet")
    assert run() == 1
    assert not list((tmp_path / "out" / "language=en").iterdir())
