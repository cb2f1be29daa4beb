"""Every path on a real S3 endpoint (S3Proxy, ``tests/s3_server.py``): inputs,
outputs, caches and checkpoints as ``s3://`` URLs, with credentials given as
fsspec ``storage_options`` or in the environment as boto reads them. Each
entry point's S3 run must give what the same run gives on local folders."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import fsspec
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from s3_server import SECRET_KEY  # noqa: E402
from curator_helpers import SCRIPTS_DIR, canonical, resume_pipeline, scripts_pythonpath, write_corpus  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.checkpoint import shard_manifest  # noqa: E402
from beam_curator.cli.main import main  # noqa: E402
from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.stages.io import CuratorInputError, JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.workflows import (  # noqa: E402
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    TextSemanticDeduplicationWorkflow,
)

DOCS_PER_FILE = 12


@pytest.fixture(autouse=True)
def fsspec_defaults(monkeypatch: pytest.MonkeyPatch):
    """Workflows given ``storage_options`` make them fsspec's defaults for the
    protocol (here and, through ``FSSPEC_S3``, in workers): undone after each test."""
    monkeypatch.setattr(fsspec.config, "conf", dict(fsspec.config.conf))
    # Set, then removed: monkeypatch restores only what it changed, and a delenv of a variable that was not
    # there records nothing, so the FSSPEC_S3 a workflow then set (this server's endpoint) outlived the test
    # and sent a later test's command past its failing front (seen in CI, when both files shared a worker).
    monkeypatch.setenv("FSSPEC_S3", "{}")
    monkeypatch.delenv("FSSPEC_S3")


@pytest.fixture
def s3_environment(s3_server, monkeypatch: pytest.MonkeyPatch):
    """Credentials and endpoint in the environment only, as a cluster job gets them."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return s3_server


def tiny_corpus(folder: Path) -> Path:
    """Two files of the bundled corpus' first documents; the second also holds
    three exact copies of the first's documents and two near copies (a word added)."""
    folder.mkdir(parents=True, exist_ok=True)
    first, second = ([json.loads(line) for line in (Path(sample_corpus_path()) / name).read_text().splitlines()]
                     [:DOCS_PER_FILE] for name in ("part-00000.jsonl", "part-00001.jsonl"))
    second += [{**doc, "doc_id": f"copy-{doc['doc_id']}"} for doc in first[:3]]
    second += [{**doc, "doc_id": f"near-{doc['doc_id']}", "text": doc["text"] + " Also"} for doc in first[3:5]]
    for name, docs in (("a.jsonl", first), ("b.jsonl", second)):
        (folder / name).write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    return folder


def upload(s3_server, folder: Path, url: str) -> str:
    fs = s3_server.filesystem()
    for file in sorted(folder.iterdir()):
        fs.pipe(f"{url}/{file.name}", file.read_bytes())
    return url


def jsonl_rows(fs: fsspec.AbstractFileSystem, folder: str) -> list[dict]:
    """Every record of the data files below ``folder`` (hidden files are no output)."""
    files = [path for path in fs.find(folder) if path.endswith(".jsonl") and "/." not in path]
    return canonical([json.loads(line) for path in files for line in fs.cat(path).decode().splitlines()])


def parquet_ids(fs: fsspec.AbstractFileSystem, folder: str, column: str) -> list:
    files = [path for path in fs.find(folder) if path.endswith(".parquet") and "/." not in path]
    return sorted(value for path in files for value in pd.read_parquet(io.BytesIO(fs.cat(path)))[column])


def both(s3_server, tmp_path: Path, s3_bucket: str, run) -> tuple:
    """``run(input, output, cache)`` on local folders, then on the bucket; the two file systems."""
    corpus = tiny_corpus(tmp_path / "in")
    run(str(corpus), str(tmp_path / "out"), str(tmp_path / "cache"))
    run(upload(s3_server, corpus, f"{s3_bucket}/in"), f"{s3_bucket}/out", f"{s3_bucket}/cache")
    return fsspec.filesystem("file"), s3_server.filesystem()


def copy_pipeline(source: str, output: str) -> Pipeline:
    return Pipeline("copy", stages=[JsonlReader(source, files_per_partition=1), JsonlWriter(output)])


def test_a_pipeline_reads_writes_and_checkpoints_on_s3(s3_environment, s3_bucket: str, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "in", 4)
    copy_pipeline(str(corpus), str(tmp_path / "out")).run(str(tmp_path / "ckpt"), progress=False)
    source = upload(s3_environment, corpus, f"{s3_bucket}/in")
    summary = copy_pipeline(source, f"{s3_bucket}/out").run(f"{s3_bucket}/ckpt", progress=False)
    assert summary.partitions_completed == 4
    fs = s3_environment.filesystem()
    assert jsonl_rows(fs, f"{s3_bucket}/out") == jsonl_rows(fsspec.filesystem("file"), str(tmp_path / "out"))
    assert fs.find(f"{s3_bucket}/ckpt/.beam_curator_metadata"), "marks in the bucket"
    again = copy_pipeline(source, f"{s3_bucket}/out").run(f"{s3_bucket}/ckpt", progress=False)
    assert again.partitions_skipped == 4 and again.partitions_completed == 0


