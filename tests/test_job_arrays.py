"""Job arrays over one checkpoint: shards of a reader, the shard manifest, resubmission.

The end-to-end test starts three shards as separate processes at once, as a
Slurm array would, on one checkpoint, kills one with SIGKILL mid-run, asks
the manifest which shards to submit again and reruns only those. The output
must be an uninterrupted single run's, and no partition may be read by two
shards, nor any writer file written by two processes.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import lmdb
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import SCRIPTS_DIR, output_rows, resume_pipeline, source_id, write_corpus  # noqa: E402

from beam_curator.checkpoint import open_store, shard_manifest  # noqa: E402
from beam_curator.checkpoint.store import METADATA_DIR  # noqa: E402
from beam_curator.cli.main import main  # noqa: E402
from beam_curator.stages.io import JsonlReader, ParquetReader  # noqa: E402
from beam_curator.stages.io.sharding import resolve_shard, shard_of  # noqa: E402
from beam_curator.tasks import EmptyTask, FileGroupTask  # noqa: E402

SHARDS = 3
FILES = 18  # enough that the largest of three shards holds several partitions
DELAY = 0.4  # seconds per partition: long enough to kill a shard between partitions


def partitions_of(reader: JsonlReader | ParquetReader) -> list[str]:
    """Lineage ids of the partitions a reader's source stage lists."""
    source = reader.decompose()[0]
    return [f"0_{task.get_deterministic_id()}" for task in source.process(EmptyTask())]


def shard_ids(input_dir: Path, count: int) -> list[set[str]]:
    """Each shard's partition ids, as ``count`` sharded readers list them."""
    return [set(partitions_of(JsonlReader(str(input_dir), shard=(index, count)))) for index in range(count)]


# Unit tests: which shard a partition falls in.


def test_shards_are_disjoint_and_cover_every_partition(tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", 40)
    every = set(partitions_of(JsonlReader(str(input_dir))))
    for count in (1, 2, 3, 7):
        shards = shard_ids(input_dir, count)
        assert sum(len(shard) for shard in shards) == len(every), f"count {count}: a partition in two shards"
        assert set().union(*shards) == every, f"count {count}: a partition in no shard"
    assert shard_ids(input_dir, 1) == [every]


def test_the_same_shard_on_every_listing_and_whatever_is_listed_beside(tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", 12)
    before = shard_ids(input_dir, 4)
    assert shard_ids(input_dir, 4) == before, "not deterministic"
    for number in range(12, 30):  # new files take shards of their own; old partitions stay where they were
        (input_dir / f"part-{number:03d}.jsonl").write_text('{"id": "x", "n": 1, "text": "t"}\n')
    (input_dir / "part-000.jsonl").unlink()
    after = shard_ids(input_dir, 4)
    gone = source_id([input_dir / "part-000.jsonl"])
    for index in range(4):
        assert before[index] - {gone} <= after[index], f"shard {index} lost partitions to others"


def test_grouped_files_are_sharded_by_group_and_parquet_readers_too(tmp_path: Path) -> None:
    input_dir = write_corpus(tmp_path / "in", 9)
    shards = [JsonlReader(str(input_dir), files_per_partition=2, shard=(index, 2)).decompose()[0].process(EmptyTask())
              for index in (0, 1)]  # which shard a group falls in follows its paths (tmp_path), so check both
    for index, groups in enumerate(shards):
        assert all(shard_of(group.get_deterministic_id(), 2) == index for group in groups)
    every = [group for groups in shards for group in groups]
    assert sorted(len(group.data) for group in every) == [1, 2, 2, 2, 2], "9 files in groups of 2, each in one shard"
    reader = ParquetReader(str(tmp_path), shard=(1, 2))
    assert reader.decompose()[0].shard == (1, 2)


@pytest.mark.parametrize("shard, message", [
    ((3, 3), "0 <= index < count"),
    ((-1, 3), "0 <= index < count"),
    ((0, 0), "count must be at least 1"),
    (("0", 2), "two integers"),
    ("2/2", "0 <= index < count"),
    ("a/b", "is not INDEX/COUNT"),
    ("1", "is not INDEX/COUNT"),
    ([1, 2, 3], "must be (index, count)"),
])
def test_bad_shards_are_refused_naming_the_parameter(tmp_path: Path, shard: object, message: str) -> None:
    with pytest.raises(ValueError, match="shard") as error:
        JsonlReader(str(tmp_path), shard=shard)
    assert message in str(error.value)


def test_slurm_shards_come_from_the_array_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="SLURM_ARRAY_TASK_ID, which is not set"):
        resolve_shard("slurm")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert resolve_shard("slurm") == (2, 4)
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")  # --array=1-4
    assert resolve_shard("slurm") == (1, 4)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "7")  # --array=1-7:2
    monkeypatch.setenv("SLURM_ARRAY_TASK_STEP", "2")
    assert resolve_shard("slurm") == (3, 4)
    # A resubmission of shards 1 and 3 of 4 (--array=1,3): the count is fixed, the task id is the index.
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    assert resolve_shard("slurm/4") == (3, 4)
    with pytest.raises(ValueError, match=r"SLURM_ARRAY_TASK_ID=3; number the array from 0.*not index 3 with count 3"):
        resolve_shard("slurm/3")
    monkeypatch.delenv("SLURM_ARRAY_TASK_COUNT")
    with pytest.raises(ValueError, match="SLURM_ARRAY_TASK_COUNT, which is not set"):
        resolve_shard("slurm")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "x")
    with pytest.raises(ValueError, match="SLURM_ARRAY_TASK_ID='x' is not an integer"):
        JsonlReader("anywhere", shard="slurm/4")


