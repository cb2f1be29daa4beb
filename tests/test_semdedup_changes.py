"""A rerun after the user changed something gives what a fresh run gives.

One first run fills a cache; each case then copies that cache and output
(which also moves them: the copy must still be reused), restores the input
folder to what the first run saw, makes one change a user makes between
runs, and reruns. Its duplicates and clean rows must equal those of a fresh
run on the changed input, and the log must show that only the partitions
the change touched were embedded again.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import (  # noqa: E402
    NOTES,
    captured_logs,
    duplicate_ids,
    kept_rows,
    second_model,
    write_jsonl,
)

from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402

EMBEDDED = re.compile(r"embedding: (\d+) partitions pending, (\d+) skipped as complete")


def corpus() -> dict[str, list[dict]]:
    """Three files; ``c`` repeats two texts of ``a`` under new ids, so that
    each pair keeps one copy, which may sit in either file."""
    rows = [{"doc_id": f"d{i}", "text": text, "body": text.upper()} for i, text in enumerate(NOTES)]
    copies = [{"doc_id": "copy-1", "text": NOTES[1], "body": NOTES[1].upper()},
              {"doc_id": "copy-4", "text": NOTES[4], "body": NOTES[4].upper()}]
    return {"a.jsonl": rows[:3], "b.jsonl": rows[3:], "c.jsonl": copies}


def run(input_dir: Path, base: Path, **settings: object) -> tuple[dict, list[str]]:
    options = {"id_field": "doc_id", "embedding_backend": "sentence-transformers", "n_clusters": 2, "eps": 0.01,
               "runner": "local", "input_filetype": "jsonl", "output_filetype": "jsonl", **settings}
    with captured_logs() as logs:
        metadata = TextSemanticDeduplicationWorkflow(
            str(input_dir), str(base / "output"), str(base / "cache"), **options
        ).run().metadata
    return metadata, logs


def outcome(base: Path) -> tuple[set, list[dict]]:
    return set(duplicate_ids(base / "output")["id"]), kept_rows(base / "output")


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first run: ``input`` (kept pristine in ``pristine``), ``cache`` and ``output``."""
    base = tmp_path_factory.mktemp("first")
    for name, rows in corpus().items():
        write_jsonl(base / "pristine" / name, rows)
    shutil.copytree(base / "pristine", base / "input")
    run(base / "input", base)
    return base


def rewrite(name: str, same_size: bool) -> Callable[[Path], dict]:
    def change(folder: Path) -> dict:
        rows = corpus()[name]
        if same_size:  # other words, same length: only content tells them apart
            rows[0]["text"] = rows[0]["text"].replace("short", "SHORT").replace("rocky", "ROCKY")
        else:
            rows[0]["text"] = "Chess endgame studies with a king and two knights."
        write_jsonl(folder / name, rows)
        return {}
    return change


def delete(name: str) -> Callable[[Path], dict]:
    return lambda folder: (folder / name).unlink() or {}


def rename(folder: Path) -> dict:
    (folder / "b.jsonl").rename(folder / "b-renamed.jsonl")
    return {}


def add(folder: Path) -> dict:
    write_jsonl(folder / "d.jsonl", [{"doc_id": "copy-2", "text": NOTES[2], "body": NOTES[2].upper()},
                                     {"doc_id": "d9", "text": "Restoring old bicycles, one bearing at a time.",
                                      "body": "RESTORING OLD BICYCLES"}])
    return {}


def setting(**settings: object) -> Callable[[Path], dict]:
    return lambda folder: settings


def other_model(folder: Path) -> dict:
    return {"model_identifier": str(second_model(folder.parent.parent / "second-model"))}


CASES = {
    # change: (what it does, partitions embedded again, of how many now)
    "delete the kept copies' file": (delete("a.jsonl"), 0, 2),
    "delete a file": (delete("c.jsonl"), 0, 2),
    "rewrite a file, other size": (rewrite("b.jsonl", same_size=False), 1, 3),
    "rewrite a file, same size": (rewrite("a.jsonl", same_size=True), 1, 3),
    "rename a file": (rename, 1, 3),
    "add a file": (add, 1, 4),
    "text field": (setting(text_field="body"), 3, 3),
    "max chars": (setting(embedding_max_chars=20), 3, 3),
    "model": (other_model, 3, 3),
}


@pytest.mark.parametrize("case", CASES)
def test_a_rerun_after_a_change_equals_a_fresh_run(case: str, first: Path, tmp_path: Path) -> None:
    change, embedded, partitions = CASES[case]
    rerun_base, fresh_base = tmp_path / "rerun", tmp_path / "fresh"
    for folder in ("cache", "output"):
        shutil.copytree(first / folder, rerun_base / folder)
    shutil.rmtree(first / "input")
    shutil.copytree(first / "pristine", first / "input")  # copy2 keeps sizes and times: unchanged files match
    settings = change(first / "input")

    _, logs = run(first / "input", rerun_base, **settings)
    _, fresh_logs = run(first / "input", fresh_base, **settings)

    assert outcome(rerun_base) == outcome(fresh_base)
    pending, skipped = map(int, EMBEDDED.search("\n".join(logs)).groups())
    assert (pending, skipped) == (embedded, partitions - embedded), "\n".join(logs)
    assert sorted(path.name for path in (rerun_base / "cache" / "embeddings").glob("*.parquet")) == \
        sorted(path.name for path in (fresh_base / "cache" / "embeddings").glob("*.parquet"))


def test_an_unchanged_rerun_of_a_moved_cache_does_nothing(first: Path, tmp_path: Path) -> None:
    for folder in ("cache", "output"):
        shutil.copytree(first / folder, tmp_path / folder)
    shutil.rmtree(first / "input")
    shutil.copytree(first / "pristine", first / "input")
    metadata, logs = run(first / "input", tmp_path)
    text = "\n".join(logs)
    assert "embedding: inputs and settings unchanged and outputs in place, nothing to do" in text
    assert "k-means: embeddings and settings unchanged, reusing" in text
    assert "removal: inputs and settings unchanged and outputs in place, nothing to do" in text
    assert outcome(tmp_path) == outcome(first)


def test_a_rerun_in_the_same_process_after_its_folders_were_deleted_equals_a_fresh_run(
    first: Path, tmp_path: Path,
) -> None:
    """A user starting afresh between two runs in one process (a notebook: ``rm -r`` of the cache and output)
    with the input grown meanwhile: the second run is a fresh run, although the first left this process's
    checkpoint writers open on the files just deleted."""
    shutil.rmtree(first / "input")
    shutil.copytree(first / "pristine", first / "input")
    base = tmp_path / "reused"
    run(first / "input", base)
    shutil.rmtree(base / "cache")
    shutil.rmtree(base / "output")
    add(first / "input")

    _, logs = run(first / "input", base)
    run(first / "input", tmp_path / "fresh")

    assert outcome(base) == outcome(tmp_path / "fresh")
    assert EMBEDDED.search("\n".join(logs)).groups() == ("4", "0"), "\n".join(logs)