def test_exact_dedup_with_storage_options(s3_server, s3_bucket: str, tmp_path: Path) -> None:
    def run(source: str, output: str, cache: str) -> None:
        options = {"storage_options": s3_server.storage_options()} if source.startswith("s3://") else None
        metadata = ExactDeduplicationWorkflow(
            output, source, input_filetype="jsonl", assign_id=False, id_field="doc_id", perform_removal=True,
            output_filetype="jsonl", cache_path=cache, read_kwargs=options, write_kwargs=options, verbose=False,
        ).run().metadata
        assert metadata["num_duplicates"] == 3

    local, s3 = both(s3_server, tmp_path, s3_bucket, run)
    assert parquet_ids(s3, f"{s3_bucket}/out/ExactDuplicateIds", "doc_id") == \
        parquet_ids(local, str(tmp_path / "out" / "ExactDuplicateIds"), "doc_id")
    kept = jsonl_rows(s3, f"{s3_bucket}/out/deduplicated")
    assert len(kept) == 2 * DOCS_PER_FILE + 2 and kept == jsonl_rows(local, str(tmp_path / "out" / "deduplicated"))


def test_fuzzy_dedup_with_storage_options(s3_server, s3_bucket: str, tmp_path: Path) -> None:
    def run(source: str, output: str, cache: str) -> None:
        options = {"storage_options": s3_server.storage_options()} if source.startswith("s3://") else None
        metadata = FuzzyDeduplicationWorkflow(
            cache, output, source, input_filetype="jsonl", id_field="doc_id", char_ngrams=5, num_bands=10,
            minhashes_per_band=2, seed=42, read_kwargs=options, cache_kwargs=options, write_kwargs=options,
            verbose=False,
        ).run().metadata
        assert metadata["num_duplicates"] >= 3

    local, s3 = both(s3_server, tmp_path, s3_bucket, run)
    duplicates = parquet_ids(s3, f"{s3_bucket}/out/FuzzyDuplicateIds", "doc_id")
    assert len(duplicates) >= 3 and duplicates == parquet_ids(local, str(tmp_path / "out" / "FuzzyDuplicateIds"), "doc_id")