# The manifest.


def test_the_manifest_counts_each_shards_partitions_and_names_the_incomplete(tmp_path: Path, capsys) -> None:
    input_dir = write_corpus(tmp_path / "in", 10)
    checkpoint, count = str(tmp_path / "ckpt"), 3
    shards = shard_ids(input_dir, count)
    done = max(range(count), key=lambda index: len(shards[index]))
    resume_pipeline(str(input_dir), str(tmp_path / "out"), str(tmp_path / "calls"), 0, f"{done}/{count}").run(
        checkpoint, progress=False)
    manifest = shard_manifest(checkpoint, JsonlReader(str(input_dir), shard=(done, count)), count)
    assert [(s.index, s.partitions, s.completed) for s in manifest.shards] == [
        (index, len(shards[index]), len(shards[index]) if index == done else 0) for index in range(count)
    ]
    incomplete = [index for index in range(count) if index != done and shards[index]]
    assert manifest.incomplete == incomplete and not manifest.complete
    listing = [FileGroupTask(data=[str(path)]) for path in sorted(input_dir.glob("*.jsonl"))]
    assert shard_manifest(checkpoint, listing, count) == manifest, "a listing gives what its reader gives"

    command = ["checkpoint", "shards", checkpoint, "--count", str(count), "--input", str(input_dir)]
    assert main(command) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"resubmit: {','.join(map(str, incomplete))}"
    assert out[2 + done].split() == [str(done), str(len(shards[done])), str(len(shards[done])), "0"]
    for index in incomplete:
        resume_pipeline(str(input_dir), str(tmp_path / "out"), str(tmp_path / "calls"), 0, f"{index}/{count}").run(
            checkpoint, progress=False)
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "resubmit: none"


def test_the_manifest_command_refuses_what_it_cannot_answer(tmp_path: Path, capsys) -> None:
    input_dir = write_corpus(tmp_path / "in", 2)
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(SystemExit):
        main(["checkpoint", "shards", str(tmp_path / "ckpt"), "--input", str(input_dir)])
    assert "needs --count" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["checkpoint", "status", str(tmp_path / "ckpt"), "--count", "2"])
    assert "--count: only for checkpoint shards" in capsys.readouterr().err
    assert main(["checkpoint", "shards", str(tmp_path / "ckpt"), "--count", "0", "--input", str(input_dir)]) == 2
    assert "count must be a positive integer" in capsys.readouterr().err
    assert main(["checkpoint", "shards", str(tmp_path / "nowhere"), "--count", "2", "--input", str(input_dir)]) == 2
    assert "does not exist" in capsys.readouterr().err


# Three processes at once on one checkpoint, one of them killed.


def shard_command(tmp_path: Path, index: int, log_name: str) -> list[str]:
    return [
        sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"),
        str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt"),
        "--log", str(tmp_path / log_name), "--delay", str(DELAY), "--shard", f"{index}/{SHARDS}",
    ]


def called_partitions(log: Path) -> list[str]:
    """Source ids of the tasks the slow stage saw (``0_<hex>_0`` -> ``0_<hex>``)."""
    return ["_".join(line.split("_")[:2]) for line in log.read_text().splitlines()] if log.exists() else []


