"""The checkpoint stores on real files: one LMDB file per writing process,
unioned at start-up; the fsspec store keeps the same semantics on ``memory://``.

Other writers are real processes (``python -c``), so file names, pids and
``flock`` behave as they do between Beam workers.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import uuid
from fractions import Fraction
from pathlib import Path

import fsspec
import pytest

import beam_curator.checkpoint
from beam_curator.checkpoint import METADATA_DIR, CheckpointBusyError, open_store
from beam_curator.checkpoint.fsspec_store import FsspecCheckpointStore
from beam_curator.checkpoint.lmdb_store import LmdbCheckpointStore

# Records the (task id, {source: "num/den"}) pairs given as JSON, prints its
# pid, then sleeps for the optional number of seconds (a live writer).
WRITER = """
import json, os, sys, time
from fractions import Fraction
from beam_curator.checkpoint import open_store
store = open_store(sys.argv[1])
for task_id, credits in json.loads(sys.argv[2]):
    store.record(task_id, {source: Fraction(share) for source, share in credits.items()})
print(os.getpid(), flush=True)
time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0)
"""
HALF, THIRD = Fraction(1, 2), Fraction(1, 3)


def start_writer(path: Path, records: list[tuple[str, dict[str, str]]], linger: float = 0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), json.dumps(records), str(linger)],
        stdout=subprocess.PIPE, text=True,
    )


def writer_pid(process: subprocess.Popen) -> int:
    """Waits until the writer has recorded everything and reports its pid."""
    line = process.stdout.readline()
    assert line, f"writer process failed (exit code {process.poll()})"
    return int(line)


def mdb_name(pid: int) -> str:
    return f"{socket.gethostname()}-{pid}.mdb"


def test_layout_is_one_file_per_process_named_by_host_and_pid(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "ckpt"))
    assert isinstance(store, LmdbCheckpointStore)
    assert store.record("0_a_0", {"0_a": Fraction(1)}) == ["0_a"]
    metadata = tmp_path / "ckpt" / METADATA_DIR
    assert sorted(p.name for p in metadata.iterdir()) == [mdb_name(os.getpid()), mdb_name(os.getpid()) + ".lock"]
    assert store.writer_files() == [str(metadata / mdb_name(os.getpid()))]
    assert store.completed() == {"0_a"}


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_run_after_its_folder_was_deleted_records_as_a_new_process_would(where: str, tmp_path: Path) -> None:
    """The folder deleted between two runs of this process: the second run's marks are on disk and counted,
    although the first run's writer was still open and remembered the same partition as complete."""
    path = str(tmp_path / "ckpt") if where == "local" else f"memory://ckpt-{uuid.uuid4().hex}"
    first = open_store(path)
    first.open_writer()
    assert first.record("0_a_0", {"0_a": Fraction(1)}) == ["0_a"]
    first.flush()
    fs, folder = fsspec.core.url_to_fs(path)
    fs.rm(folder, recursive=True)

    second = open_store(path)
    second.open_writer()  # as every run does before reading the checkpoint
    assert second.completed() == set()
    assert second.record("0_a_0", {"0_a": Fraction(1)}) == ["0_a"]
    second.flush()
    assert open_store(path).completed() == {"0_a"}


