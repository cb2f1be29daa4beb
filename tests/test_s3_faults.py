"""Faults on a real S3 endpoint (S3Proxy): a run killed mid-write, the store
going away mid-run or answering server errors, and objects added or removed
between two runs of one Python process. Each time the run that follows must end with exactly the
output of a fresh run, nothing lost, nothing twice, nothing half-written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from beam_curator.errors import ObjectStoreFailedError, ObjectStoreUnreachableError
from beam_curator.stages import ProcessingStage
from beam_curator.tasks import DocumentBatch

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import SCRIPTS_DIR, canonical, output_rows, resume_pipeline, write_corpus  # noqa: E402

pytest.importorskip("s3fs", reason="the s3 extra is not installed")

BEAM_CURATOR = Path(sys.executable).parent / "beam-curator"
# botocore's default retries take ~10 s per call against a dead endpoint; two attempts keep the outage tests short.
QUICK_GIVE_UP = {"AWS_MAX_ATTEMPTS": "2", "AWS_RETRY_MODE": "standard"}


@pytest.fixture
def s3_env(s3_server, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The endpoint and credentials in this process's environment (as a user's shell would have them), and
    fresh s3fs clients before and after, so that no cached client keeps another test's settings."""
    import s3fs

    environment = {**s3_server.environment(), **QUICK_GIVE_UP}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FSSPEC_S3", raising=False)  # an endpoint there would win over the environment's
    s3fs.S3FileSystem.clear_instance_cache()
    yield {**os.environ, **environment}
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def failing_front(s3_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[object]:
    """A ``FailingFront`` before the S3 server, as the endpoint of this process's environment; it answers server
    errors once ``failing_front.switch`` exists."""
    import s3fs
    from s3_server import FailingFront

    front = FailingFront(s3_server, tmp_path / "store-fails")
    for name, value in {**front.environment(s3_server), **QUICK_GIVE_UP}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FSSPEC_S3", raising=False)  # an endpoint there would bypass the front
    s3fs.S3FileSystem.clear_instance_cache()
    yield front
    s3fs.S3FileSystem.clear_instance_cache()
    front.close()


def upload(s3_server, folder: Path, url: str) -> None:
    s3_server.filesystem().put(f"{folder}/", url.removeprefix("s3://") + "/", recursive=True)


def uploaded_corpus(s3_server, bucket: str, tmp_path: Path, files: int) -> Path:
    """``write_corpus``'s files, locally (for the reference run) and in ``<bucket>/in``."""
    corpus = write_corpus(tmp_path / "in", files)
    upload(s3_server, corpus, f"{bucket}/in")
    return corpus


def wait_until(condition: Callable[[], bool], process: subprocess.Popen, log: Path, what: str) -> None:
    """Poll ``condition`` while ``process`` runs; fail with its log if it ends first."""
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, f"the run ended before {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within 120 s"
        time.sleep(0.02)


def objects(s3_server, url: str) -> list[str]:
    """Every object below ``url`` (a fresh listing), hidden ones included."""
    try:
        return sorted(s3_server.filesystem().find(url.removeprefix("s3://")))
    except FileNotFoundError:
        return []


def s3_rows(s3_server, url: str, ending: str = ".jsonl") -> list[dict]:
    fs = s3_server.filesystem()
    files = [name for name in objects(s3_server, url) if name.endswith(ending)]
    return canonical([json.loads(line) for name in files for line in fs.cat(name).decode().splitlines()])


def local_reference(tmp_path: Path, corpus: Path) -> list[dict]:
    """What a fresh, uninterrupted run on local files writes."""
    resume_pipeline(str(corpus), str(tmp_path / "reference"), str(tmp_path / "reference.log"), 0).run(
        progress=False)
    return output_rows(tmp_path / "reference")


def the_one_error_line(run: subprocess.CompletedProcess | subprocess.Popen, stderr: str) -> str:
    """The command's only ``error:`` line, once it exited with 2 and printed no traceback."""
    assert run.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    return errors[0]


def assert_the_exact_rerun_gives_a_fresh_runs_output(command: list[str], env: dict, s3_server, bucket: str,
                                                     tmp_path: Path) -> None:
    """``command`` (``beam-curator exact`` of the sample corpus into ``<bucket>/out``) run again completes, and
    keeps what a fresh run on the local files keeps, each text once."""
    from beam_curator.data import sample_corpus_path

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    fresh = subprocess.run([str(BEAM_CURATOR), "exact", "--input", str(sample_corpus_path()),
                            "--output", str(tmp_path / "fresh")], capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    kept = sorted(row["text"] for row in s3_rows(s3_server, f"{bucket}/out/deduplicated"))
    assert kept == sorted(row["text"] for row in output_rows(tmp_path / "fresh" / "deduplicated"))
    assert len(kept) == len(set(kept))


def test_a_write_killed_mid_upload_leaves_no_object(s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path) -> None:
    """A process SIGKILLed after two parts of a multipart upload went out leaves no object under the
    final name, nor any temporary one; a write that raises midway aborts its upload the same way."""
    script = textwrap.dedent(f"""
        import os, signal
        from beam_curator.writing import write_atomically

        def write(handle):
            for _ in range(12):
                handle.write(os.urandom(1 << 20))
            os.kill(os.getpid(), signal.SIGKILL)   # the machine went away, mid-upload

        write_atomically("{s3_bucket}/killed/part.bin", write)
    """)
    small_parts = {**s3_env, "FSSPEC_S3": json.dumps({"default_block_size": 5 << 20})}
    killed = subprocess.run([sys.executable, "-c", script], env=small_parts, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert objects(s3_server, f"{s3_bucket}/killed") == []
    uploads = s3_server.filesystem().call_s3("list_multipart_uploads", Bucket=s3_bucket.removeprefix("s3://"))
    assert uploads.get("Uploads"), "the kill was meant to land mid multipart upload"

    from beam_curator.writing import write_atomically

    def fail_midway(handle) -> None:
        handle.write(b"x" * 1000)
        raise ValueError("the serializer failed")

    with pytest.raises(ValueError, match="serializer"):
        write_atomically(f"{s3_bucket}/failed/part.bin", fail_midway)
    assert objects(s3_server, f"{s3_bucket}/failed") == []
    assert write_atomically(f"{s3_bucket}/failed/part.bin", lambda handle: handle.write(b"whole")) == 5
    assert objects(s3_server, f"{s3_bucket}/failed") == [f"{s3_bucket.removeprefix('s3://')}/failed/part.bin"]


def test_a_run_killed_while_writing_to_s3_resumes_to_a_fresh_runs_output(
    s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path,
) -> None:
    corpus = uploaded_corpus(s3_server, s3_bucket, tmp_path, 8)
    out, ckpt = f"{s3_bucket}/out", f"{s3_bucket}/ckpt"
    command = [sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"), f"{s3_bucket}/in", out, ckpt,
               "--log", str(tmp_path / "calls.log"), "--delay", "0.3"]
    with (tmp_path / "first.out").open("w") as console:
        # The partitions after the first two wait to be killed: the run cannot end before the kill.
        first = subprocess.Popen([*command, "--hold-after", "2"], env=s3_env, stdout=console, stderr=subprocess.STDOUT)
        wait_until(lambda: len([name for name in objects(s3_server, out) if name.endswith(".jsonl")]) >= 2,
                   first, tmp_path / "first.out", "two outputs were written")
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL, "the run ended before it was killed"
    written_before = len(objects(s3_server, out))

    rerun = subprocess.run(command, env=s3_env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    # Marks are flushed every second: a kill may come after outputs were written but before they were marked.
    assert summary["completed"] == summary["pending"] == 8 - summary["skipped"]
    assert s3_rows(s3_server, out) == local_reference(tmp_path, corpus)
    names = [name.rsplit("/", 1)[-1] for name in objects(s3_server, out)]
    assert not [name for name in names if name.startswith(".")], f"temporary objects left: {names}"
    assert len(names) >= written_before


class StrikeOnce(ProcessingStage):
    """Strikes the store (``strike``) when the partition of ``at_file`` first comes by: a fault midway.
    ``done_marker`` (a local file) remembers it, so that the same pipeline reruns undisturbed."""

    def __init__(self, at_file: str, done_marker: str) -> None:
        self.at_file = at_file
        self.done_marker = done_marker

    def strike(self) -> None:
        raise NotImplementedError

    def process(self, task: DocumentBatch) -> DocumentBatch:
        sources = task._metadata.get("source_files", [])
        if not os.path.exists(self.done_marker) and any(path.endswith(self.at_file) for path in sources):
            Path(self.done_marker).touch()
            self.strike()
        return task


class KillTheStore(StrikeOnce):
    """Kills the S3 server (its process group): an outage."""

    name = "kill_the_store"

    def __init__(self, server_pid: int, at_file: str, done_marker: str) -> None:
        super().__init__(at_file, done_marker)
        self.server_pid = server_pid

    def strike(self) -> None:
        os.killpg(self.server_pid, signal.SIGKILL)
        time.sleep(0.5)


class FailTheStore(StrikeOnce):
    """Makes ``switch`` exist: from then on the store answers every request with a server error (a
    ``FailingFront`` before it)."""

    name = "fail_the_store"

    def __init__(self, switch: str, at_file: str, done_marker: str) -> None:
        super().__init__(at_file, done_marker)
        self.switch = switch

    def strike(self) -> None:
        Path(self.switch).touch()


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_server_errors_mid_run_raise_one_clear_error_and_the_rerun_completes(
    s3_server, s3_bucket: str, failing_front, tmp_path: Path,
) -> None:
    corpus = uploaded_corpus(s3_server, s3_bucket, tmp_path, 6)
    out, ckpt = f"{s3_bucket}/out", f"{s3_bucket}/ckpt"
    pipeline = resume_pipeline(f"{s3_bucket}/in", out, str(tmp_path / "calls.log"), 0)
    pipeline.stages.insert(1, FailTheStore(str(failing_front.switch), "part-003.jsonl", str(tmp_path / "failed")))
    with pytest.raises(ObjectStoreFailedError) as raised:
        pipeline.run(checkpoint_path=ckpt, progress=False)
    assert failing_front.requests_failed > 0
    message = str(raised.value)
    assert message.startswith("the object store failed: it answered "), message
    assert "(InternalError: We encountered an internal error. Please try again.) on all 2 attempts" in message
    assert "\n" not in message and "rerun the same command" in message

    failing_front.switch.unlink()
    summary = pipeline.run(checkpoint_path=ckpt, progress=False)
    assert summary.complete
    assert s3_rows(s3_server, out) == local_reference(tmp_path, corpus)


def test_the_cli_says_in_one_line_that_the_store_fails_before_any_work_and_its_rerun_completes(
    s3_server, s3_bucket: str, failing_front, tmp_path: Path,
) -> None:
    """A store answering server errors from the start: the input check, the driver's first request, fails in one
    line (not botocore's traceback) and nothing is written; once the store answers, the same command gives a
    fresh local run's output."""
    from beam_curator.data import sample_corpus_path

    upload(s3_server, Path(sample_corpus_path()), f"{s3_bucket}/in")
    command = [str(BEAM_CURATOR), "exact", "--input", f"{s3_bucket}/in", "--output", f"{s3_bucket}/out"]
    failing_front.switch.touch()
    first = subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    error = the_one_error_line(first, first.stderr)
    assert error.startswith("error: the object store failed: it answered "), error
    assert "server error (InternalError: " in error, error
    assert objects(s3_server, f"{s3_bucket}/out") == []

    failing_front.switch.unlink()
    assert_the_exact_rerun_gives_a_fresh_runs_output(command, dict(os.environ), s3_server, s3_bucket, tmp_path)


def test_an_upload_the_outage_cut_short_is_no_object_once_the_store_is_back(s3_server, s3_bucket: str) -> None:
    """The test server behaves as S3 across ``kill``: S3Proxy killed mid-upload leaves its temporary file
    (KEY-UUID), which once restarted it failed to list, answering every listing of the folder with a 500 (CI,
    12-06: the rerun of the outage test below); ``start`` drops it."""
    s3_server.filesystem().pipe(f"{s3_bucket}/out/part-1.jsonl", b"{}\n")
    s3_server.kill()
    try:
        (s3_server.root / "data" / s3_bucket[5:] / "out" / f"part-2.jsonl-{uuid.uuid4()}").write_bytes(b"{\"id\"")
    finally:
        s3_server.start()
    assert s3_server.filesystem().ls(f"{s3_bucket}/out") == [f"{s3_bucket[5:]}/out/part-1.jsonl"]


# A thread that dies (the progress watcher polling the dead store) would print its own traceback.
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_outage_mid_run_raises_one_clear_error_and_the_rerun_completes(
    s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path,
) -> None:
    corpus = uploaded_corpus(s3_server, s3_bucket, tmp_path, 6)
    out, ckpt = f"{s3_bucket}/out", f"{s3_bucket}/ckpt"
    pipeline = resume_pipeline(f"{s3_bucket}/in", out, str(tmp_path / "calls.log"), 0)
    pipeline.stages.insert(1, KillTheStore(s3_server.service.pid, "part-003.jsonl", str(tmp_path / "killed")))
    try:
        with pytest.raises(ObjectStoreUnreachableError) as raised:
            pipeline.run(checkpoint_path=ckpt, progress=False)
    finally:
        s3_server.kill()
        s3_server.start()
    message = str(raised.value)
    assert message.startswith(f"cannot reach the object store at {s3_server.endpoint} (for /{s3_bucket[5:]}")
    assert "\n" not in message and "rerun" in message

    summary = pipeline.run(checkpoint_path=ckpt, progress=False)
    assert summary.complete
    assert s3_rows(s3_server, out) == local_reference(tmp_path, corpus)


def test_the_cli_says_in_one_line_that_the_store_went_away_and_its_rerun_completes(
    s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path,
) -> None:
    from beam_curator.data import sample_corpus_path

    upload(s3_server, Path(sample_corpus_path()), f"{s3_bucket}/in")
    command = [str(BEAM_CURATOR), "exact", "--input", f"{s3_bucket}/in", "--output", f"{s3_bucket}/out"]
    stored = s3_server.root / "data" / s3_bucket.removeprefix("s3://") / "out"  # S3Proxy keeps objects as files
    with (tmp_path / "first.err").open("w") as errors:
        first = subprocess.Popen(command, env=s3_env, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            wait_until(lambda: any(stored.glob("exact/hashes/*.parquet")), first, tmp_path / "first.err",
                       "hashes were written")
            s3_server.kill()
            first.wait(timeout=240)
        finally:
            s3_server.kill()
            s3_server.start()
    stderr = (tmp_path / "first.err").read_text()
    error = the_one_error_line(first, stderr)
    assert error.startswith(f"error: cannot reach the object store at {s3_server.endpoint} (for /"), error

    assert_the_exact_rerun_gives_a_fresh_runs_output(command, s3_env, s3_server, s3_bucket, tmp_path)


def test_a_workflow_whose_store_is_down_raises_the_named_error_from_the_driver(
    s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path,
) -> None:
    """The driver's own S3 calls (here the bucket check before any work) fail as ``Pipeline.run``'s stages do:
    one ``ObjectStoreUnreachableError`` naming the endpoint, not botocore's exception."""
    from beam_curator.workflows import ExactDeduplicationWorkflow

    workflow = ExactDeduplicationWorkflow(input_path=f"{s3_bucket}/in", output_path=f"{s3_bucket}/out",
                                          input_filetype="jsonl", perform_removal=False)
    s3_server.kill()
    try:
        with pytest.raises(ObjectStoreUnreachableError) as raised:
            workflow.run()
    finally:
        s3_server.start()
    assert str(raised.value).startswith(f"cannot reach the object store at {s3_server.endpoint}")


def test_a_parquet_file_the_failing_store_cannot_serve_is_not_called_unreadable(
    s3_server, s3_bucket: str, failing_front, tmp_path: Path,
) -> None:
    """A read the store answers with server errors raises the store's error, not the advice to replace the file
    that a damaged file gets; once the store answers, the same calls read the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from beam_curator.stages.io.parquet import ParquetReader, parquet_metadata, read_parquet

    table = pa.table({"id": [1, 2, 3], "text": ["a", "b", "c"]})
    pq.write_table(table, tmp_path / "part-0.parquet")
    upload(s3_server, tmp_path, f"{s3_bucket}/in")
    url = f"{s3_bucket}/in/part-0.parquet"
    reader = ParquetReader(url).decompose()[-1]  # what reads the input's partitions
    reads = {"read_parquet": lambda: read_parquet(url), "parquet_metadata": lambda: parquet_metadata(url).num_rows,
             "the reader stage": lambda: reader.read_file(url).table.num_rows}
    failing_front.switch.touch()
    for name, read in reads.items():
        with pytest.raises(ObjectStoreFailedError, match=r"^the object store failed: it answered \w+ with a server "
                                                          r"error \((500|InternalError)"):
            read()
        assert failing_front.requests_failed > 0, name
    failing_front.switch.unlink()
    assert read_parquet(url).equals(table)
    assert parquet_metadata(url).num_rows == reads["the reader stage"]() == 3


def test_an_output_folder_the_failing_store_cannot_write_to_is_not_called_unwritable(
    s3_server, s3_bucket: str, failing_front, tmp_path: Path,
) -> None:
    """The semantic workflow's first check, a probe object written to each output folder, fails on a store that
    answers uploads with server errors: the error names the store's failure, not the folder's permissions, and
    comes before any work (nothing embedded)."""
    from beam_curator.data import sample_corpus_path
    from beam_curator.workflows import TextSemanticDeduplicationWorkflow

    upload(s3_server, Path(sample_corpus_path()), f"{s3_bucket}/in")
    failing_front.switch.write_text("PUT")
    workflow = TextSemanticDeduplicationWorkflow(
        f"{s3_bucket}/in", f"{s3_bucket}/out", f"{s3_bucket}/cache", input_filetype="jsonl",
        embedding_backend="static", n_clusters=4, eps=0.05, verbose=False)
    with pytest.raises(ObjectStoreFailedError, match=r"^the object store failed: it answered PutObject "):
        workflow.run()
    assert failing_front.requests_failed > 0
    assert objects(s3_server, f"{s3_bucket}/cache") == objects(s3_server, f"{s3_bucket}/out") == []


def test_a_rerun_in_the_same_process_sees_objects_added_and_removed_since(
    s3_server, s3_bucket: str, s3_env: dict, tmp_path: Path,
) -> None:
    """fsspec keeps one s3fs client per process, with its cached listings; the second and third runs must
    list the input afresh."""
    uploaded_corpus(s3_server, s3_bucket, tmp_path, 4)
    out, ckpt = f"{s3_bucket}/out", f"{s3_bucket}/ckpt"

    def run():
        return resume_pipeline(f"{s3_bucket}/in", out, str(tmp_path / "calls.log"), 0).run(
            checkpoint_path=ckpt, progress=False)

    assert run().partitions_completed == 4
    added = {"id": "new", "n": 7, "text": "added between runs"}
    other_client = s3_server.filesystem()
    other_client.pipe(f"{s3_bucket[5:]}/in/part-100.jsonl", (json.dumps(added) + "\n").encode())
    second = run()
    assert (second.partitions_pending, second.partitions_skipped, second.partitions_completed) == (1, 4, 1)
    assert added in s3_rows(s3_server, out)

    other_client.rm_file(f"{s3_bucket[5:]}/in/part-100.jsonl")
    third = run()
    assert (third.partitions_pending, third.partitions_skipped, third.partitions_completed) == (0, 4, 0)


def test_the_driver_sees_every_workers_progress_file_as_it_appears(s3_server, s3_bucket: str, s3_env: dict) -> None:
    """The live bar reads the workers' progress files through this process's s3fs client, polling: a listing
    cached at the first poll must not hide the workers that start later, or the run would end with
    "no SDK worker started"."""
    from beam_curator.transforms.progress import read_progress

    folder, other_client = f"{s3_bucket}/progress", s3_server.filesystem()
    other_client.pipe(f"{folder[5:]}/driver.json", json.dumps({"advanced": 0}).encode())
    assert read_progress(folder).workers == 1
    other_client.pipe(f"{folder[5:]}/worker-1.json", json.dumps({"advanced": 5}).encode())
    other_client.pipe(f"{folder[5:]}/driver.json", json.dumps({"advanced": 12}).encode())  # longer than before
    snapshot = read_progress(folder)
    assert (snapshot.workers, snapshot.advanced) == (2, 17)
