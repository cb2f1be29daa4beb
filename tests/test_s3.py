"""Every path on a real S3 endpoint (S3Proxy, ``tests/s3_server.py``): inputs,
outputs, caches and checkpoints as ``s3://`` URLs, with credentials given as
fsspec ``storage_options`` or in the environment as boto reads them. Each
entry point's S3 run must give what the same run gives on local folders."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import fsspec
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import canonical, write_corpus  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
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
    monkeypatch.delenv("FSSPEC_S3", raising=False)


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