def test_a_retried_terminal_task_cannot_complete_a_partition_early(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    assert store.record("0_a_0", {"0_a": HALF}) == []
    assert store.record("0_a_0", {"0_a": HALF}) == []
    assert store.completed() == set()
    assert store.record("0_a_1", {"0_a": HALF}) == ["0_a"]
    assert store.record("0_a_1", {"0_a": HALF}) == [], "a complete partition is reported once"
    assert store.completed() == {"0_a"}


def test_union_across_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    first = start_writer(path, [("0_a_0", {"0_a": "1/2"}), ("0_b_0", {"0_b": "1"}), ("0_c_0", {"0_c": "1/3"})])
    second = start_writer(path, [("0_a_1", {"0_a": "1/2"}), ("0_c_0", {"0_c": "1/3"}), ("0_d_0", {"0_d": "1/2"})])
    pids = [writer_pid(first), writer_pid(second)]
    assert [first.wait(), second.wait()] == [0, 0]
    store = open_store(str(path))
    assert store.record("0_c_1", {"0_c": THIRD}) == []
    metadata = path / METADATA_DIR
    assert store.writer_files() == sorted(str(metadata / mdb_name(pid)) for pid in [*pids, os.getpid()])
    # 0_a is split over the two processes; 0_c_0 was reported by both (a retry).
    assert store.completed() == {"0_a", "0_b"}
    # No single file completes 0_a: only the union does.
    for index, file in enumerate(store.writer_files()):
        alone = tmp_path / f"alone-{index}" / METADATA_DIR
        alone.mkdir(parents=True)
        shutil.copy(file, alone)
        assert "0_a" not in open_store(str(alone.parent)).completed()
    # This process saw only 0_c_1 and 0_c_2; the union finds 0_c_0 elsewhere.
    assert store.record("0_c_2", {"0_c": THIRD}) == []
    assert store.completed() == {"0_a", "0_b", "0_c"}
    # The other writers are gone, so their locks no longer block a reset.
    store.reset()
    assert not metadata.exists()


def test_an_unreadable_file_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    store = open_store(str(tmp_path))
    store.record("0_a_0", {"0_a": HALF})
    store.record("0_a_1", {"0_a": HALF})
    store.record("0_b_0", {"0_b": HALF})
    corrupt = tmp_path / METADATA_DIR / "x.mdb"
    corrupt.write_bytes(os.urandom(16384))
    with caplog.at_level(logging.WARNING, logger="beam_curator.checkpoint"):
        assert store.completed() == {"0_a"}
    assert any(str(corrupt) in record.getMessage() for record in caplog.records), caplog.text
    status = store.status()
    assert status.unreadable_files == [str(corrupt)]
    assert str(corrupt) in status.writer_files and status.completed == 1


def test_status_reports_what_is_on_disk(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    empty = store.status()
    assert (empty.path, empty.completed, empty.writer_files, empty.unreadable_files, empty.live_writers) == (
        str(tmp_path), 0, [], [], [],
    )
    store.record("0_a_0", {"0_a": Fraction(1)})
    store.record("0_b_0", {"0_b": Fraction(1)})
    store.record("0_c_0", {"0_c": HALF})
    status = store.status()
    own = str(tmp_path / METADATA_DIR / mdb_name(os.getpid()))
    assert (status.completed, status.writer_files, status.unreadable_files) == (2, [own], [])
    assert status.live_writers == [own], "this process still holds its writer open"


def test_reset_removes_everything_and_recording_starts_afresh(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.record("0_a_0", {"0_a": Fraction(1)})
    store.record("0_b_0", {"0_b": HALF})
    store.reset()
    assert not (tmp_path / METADATA_DIR).exists()
    assert store.completed() == set() and store.status().writer_files == []
    assert store.record("0_b_1", {"0_b": HALF}) == [], "the credit recorded before the reset is forgotten"
    assert store.completed() == set()


def test_reset_refuses_while_another_process_writes_unless_forced(tmp_path: Path) -> None:
    writer = start_writer(tmp_path, [("0_a_0", {"0_a": "1"})], linger=120)
    try:
        live_file = str(tmp_path / METADATA_DIR / mdb_name(writer_pid(writer)))
        store = open_store(str(tmp_path))
        assert store.status().live_writers == [live_file]
        with pytest.raises(CheckpointBusyError) as error:
            store.reset()
        assert live_file in str(error.value) and "force" in str(error.value)
        assert store.completed() == {"0_a"}, "a refused reset must not delete anything"
        store.reset(force=True)
        assert not (tmp_path / METADATA_DIR).exists()
        assert writer.poll() is None, "the forced reset happened while the writer was alive"
    finally:
        writer.kill()
        writer.wait()


def test_check_writable_names_the_folder_it_cannot_create(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    store = open_store(str(tmp_path / "afile" / "sub"))
    with pytest.raises(PermissionError, match="afile/sub/.beam_curator_metadata is not writable"):
        store.check_writable()


@pytest.fixture
def memory_path() -> str:
    path = f"memory://checkpoints-{uuid.uuid4().hex}"
    yield path
    fs = fsspec.filesystem("memory")
    if fs.exists(path):
        fs.rm(path, recursive=True)


def test_fsspec_store_unions_writers_like_lmdb(memory_path: str, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(memory_path)
    assert isinstance(store, FsspecCheckpointStore)
    store.check_writable()
    # Another process's writer folder: written through a second store, then
    # moved under this checkpoint as a finished writer would have left it.
    other = FsspecCheckpointStore(f"{memory_path}-other")
    other.record("0_a_0", {"0_a": HALF})
    other.record("0_b_0", {"0_b": Fraction(1)})
    other.record("0_c_0", {"0_c": THIRD})
    other.flush()  # as at the end of a bundle
    fs = fsspec.filesystem("memory")
    [other_folder] = fs.ls(f"{memory_path}-other/{METADATA_DIR}", detail=False)
    fs.mv(other_folder, f"{memory_path}/{METADATA_DIR}/otherhost-1", recursive=True)

    assert store.record("0_a_1", {"0_a": HALF}) == [], "this writer alone saw half of 0_a"
    store.record("0_c_0", {"0_c": THIRD})  # a retry of a task the other writer reported
    assert store.completed() == {"0_a", "0_b"}
    store.record("0_c_1", {"0_c": THIRD})
    assert store.completed() == {"0_a", "0_b"}
    store.record("0_c_2", {"0_c": THIRD})
    assert store.completed() == {"0_a", "0_b", "0_c"}

    corrupt = f"{memory_path}/{METADATA_DIR}/otherhost-2/000000000000.json"
    with fs.open(corrupt, "w") as handle:
        handle.write("{not json")
    with caplog.at_level(logging.WARNING, logger="beam_curator.checkpoint"):
        status = store.status()
    assert status.completed == 3 and len(status.unreadable_files) == 1
    assert status.unreadable_files[0].endswith("otherhost-2/000000000000.json")
    assert "otherhost-2/000000000000.json" in caplog.text
    assert set(status.writer_files) == {"otherhost-1", "otherhost-2", f"{socket.gethostname()}-{os.getpid()}"}

    store.reset()
    assert store.completed() == set() and not fs.exists(f"{memory_path}/{METADATA_DIR}")
    assert store.record("0_d_0", {"0_d": Fraction(1)}) == ["0_d"], "a reset store accepts new marks"
    assert store.completed() == {"0_d"}


def pid_namespaces_work() -> bool:
    try:
        return subprocess.run(["unshare", "-p", "-f", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not pid_namespaces_work(), reason="needs unshare(1) and the right to create pid namespaces")
def test_fsspec_writer_that_reuses_a_pid_keeps_the_earlier_marks(tmp_path: Path) -> None:
    """Containers restart processes under the same host name and pid; a new
    writer must add to what the dead one left, not overwrite it."""
    # Object stores need no folders; on a local path the writer's must exist.
    (tmp_path / METADATA_DIR / f"{socket.gethostname()}-1").mkdir(parents=True)
    code = (
        "import sys; from fractions import Fraction as F; "
        "from beam_curator.checkpoint.fsspec_store import FsspecCheckpointStore as S; "
        "S(sys.argv[1]).record(sys.argv[2], {sys.argv[3]: F(sys.argv[4])})"
    )
    for record in (["0_a_0", "0_a", "1"], ["0_b_0", "0_b", "1/2"]):
        # Each run is pid 1 of a fresh pid namespace, as in a restarted container.
        subprocess.run(["unshare", "-p", "-f", sys.executable, "-c", code, str(tmp_path), *record], check=True)
    assert FsspecCheckpointStore(str(tmp_path)).completed() == {"0_a"}


def imported_modules(module: str) -> set[str]:
    """Every module that ``beam_curator.checkpoint.<module>`` imports, at any
    depth of its code (``from package import name`` counts ``package.name``)."""
    package = beam_curator.checkpoint.__name__
    source = Path(beam_curator.checkpoint.__file__).with_name(f"{module}.py").read_text()
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            origin = ".".join(part for part in (base, node.module) if part)
            found |= {origin} | {f"{origin}.{alias.name}" for alias in node.names}
    return found


def test_store_interface_and_concrete_stores_import_no_circle() -> None:
    """The interface knows no concrete store and the concrete stores do not
    know the module that chooses between them (issue 30: a circle before)."""
    concrete = {"beam_curator.checkpoint.lmdb_store", "beam_curator.checkpoint.fsspec_store"}
    opening = "beam_curator.checkpoint.opening"
    assert not imported_modules("store") & (concrete | {opening})
    for store in ("lmdb_store", "fsspec_store"):
        assert "beam_curator.checkpoint.store" in imported_modules(store)
        assert opening not in imported_modules(store)
    assert concrete <= imported_modules("opening")
