"""Semantic dedup with every path on an fsspec filesystem other than the local
disk (``memory://``, which behaves like an object store: no POSIX folder, URLs
with a protocol), on the in-process local runner that shares its memory."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import duplicate_ids, write_embeddings  # noqa: E402

from beam_curator.workflows import SemanticDeduplicationWorkflow  # noqa: E402

DOCS = 600


@pytest.fixture
def memory():
    fs = fsspec.filesystem("memory")
    yield fs
    fs.rm("/semdedup", recursive=True)


def test_a_workflow_on_memory_urls_finds_what_it_finds_on_disk(memory, tmp_path):
    rng = np.random.default_rng(9)
    vectors = rng.normal(size=(DOCS, 8))
    vectors[:60] = vectors[60:120] + 0.01 * rng.normal(size=(60, 8))
    on_disk = write_embeddings(tmp_path / "embeddings", list(range(DOCS)), vectors, files=3)
    for file in sorted(on_disk.glob("*.parquet")):
        memory.pipe(f"/semdedup/embeddings/{file.name}", file.read_bytes())

    settings = dict(n_clusters=6, eps=0.01, cross_cluster=True, runner="local")
    SemanticDeduplicationWorkflow(str(on_disk), str(tmp_path / "out"), str(tmp_path / "cache"), **settings).run()
    result = SemanticDeduplicationWorkflow(
        "memory://semdedup/embeddings", "memory://semdedup/out", "memory://semdedup/cache", **settings
    ).run()

    in_memory = pd.read_parquet(io.BytesIO(memory.cat("/semdedup/out/duplicates/duplicates.parquet")))
    expected = duplicate_ids(tmp_path / "out")
    assert result.metadata["num_duplicates"] == len(expected) >= 60
    assert sorted(in_memory["id"]) == sorted(expected["id"])
    # Checkpoints went to the fsspec store (no LMDB on an object store), and the range files were cleaned up.
    assert memory.glob("/semdedup/cache/checkpoints/pairwise/.beam_curator_metadata/*/*.json")
    assert not memory.exists("/semdedup/cache/kmeans_results/members_by_range")