def kill_when_started(process: subprocess.Popen, log: Path, console: Path, sig: signal.Signals) -> None:
    """Stop the shard with ``sig`` once the slow stage has begun its second partition: SIGKILL (its node
    died), or SIGTERM (Slurm's scancel or time limit), which it answers with one line and exit 143."""
    deadline = time.monotonic() + 120
    while len(called_partitions(log)) < 2:
        assert process.poll() is None, f"the shard ended before it could be killed:\n{console.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the shard never started its second partition"
        time.sleep(0.05)
    process.send_signal(sig)
    status = process.wait(timeout=60)
    if sig == signal.SIGTERM:
        assert status == 143, console.read_text()[-3000:]
        assert console.read_text().splitlines()[-1].startswith("stopped by SIGTERM; "), console.read_text()[-3000:]


def writer_marks(metadata: Path) -> dict[int, set[str]]:
    """The partitions each writer file marks complete, by the pid in its name."""
    marks = {}
    for file in sorted(metadata.glob("*.mdb")):
        host, pid = file.stem.rsplit("-", 1)
        assert host == socket.gethostname(), file.name
        env = lmdb.open(str(file), subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            marks[int(pid)] = {key[2:].decode() for key, _ in txn.cursor() if key.startswith(b"d/")}
        env.close()
    return marks


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_shards_started_at_once_share_one_checkpoint_and_only_the_killed_one_is_resubmitted(
    tmp_path: Path, sig: signal.Signals,
) -> None:
    input_dir = write_corpus(tmp_path / "in", FILES)
    shards = shard_ids(input_dir, SHARDS)
    every = set().union(*shards)
    killed = max(range(SHARDS), key=lambda index: len(shards[index]))
    assert len(shards[killed]) >= 4, "a shard to kill mid-run"
    reference = tmp_path / "reference"
    resume_pipeline(str(input_dir), str(reference), str(tmp_path / "reference.log"), 0).run(progress=False)

    processes, consoles = {}, {}
    for index in range(SHARDS):
        consoles[index] = tmp_path / f"shard-{index}.out"
        with consoles[index].open("w") as sink:  # a file, not a pipe nobody reads, which could fill and block
            processes[index] = subprocess.Popen(
                shard_command(tmp_path, index, f"shard-{index}.log"), stdout=sink, stderr=subprocess.STDOUT)
    kill_when_started(processes[killed], tmp_path / f"shard-{killed}.log", consoles[killed], sig)
    for index, process in processes.items():
        if index != killed:
            assert process.wait(timeout=300) == 0, consoles[index].read_text()[-3000:]
            summary = json.loads(consoles[index].read_text().strip().splitlines()[-1])
            assert summary == {"pending": len(shards[index]), "skipped": 0, "completed": len(shards[index])}
    marked = open_store(str(tmp_path / "ckpt")).completed()
    left = shards[killed] - marked
    assert left and marked == every - left, "the killed shard left partitions pending, the others none"

    manifest = subprocess.run(
        [sys.executable, "-m", "beam_curator.cli.main", "checkpoint", "shards", str(tmp_path / "ckpt"),
         "--count", str(SHARDS), "--input", str(input_dir)], capture_output=True, text=True, timeout=120)
    assert manifest.returncode == 1, manifest.stderr[-3000:]
    assert manifest.stdout.splitlines()[-1] == f"resubmit: {killed}"

    rerun = subprocess.Popen(shard_command(tmp_path, killed, "rerun.log"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    skipped = len(shards[killed]) - len(left)
    assert summary == {"pending": len(left), "skipped": skipped, "completed": len(left)}, "its shard's alone"
    assert shard_manifest(str(tmp_path / "ckpt"), JsonlReader(str(input_dir)), SHARDS).complete

    logs = {index: called_partitions(tmp_path / f"shard-{index}.log") for index in range(SHARDS)}
    for index in range(SHARDS):
        assert set(logs[index]) <= shards[index], f"shard {index} read another shard's partitions"
        if index != killed:
            assert sorted(logs[index]) == sorted(shards[index]), f"shard {index}: each of its partitions once"
    assert sorted(called_partitions(tmp_path / "rerun.log")) == sorted(left), "the rerun: only what was left"

    pids = {index: process.pid for index, process in processes.items()}
    marks = writer_marks(tmp_path / "ckpt" / METADATA_DIR)
    assert set(marks) == {*pids.values(), rerun.pid}, "one writer file per process, named by its pid"
    for index, pid in pids.items():
        assert marks[pid] <= shards[index], f"shard {index}'s file holds marks of other shards"
    assert marks[rerun.pid] == left

    assert output_rows(tmp_path / "out") == output_rows(reference)
    visible = sorted(path.name for path in (tmp_path / "out").iterdir() if not path.name.startswith(".tmp-"))
    assert visible == sorted(path.name for path in reference.iterdir())
