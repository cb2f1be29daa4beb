"""A damaged cache or output gives the undamaged result, or a clear error.

One undamaged run (module fixture); each case copies its cache and output
elsewhere (a moved cache), damages one thing and reruns the same workflow.
The rerun must end with the undamaged duplicates and clean rows, redoing
only what produced the damaged file; where it cannot, it must fail naming
the damaged path, never exit cleanly with another result.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import captured_logs, copy_corpus, duplicate_ids, kept_rows  # noqa: E402

from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402

EMBEDDED = re.compile(r"embedding: (\d+) partitions pending, (\d+) skipped as complete")
FILES = ("part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl")


def run(input_dir: Path, base: Path) -> list[str]:
    with captured_logs() as logs:
        TextSemanticDeduplicationWorkflow(
            str(input_dir), str(base / "output"), str(base / "cache"), embedding_backend="sentence-transformers",
            n_clusters=4, eps=0.05, runner="local", input_filetype="jsonl", output_filetype="jsonl",
        ).run()
    return logs


def outcome(base: Path) -> tuple[list, list[dict]]:
    return sorted(duplicate_ids(base / "output")["id"]), kept_rows(base / "output")


@pytest.fixture(scope="module")
def undamaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("undamaged")
    copy_corpus(base / "input", FILES)
    run(base / "input", base)
    assert outcome(base)[0], "the corpus must hold near-duplicates for the cases to mean anything"
    return base


def first_file(folder: Path, pattern: str = "*.parquet") -> Path:
    return sorted(path for path in folder.rglob(pattern) if not path.name.startswith("."))[0]


def delete(relative: str, pattern: str = "*.parquet") -> Callable[[Path], Path]:
    def damage(base: Path) -> Path:
        target = first_file(base / relative, pattern)
        target.unlink()
        return target
    return damage


def garble(relative: str, pattern: str = "*.parquet", text: bytes = b"not what was written") -> Callable[[Path], Path]:
    def damage(base: Path) -> Path:
        target = first_file(base / relative, pattern)
        target.write_bytes(text)
        return target
    return damage


def truncate(relative: str) -> Callable[[Path], Path]:
    def damage(base: Path) -> Path:
        target = base / relative
        target.write_bytes(target.read_bytes()[:40])
        return target
    return damage


def delete_folder(relative: str) -> Callable[[Path], Path]:
    def damage(base: Path) -> Path:
        shutil.rmtree(base / relative)
        return base / relative
    return damage


PHASES = "cache/checkpoints/phases"
CASES = {
    # damage: (what it does, input files embedded again)
    "delete an embeddings file": (delete("cache/embeddings"), 1),
    "garble an embeddings file": (garble("cache/embeddings"), 1),
    "delete a cluster file": (delete("cache/semantic_dedup/kmeans_results/embs_by_nearest_center"), 0),
    "garble a cluster file": (garble("cache/semantic_dedup/kmeans_results/embs_by_nearest_center"), 0),
    "delete the centroids": (delete("cache/semantic_dedup/kmeans_results", "*.npy"), 0),
    "delete a pairwise file": (delete("cache/semantic_dedup/pairwise_results"), 0),
    "garble a pairwise file": (garble("cache/semantic_dedup/pairwise_results"), 0),
    "truncate the duplicates": (truncate("output/duplicates/duplicates.parquet"), 0),
    "delete the duplicates": (delete("output/duplicates"), 0),
    "delete a clean output file": (delete("output/deduplicated", "*.jsonl"), 0),
    "garble a clean output file": (garble("output/deduplicated", "*.jsonl", b'{"text": "not ours"}\n'), 0),
    "garble the embedding marker": (garble(PHASES, "embedding.done.json", b"{garbage"), 0),
    "garble the k-means marker": (garble(PHASES, "kmeans.done.json", b"[1, 2"), 0),
    "delete the identification marker": (delete(PHASES, "identification.done.json"), 0),
    "delete every phase marker": (delete_folder(PHASES), 0),
}


@pytest.mark.parametrize("case", CASES)
def test_a_rerun_after_damage_gives_the_undamaged_result(case: str, undamaged: Path, tmp_path: Path) -> None:
    damage, embedded = CASES[case]
    for folder in ("cache", "output"):
        shutil.copytree(undamaged / folder, tmp_path / folder)
    damaged = damage(tmp_path)

    logs = "\n".join(run(undamaged / "input", tmp_path))

    assert outcome(tmp_path) == outcome(undamaged)
    found = EMBEDDED.search(logs)
    assert (int(found[1]) if found else 0) == embedded, logs
    if damaged.suffix in (".parquet", ".jsonl", ".npy"):
        assert damaged.exists(), "the damaged file was not written again"
