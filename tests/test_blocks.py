"""One large input file read in blocks: each block a partition of its own.

The blocks of a file must hold each of its records exactly once, with the
row numbers (the generated ids' half) and the line numbers of bad records it
would have read whole; a run killed mid-file must resume at block
granularity; a changed file must run all its blocks again.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.dedup import GENERATED_ID
from beam_curator.runners import pipeline_options
from beam_curator.stages.io import CuratorInputError, JsonlReader, JsonlReaderStage, JsonlWriter, ParquetReader
from beam_curator.stages.io.reader import FileReader
from beam_curator.stages.lineage import derive_sources, run_stage
from beam_curator.tasks import DocumentBatch, EmptyTask, FileBlock, FileGroupTask
from beam_curator.transforms import CuratorStages
from beam_curator.transforms.progress import read_progress
from beam_curator.workflows import ExactDeduplicationWorkflow

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import data_files, output_rows, scripts_pythonpath  # noqa: E402


def partitions(reader: FileReader) -> list[FileGroupTask]:
    partitioning, _ = reader.decompose()
    return derive_sources(EmptyTask(), partitioning.process(EmptyTask()), partitioning.stage_name).outputs


def read(reader: FileReader) -> tuple[list[FileGroupTask], pa.Table]:
    """The partitions and, concatenated in their order, what they read: as a run would, without Beam."""
    sources = partitions(reader)
    batches: list[DocumentBatch] = run_stage(reader.decompose()[1], sources).outputs
    return sources, pa.concat_tables([batch.to_pyarrow() for batch in batches], promote_options="permissive")


def write_lines(path: Path, count: int, bad: dict[int, bytes] | None = None) -> Path:
    """``count`` JSONL records, line ``n`` (1-based) replaced by ``bad[n]``."""
    lines = [(bad or {}).get(n, json.dumps({"id": n, "text": f"document {n} " + "é" * (n % 7)}).encode())
             for n in range(1, count + 1)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def blocksize_for(path: Path, blocks: int) -> int:
    """The blocksize that splits the file into ``blocks`` blocks."""
    return -(-path.stat().st_size // blocks)


lines = st.lists(
    st.one_of(
        st.text(max_size=12).map(lambda text: json.dumps({"t": text}, ensure_ascii=False).encode()),
        st.sampled_from([b"", b"  ", b"\r"]),  # blank lines, and a CRLF's carriage return alone
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(lines=lines, crlf=st.booleans(), trailing_newline=st.booleans(), blocksize=st.integers(1, 400))
def test_the_blocks_of_a_jsonl_file_hold_its_records_once_in_order_with_its_row_numbers(
    lines: list[bytes], crlf: bool, trailing_newline: bool, blocksize: int,
) -> None:
    content = (b"\r\n" if crlf else b"\n").join(lines) + (b"\n" if trailing_newline and lines else b"")
    stage = JsonlReaderStage(row_column="row")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        path.write_bytes(content)
        whole = stage.read_file(str(path))
        blocks = JsonlReaderStage.split_file(str(path), len(content), blocksize)
        assert blocks == [] or (blocks[0][0], blocks[-1][1]) == (0, len(content))
        records, rows = [], []
        for index, (start, stop) in enumerate(blocks):
            block = FileBlock(index, start, stop)
            part = stage.read_file(str(path), block)
            records += part.table.to_pylist()
            rows += [row + stage.rows_before(str(path), block) for row in part.rows.to_pylist()]
    assert records == whole.table.to_pylist()
    assert rows == whole.rows.to_pylist()


def test_a_big_file_is_split_into_blocks_and_small_ones_are_grouped(tmp_path: Path) -> None:
    big = write_lines(tmp_path / "b.jsonl", 400)
    write_lines(tmp_path / "a.jsonl", 3), write_lines(tmp_path / "c.jsonl", 3)
    found = partitions(JsonlReader(str(tmp_path), blocksize=blocksize_for(big, 5)))
    assert [(Path(task.data[0]).name, len(task.data), task.block is not None) for task in found] == [
        ("a.jsonl", 1, False), *[("b.jsonl", 1, True)] * 5, ("c.jsonl", 1, False),
    ]
    assert len({task.task_id for task in found}) == 7
    sizes = {task.block.stop - task.block.start for task in found if task.block}
    assert max(sizes) - min(sizes) <= 1, "equal blocks, so that the progress bar's estimate holds"
    gzip.open(tmp_path / "z.jsonl.gz", "wb").write(os.urandom(big.stat().st_size))
    assert [task.block for task in partitions(JsonlReader(str(tmp_path / "z.jsonl.gz"), blocksize=100))] == [None], \
        "a compressed file is read whole"


def test_row_numbers_are_the_files_physical_records_however_split_and_whatever_is_skipped(tmp_path: Path) -> None:
    """The (file, row) pairs make the generated ids: the same with and without
    blocks, and for a reader that needs the text as for one that does not
    (line 42, without text, skipped by one, kept by the other)."""
    path = write_lines(tmp_path / "in.jsonl", 300, bad={41: b"", 42: b'{"id": 42}', 200: b"not json"})
    ids_by_row = {}
    for blocksize in (None, path.stat().st_size // 7):
        for fields in (["id", "text"], ["id"]):
            reader = JsonlReader(str(path), blocksize=blocksize, fields=fields, on_bad_record="skip",
                                 file_column="file", row_column="row")
            found, table = read(reader)
            assert (len(found) > 1) == (blocksize is not None)
            assert set(table.column("file").to_pylist()) == {str(path)}
            ids_by_row[blocksize, len(fields)] = dict(zip(table.column("row").to_pylist(),
                                                          table.column("id").to_pylist()))
    expected = {n - 1: n for n in range(1, 301) if n not in (41, 200)}
    assert ids_by_row[None, 1] == ids_by_row[path.stat().st_size // 7, 1] == expected, "row = line - 1"
    expected.pop(41)
    assert ids_by_row[None, 2] == ids_by_row[path.stat().st_size // 7, 2] == expected


def test_a_bad_record_in_a_block_is_named_by_its_line_in_the_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "in.jsonl", 300, bad={250: b'{"id": 250, "text": '})
    reader = JsonlReader(str(path), blocksize=path.stat().st_size // 6)
    with pytest.raises(CuratorInputError, match=r"in\.jsonl, line 250: malformed JSON"):
        read(reader)


def test_parquet_is_split_by_row_groups_with_the_files_row_numbers(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(95)), "text": [None if n == 57 else f"doc {n}" for n in range(95)]})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=10)
    metadata = pq.ParquetFile(path).metadata
    group_bytes = sum(metadata.row_group(0).column(c).total_compressed_size for c in range(2))
    whole = read(ParquetReader(str(path), fields=["id", "text"], on_bad_record="skip", row_column="row"))[1]
    found, blocks = read(ParquetReader(str(path), blocksize=2 * group_bytes, fields=["id", "text"],
                                       on_bad_record="skip", row_column="row"))
    assert [task.block[1:] for task in found] == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert blocks.to_pylist() == whole.to_pylist()
    assert blocks.column("row").to_pylist() == [n for n in range(95) if n != 57]
    with pytest.raises(CuratorInputError, match=r"in\.parquet, row 57: 1 row\(s\) with null in text"):
        read(ParquetReader(str(path), blocksize=2 * group_bytes, fields=["text"]))


def test_the_progress_of_one_big_file_counts_its_blocks(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "in.jsonl", 600)
    folder = str(tmp_path / "progress")
    stages = [JsonlReader(str(path), blocksize=blocksize_for(path, 6)), JsonlWriter(str(tmp_path / "out"))]
    with beam.Pipeline(options=pipeline_options("local")) as p:
        _ = p | CuratorStages(stages, str(tmp_path / "ckpt"), progress_folder=folder)
    snapshot = read_progress(folder)
    assert snapshot.partitions == {"pending": 6, "skipped": 0, "completed": 6}
    reader = snapshot.stage("jsonl_reader")
    assert (reader["tasks"], reader["items_out"]) == (6, 600)


def test_a_changed_file_runs_all_its_blocks_again(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "big.jsonl", 200)

    def run() -> object:
        return Pipeline("blocks", stages=[
            JsonlReader(str(path), blocksize=4000), JsonlWriter(str(tmp_path / "out")),
        ]).run(checkpoint_path=str(tmp_path / "ckpt"), progress=False)
    first = run()
    assert first.partitions_pending > 1
    assert run().partitions_skipped == first.partitions_pending, "unchanged: every block is skipped"
    write_lines(path, 200, bad={5: json.dumps({"id": 5, "text": "new text"}).encode()})
    os.utime(path, (time.time() + 5, time.time() + 5))
    changed = run()
    assert changed.partitions_skipped == 0 and changed.partitions_pending == first.partitions_pending
    assert {"id": 5, "text": "new text"} in output_rows(tmp_path / "out")


KILLABLE_WORKERS = 2  # the local runner's threads: each may hold a block between its output and its mark
KILLABLE_RUN = """
import json, sys
from beam_curator import Pipeline
from beam_curator.stages.io import JsonlReader, JsonlWriter
from curator_helpers import SlowLog
source, output, checkpoint, log, blocksize, delay, workers = sys.argv[1:]
summary = Pipeline("blocks", stages=[
    JsonlReader(source, blocksize=int(blocksize)), SlowLog(log, float(delay)), JsonlWriter(output),
]).run(checkpoint_path=checkpoint, progress=False, num_workers=int(workers))
print(json.dumps({"pending": summary.partitions_pending, "skipped": summary.partitions_skipped}))
"""


@pytest.mark.slow
def test_a_run_killed_mid_file_resumes_at_the_first_unfinished_block(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "big.jsonl", 1000)
    blocksize = blocksize_for(path, 10)
    environment = {**os.environ, "PYTHONPATH": scripts_pythonpath()}

    def command(output: str, log: str, delay: float) -> list[str]:
        return [sys.executable, "-c", KILLABLE_RUN, str(path), str(tmp_path / output), str(tmp_path / f"{output}.ckpt"),
                str(tmp_path / log), str(blocksize), str(delay), str(KILLABLE_WORKERS)]

    reference = subprocess.run(command("reference", "reference.log", 0), env=environment, capture_output=True,
                               text=True, timeout=120)
    assert reference.returncode == 0, reference.stderr[-3000:]
    with (tmp_path / "first.out").open("w") as sink:
        first = subprocess.Popen(command("out", "first.log", 0.5), env=environment, stdout=sink,
                                 stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        # A block's output is written before it is marked, and each thread may be between the two: once
        # 3 + KILLABLE_WORKERS outputs are out, at least three blocks are marked.
        while len(data_files(tmp_path / "out")) < 3 + KILLABLE_WORKERS:
            assert first.poll() is None, (tmp_path / "first.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "no output appeared"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    marked = open_store(str(tmp_path / "out.ckpt")).completed()
    assert 3 <= len(marked) < 10, f"{len(marked)} of 10 blocks marked"

    second = subprocess.run(command("out", "second.log", 0), env=environment, capture_output=True, text=True,
                            timeout=120)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"pending": 10 - len(marked), "skipped": len(marked)}
    assert len((tmp_path / "second.log").read_text().splitlines()) == 10 - len(marked), "only the unfinished blocks"
    assert output_rows(tmp_path / "out") == output_rows(tmp_path / "reference")
    assert len(output_rows(tmp_path / "out")) == 1000
    assert [p.name for p in data_files(tmp_path / "out")] == [p.name for p in data_files(tmp_path / "reference")]


def test_exact_dedup_removes_the_same_documents_when_removal_reads_blocks(tmp_path: Path) -> None:
    """Hashing and removal read blocks, with different fields: generated ids
    must agree across the two, past a blank line and a record without text
    (skipped by hashing, read by removal)."""
    texts = [f"text {n % 40}" for n in range(120)]  # the last 80 are copies
    (tmp_path / "input").mkdir()
    path = tmp_path / "input" / "big.jsonl"
    lines = [json.dumps({"id": n, "text": text}).encode() for n, text in enumerate(texts)]
    lines[10:10] = [b"", b'{"id": -1}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    kept = {}
    for blocksize in (None, blocksize_for(path, 4)):
        name = f"out-{blocksize}"
        ExactDeduplicationWorkflow(str(tmp_path / name), str(tmp_path / "input"), input_filetype="jsonl",
                                   input_blocksize=blocksize, perform_removal=True, on_bad_record="skip",
                                   verbose=False).run()
        kept[blocksize] = sorted(output_rows(tmp_path / name / "deduplicated"), key=lambda row: row["id"])
    # Removal reads every field: the record without text, never hashed, is kept.
    first_copies = [{"id": -1, "text": None}, *({"id": n, "text": f"text {n}"} for n in range(40))]
    assert kept[None] == kept[blocksize_for(path, 4)] == first_copies


@pytest.mark.parametrize("workflow", ["exact", "fuzzy"])
def test_the_first_phase_of_a_dedup_reads_a_big_file_in_blocks_and_finds_the_same_copies(
    tmp_path: Path, workflow: str,
) -> None:
    """With ``input_blocksize`` below a file's size, hashing (exact) and minhashing (fuzzy) take one partition per
    block, so a killed run keeps its finished blocks; the duplicate ids are a whole-file run's, and a rerun with
    another blocksize on the same folders gives them again."""
    from beam_curator.workflows import FuzzyDeduplicationWorkflow

    (tmp_path / "input").mkdir()
    path = tmp_path / "input" / "big.jsonl"
    texts = [f"document {n % 60} " * 8 + ("" if n < 60 else "!") for n in range(180)]  # copies and near copies
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    first_phase, ids = {"exact": ("exact/hashes", "ExactDuplicateIds"),
                        "fuzzy": ("MinHashStage", "FuzzyDuplicateIds")}[workflow]

    def run(output: str, blocksize: int | None) -> tuple[list, int]:
        folder = tmp_path / output
        settings = dict(input_filetype="jsonl", input_blocksize=blocksize, perform_removal=False, verbose=False)
        if workflow == "exact":
            ExactDeduplicationWorkflow(str(folder), str(tmp_path / "input"), **settings).run()
        else:
            FuzzyDeduplicationWorkflow(cache_path=str(folder), output_path=str(folder), input_path=str(tmp_path / "input"),
                                       char_ngrams=20, **settings).run()
        duplicates = sorted(pq.read_table(folder / ids).column(GENERATED_ID).to_pylist())
        return duplicates, len(list((folder / first_phase).glob("*.parquet")))

    whole, whole_files = run("whole", None)
    blocked, blocked_files = run("blocked", blocksize_for(path, 5))
    again, again_files = run("blocked", blocksize_for(path, 3))
    assert (whole_files, blocked_files, again_files) == (1, 5, 3)
    assert whole == blocked == again
    assert len(whole) >= 60


def test_semantic_dedup_embeds_a_big_file_in_blocks_and_removes_the_same_documents(tmp_path: Path) -> None:
    """Embedding reads one block per partition; as many documents are removed as in a whole-file run, and the kept
    texts are the same, also when the same cache is rerun with another blocksize. (Which of a text's identical
    copies is kept may differ: a batch of other texts moves an embedding in its last bits, enough to reorder
    copies whose distance to the centroid is otherwise equal.)"""
    from semdedup_helpers import duplicate_ids, kept_rows

    from beam_curator.workflows import TextSemanticDeduplicationWorkflow

    (tmp_path / "input").mkdir()
    path = tmp_path / "input" / "big.jsonl"
    topics = ["bread baking", "sea stars", "rust crates", "jazz chords", "glacier retreat", "beekeeping"]
    path.write_text("".join(json.dumps({"text": f"A note about {topics[n % 6]} number {n % 18}."}) + "\n"
                            for n in range(72)))  # each text three times

    def run(name: str, blocksize: int | None) -> tuple[list, list]:
        TextSemanticDeduplicationWorkflow(
            str(path.parent), str(tmp_path / name / "out"), str(tmp_path / name / "cache"),
            embedding_backend="sentence-transformers", n_clusters=3, eps=0.01, runner="local",
            input_filetype="jsonl", output_filetype="jsonl", input_blocksize=blocksize, verbose=False,
        ).run()
        rows = kept_rows(tmp_path / name / "out")
        return len(duplicate_ids(tmp_path / name / "out")), sorted(row["text"] for row in rows)

    whole = run("whole", None)
    assert whole[0] >= 48 and len(whole[1]) == 72 - whole[0] == len(set(whole[1]))
    assert run("blocked", blocksize_for(path, 4)) == whole == run("blocked", blocksize_for(path, 3))