def test_semantic_dedup_with_environment_credentials(s3_environment, s3_bucket: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(source: str, output: str, cache: str) -> None:
        TextSemanticDeduplicationWorkflow(
            source, output, cache, input_filetype="jsonl", output_filetype="jsonl", id_field="doc_id",
            embedding_backend="sentence-transformers", embedding_max_chars=300, n_clusters=2, eps=0.05,
            verbose=False,
        ).run()

    local, s3 = both(s3_environment, tmp_path, s3_bucket, run)
    duplicates = parquet_ids(s3, f"{s3_bucket}/out/duplicates", "id")
    assert len(duplicates) >= 3 and duplicates == parquet_ids(local, str(tmp_path / "out" / "duplicates"), "id")
    kept = jsonl_rows(s3, f"{s3_bucket}/out/deduplicated")
    assert kept and kept == jsonl_rows(local, str(tmp_path / "out" / "deduplicated"))


def test_job_array_shards_share_a_checkpoint_on_s3(s3_environment, s3_bucket: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """Three shards started at once, as a Slurm array would, each its own process with the environment's credentials."""
    corpus = write_corpus(tmp_path / "in", 6)
    resume_pipeline(str(corpus), str(tmp_path / "reference"), str(tmp_path / "reference.log"), 0).run(progress=False)
    source, checkpoint = upload(s3_environment, corpus, f"{s3_bucket}/in"), f"{s3_bucket}/ckpt"
    shards = [subprocess.Popen(
        [sys.executable, str(SCRIPTS_DIR / "resume_pipeline.py"), source, f"{s3_bucket}/out", checkpoint,
         "--log", str(tmp_path / f"shard-{index}.log"), "--shard", f"{index}/3"],
        env={**os.environ, "PYTHONPATH": scripts_pythonpath()}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for index in range(3)]
    completed = 0
    for shard in shards:
        out, err = shard.communicate(timeout=300)
        assert shard.returncode == 0, err[-3000:]
        completed += json.loads(out.strip().splitlines()[-1])["completed"]
    assert completed == 6
    assert shard_manifest(checkpoint, JsonlReader(source), 3).complete
    assert main(["checkpoint", "shards", checkpoint, "--count", "3", "--input", source]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "resubmit: none"
    fs = s3_environment.filesystem()
    assert jsonl_rows(fs, f"{s3_bucket}/out") == jsonl_rows(fsspec.filesystem("file"), str(tmp_path / "reference"))


def test_the_command_takes_credentials_from_the_environment(s3_environment, s3_bucket: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    corpus = tiny_corpus(tmp_path / "in")
    source = upload(s3_environment, corpus, f"{s3_bucket}/in")
    for input_path, output in ((str(corpus), str(tmp_path / "out")), (source, f"{s3_bucket}/out")):
        assert main(["exact", "--input", input_path, "--output", output, "--id-field", "doc_id"]) == 0
        assert "removed          3" in capsys.readouterr().out
    fs = s3_environment.filesystem()
    assert jsonl_rows(fs, f"{s3_bucket}/out/deduplicated") == \
        jsonl_rows(fsspec.filesystem("file"), str(tmp_path / "out" / "deduplicated"))


def run_command(arguments: list[str], environment: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``beam-curator`` in a process of its own; also which model libraries it imported."""
    script = ("import sys; from beam_curator.cli.main import main; code = main(sys.argv[1:]); "
              "print([name for name in ('torch', 'sentence_transformers') if name in sys.modules]); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script, *arguments], env={**os.environ, **environment},
                          capture_output=True, text=True, timeout=300)
    return done, json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_a_missing_bucket_or_refused_credentials_stop_the_run_before_any_work(
        s3_server, s3_bucket: str, tmp_path: Path) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    command = ["semdedup", "--input", "s3://no-such-bucket/in", "--output", f"{s3_bucket}/out"]
    missing, imported = run_command(command, s3_server.environment())
    assert missing.returncode == 2 and imported == []
    assert missing.stderr.strip() == (f"error: input_path 's3://no-such-bucket/in': bucket 'no-such-bucket' does not "
                                      f"exist at {s3_server.endpoint}; create it or correct the path")
    command = ["exact", "--input", f"{s3_bucket}/in", "--output", f"{s3_bucket}/out"]
    refused, _ = run_command(command, {**s3_server.environment(), "AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert f"{s3_server.endpoint} refused access to bucket {bucket!r}" in refused.stderr
    assert "AWS_SECRET_ACCESS_KEY" in refused.stderr and "not-the-secret" not in refused.stderr

    fsspec.config.conf["s3"] = s3_server.storage_options()  # fsspec's own defaults: storage_options for a Pipeline
    pipeline = copy_pipeline(upload(s3_server, write_corpus(tmp_path / "in", 1), f"{s3_bucket}/in"),
                             "s3://no-such-bucket/out")
    with pytest.raises(CuratorInputError, match=f"JsonlWriter.*'no-such-bucket' does not exist at {s3_server.endpoint}"):
        pipeline.run(f"{s3_bucket}/ckpt", progress=False)
    assert not s3_server.filesystem().find(f"{s3_bucket}/ckpt"), "the run started"


def files_holding(secret: str, *folders: Path) -> list[str]:
    """The files below ``folders`` whose bytes hold ``secret``."""
    return [str(path) for folder in folders for path in folder.rglob("*")
            if path.is_file() and secret.encode() in path.read_bytes()]


def test_credentials_are_in_no_log_error_summary_or_written_file(s3_server, s3_bucket: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """A workflow given ``storage_options``, then the command given the environment's
    credentials, and a run refused for a missing bucket: the secret is nowhere they wrote."""
    caplog.set_level(logging.DEBUG, logger="beam_curator")
    temporary = set(Path(tempfile.gettempdir()).iterdir())
    source = upload(s3_server, tiny_corpus(tmp_path / "in"), f"{s3_bucket}/in")

    def fuzzy(**kwargs: object) -> dict:
        return FuzzyDeduplicationWorkflow(
            f"{s3_bucket}/fuzzy-cache", f"{s3_bucket}/fuzzy", source, input_filetype="jsonl", id_field="doc_id",
            char_ngrams=5, num_bands=10, minhashes_per_band=2, perform_removal=True, **kwargs,
        ).run().metadata

    options = {"storage_options": s3_server.storage_options()}
    print(fuzzy(read_kwargs=options, cache_kwargs=options, write_kwargs=options))  # a summary, searched below
    monkeypatch.setattr(fsspec.config, "conf", {})
    monkeypatch.delenv("FSSPEC_S3")
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    assert fuzzy()["phases_run"] == [], "credentials given another way are no reason to run again"
    assert main(["-v", "exact", "--input", source, "--output", f"{s3_bucket}/exact", "--id-field", "doc_id"]) == 0
    assert main(["exact", "--input", source, "--output", "s3://no-such-bucket/exact", "--id-field", "doc_id"]) == 2

    printed = capsys.readouterr()
    assert "removed          3" in printed.out and "no-such-bucket" in printed.err
    assert SECRET_KEY not in printed.out + printed.err
    logged = [record.getMessage() + (record.exc_text or "") for record in caplog.records]
    assert logged and not [message for message in logged if SECRET_KEY in message]
    written = [tmp_path, s3_server.root / "data", *(set(Path(tempfile.gettempdir()).iterdir()) - temporary)]
    assert s3_server.filesystem().find(f"{s3_bucket}/fuzzy-cache/checkpoints"), "checkpoints to search"
    assert files_holding(SECRET_KEY, *written) == []
