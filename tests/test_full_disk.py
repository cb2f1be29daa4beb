"""A full disk loses nothing (issue 20).

Each test runs on a real size-limited filesystem made for it (a tmpfs with
``size=``), filled by a filler file so that the space runs out inside the
phase under test: the core pipeline's sink and checkpoint, and the semantic
workflow's embedding, pairwise and removal phases. The run must stop with an
``OutputWriteError`` naming the path it could not write; no file under a
final name may be partial, no partition or phase may be marked complete
without its output; and once the filler is deleted, the same command must
give what a fresh run gives.

How much room to leave is measured, not guessed: a roomy run on a tmpfs of
its own records how much of it was used when each phase finished (the
reference the reruns are compared with), and the failing run leaves the
room of the phases before the target plus half of the target's own output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import captured_logs, copy_corpus, duplicate_ids, jsonl_rows, kept_rows  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.checkpoint import open_store, registry  # noqa: E402
from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.errors import OutputWriteError  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter, ParquetWriter  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402
from beam_curator.workflows.phases import PhaseBook, remove_tree  # noqa: E402

PAGE = 4096
FILLER = "filler"


class SmallDisk:
    """A mounted tmpfs: how much of it is used, and a filler that leaves a given room."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def used(self) -> int:
        stats = os.statvfs(self.root)
        return (stats.f_blocks - stats.f_bfree) * stats.f_frsize

    def fill(self, leave: int) -> None:
        """Write the filler until the disk is full, then give ``leave`` bytes back."""
        fd = os.open(self.root / FILLER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            block = 1 << 20
            while block >= PAGE:  # unbuffered, so that nothing is left to fail at close
                try:
                    os.write(fd, b"\0" * block)
                except OSError:
                    block //= 2
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.root / FILLER).unlink()


@contextmanager
def mounted(folder: Path, size: str) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` on ``folder``, unmounted afterwards (after closing
    this process's checkpoint writers on it, which keep files open)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield SmallDisk(folder)
    finally:
        registry.close_below(str(folder))
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with mounted(tmp_path / "disk", "16m") as disk:
        yield disk


def final_files(root: Path) -> list[Path]:
    """Every file under ``root`` but the filler and checkpoint internals."""
    return sorted(path for path in root.rglob("*") if path.is_file() and path.name != FILLER
                  and ".beam_curator_metadata" not in path.parts)


def settled_files(root: Path, timeout: float = 30.0) -> list[Path]:
    """``final_files`` once no temporary is there, or after ``timeout``. Beam's
    local runner raises the first failed bundle's error while a bundle on its
    other thread may still be writing a file, which that bundle then renames or
    removes; a temporary still there after ``timeout`` was left behind."""
    deadline = time.monotonic() + timeout
    while any(path.name.startswith(".tmp-") for path in final_files(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return final_files(root)


def assert_no_partial_files(root: Path, reference: Path) -> None:
    """No temporary is left, and every file under a final name is complete:
    parquet and JSON parse whole, and a JSON Lines output equals the fresh
    run's file of the same name (a file cut at a line end would still parse)."""
    for path in settled_files(root):
        assert not path.name.startswith(".tmp-"), f"temporary file left behind: {path}"
        twin = reference / path.relative_to(root)
        if path.suffix == ".parquet":
            rows = pq.read_table(path).num_rows
            assert not twin.exists() or rows == pq.read_table(twin).num_rows, path
        elif path.suffix == ".jsonl":
            assert path.read_bytes() == twin.read_bytes(), f"{path} differs from a fresh run's"
        elif path.suffix == ".json":
            json.loads(path.read_text())


def assert_marks_match_outputs(checkpoint: Path, output: Path) -> list[str]:
    """Every partition marked complete in ``checkpoint`` has its files in
    ``output`` at the recorded sizes; returns the complete partitions."""
    snapshot = open_store(str(checkpoint)).snapshot()
    complete = sorted(snapshot.completed())
    for key in complete:
        for candidates in snapshot.outputs.get(key, {}).values():
            for name, size, _ in candidates[-1]:
                assert (output / name).stat().st_size == size, f"partition {key} marked complete, {name} is not"
    return complete


def assert_names_path(error: pytest.ExceptionInfo, under: Path) -> None:
    message = str(error.value)
    assert "no space left on device" in message and "free space and rerun the same command" in message, message
    assert str(under) in message, f"{message!r} names no path under {under}"


# ---- the core pipeline's sink and checkpoint -------------------------------------------------------

def copy_pipeline(output: Path, writer: type = JsonlWriter) -> Pipeline:
    return Pipeline("copy", stages=[JsonlReader(sample_corpus_path(), files_per_partition=1), writer(str(output))])


@pytest.mark.parametrize("writer", [JsonlWriter, ParquetWriter])
def test_pipeline_sink_on_a_full_disk(writer: type, small_disk: SmallDisk, tmp_path: Path) -> None:
    """Output and checkpoint on the small disk, room for about half the output."""
    fresh = tmp_path / "fresh"
    assert copy_pipeline(fresh / "out", writer).run(checkpoint_path=str(fresh / "ckpt")).partitions_completed == 6
    output_bytes = sum(path.stat().st_size for path in (fresh / "out").iterdir())
    out, ckpt = small_disk.root / "out", small_disk.root / "ckpt"
    small_disk.fill(leave=output_bytes // 2 + 16 * PAGE)  # the checkpoint's files take a few pages

    with pytest.raises(OutputWriteError) as error:
        copy_pipeline(out, writer).run(checkpoint_path=str(ckpt))
    assert_names_path(error, small_disk.root)
    assert_no_partial_files(out, fresh / "out")
    complete = assert_marks_match_outputs(ckpt, out)
    assert len(complete) < 6

    small_disk.free()
    summary = copy_pipeline(out, writer).run(checkpoint_path=str(ckpt))
    assert summary.partitions_skipped == len(complete) and summary.partitions_completed == 6 - len(complete)
    assert_same_output(out, fresh / "out")
    assert len(assert_marks_match_outputs(ckpt, out)) == 6


def assert_same_output(output: Path, reference: Path) -> None:
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in reference.iterdir())
    for path in reference.iterdir():
        read = jsonl_rows if path.suffix == ".jsonl" else (lambda file: pq.read_table(file).to_pylist())
        assert read(output / path.name) == read(path), path.name


@pytest.mark.parametrize("share", [0, 0.25, 0.5, 0.75])
def test_checkpoint_marks_on_a_full_disk(share: float, small_disk: SmallDisk, tmp_path: Path) -> None:
    """Output on a roomy disk, the checkpoint on the small one with room for
    ``share`` of what it takes (measured): a failure to create the checkpoint
    or write a mark is the same error, naming the checkpoint's file, and a
    rerun in the same process (whose checkpoint writer lives on) completes
    every partition the failed run did not mark."""
    fresh = tmp_path / "fresh"
    before = small_disk.used()
    copy_pipeline(fresh / "out").run(checkpoint_path=str(small_disk.root / "fresh-ckpt"))
    needed = small_disk.used() - before
    remove_tree(str(small_disk.root / "fresh-ckpt"))
    out, ckpt = tmp_path / "out", small_disk.root / "ckpt"
    small_disk.fill(leave=int(needed * share) // PAGE * PAGE)

    with pytest.raises(OutputWriteError) as error:
        copy_pipeline(out).run(checkpoint_path=str(ckpt))
    assert_names_path(error, ckpt)
    complete = assert_marks_match_outputs(ckpt, out) if (ckpt / ".beam_curator_metadata").exists() else []
    if out.exists():
        assert_no_partial_files(out, fresh / "out")

    small_disk.free()
    summary = copy_pipeline(out).run(checkpoint_path=str(ckpt))
    assert summary.partitions_skipped == len(complete) and summary.partitions_completed == 6 - len(complete)
    assert summary.partitions_incomplete == 0
    assert_same_output(out, fresh / "out")
    assert len(assert_marks_match_outputs(ckpt, out)) == 6


# ---- the semantic dedup workflow ---------------------------------------------------------------------

# Where each phase under test writes, under the disk: its output folder and its checkpoint.
PHASES = {
    "embedding": ("cache/embeddings", "cache/checkpoints/embedding"),
    "pairwise": ("cache/semantic_dedup/pairwise_results", "cache/checkpoints/pairwise"),
    "removal": ("output/deduplicated", "cache/checkpoints/removal"),
}


def semantic_run(input_dir: Path, root: Path) -> dict:
    return TextSemanticDeduplicationWorkflow(
        str(input_dir), str(root / "output"), str(root / "cache"), embedding_backend="sentence-transformers",
        n_clusters=4, eps=0.05, id_field="doc_id", perform_removal=True, runner="local",
        input_filetype="jsonl", output_filetype="jsonl",
    ).run().metadata


@pytest.fixture(scope="module")
def semantic_fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, int]]]:
    """The input (three files of the bundled corpus), a fresh run's root, and
    how much of its disk was used when each phase had written its output
    (just before its done-marker), in the order the phases ran."""
    base = tmp_path_factory.mktemp("semantic")
    input_dir = copy_corpus(base / "input", ("part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"))
    with mounted(base / "fresh", "64m") as disk:
        used = {"start": disk.used()}
        with marking(lambda name: used.setdefault(name, disk.used())):
            semantic_run(input_dir, disk.root)
        yield input_dir, disk.root, used


@contextmanager
def marking(before: Callable[[str], object] = lambda name: None, after: Callable[[str], object] = lambda name: None,
            ) -> Iterator[None]:
    """Call ``before(name)`` and ``after(name)`` around every phase's done-marker."""
    mark_done = PhaseBook.mark_done

    def marked(book: PhaseBook, name: str, *args: object, **kwargs: object) -> None:
        before(name)
        mark_done(book, name, *args, **kwargs)
        after(name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PhaseBook, "mark_done", marked)
        yield


@pytest.mark.parametrize("phase", PHASES)
def test_semantic_phase_on_a_full_disk(
    phase: str, semantic_fresh: tuple[Path, Path, dict[str, int]], small_disk: SmallDisk,
) -> None:
    """The disk fills up when the phase before ``phase`` is done (another
    process's doing), leaving half the room ``phase`` writes in a fresh run."""
    input_dir, fresh, used = semantic_fresh
    output, checkpoint = (small_disk.root / part for part in PHASES[phase])
    names = list(used)
    previous = names[names.index(phase) - 1]
    leave = (used[phase] - used[previous]) // 2
    if previous == "start":
        small_disk.fill(leave)

    with marking(after=lambda name: small_disk.fill(leave) if name == previous else None), \
            pytest.raises(OutputWriteError) as error:
        semantic_run(input_dir, small_disk.root)
    assert_names_path(error, small_disk.root)
    assert str(output) in str(error.value) or str(checkpoint) in str(error.value), str(error.value)
    assert_no_partial_files(small_disk.root, fresh)
    assert not (small_disk.root / "cache/checkpoints/phases" / f"{phase}.done.json").exists()
    for metadata in checkpoint.rglob(".beam_curator_metadata"):
        assert_marks_match_outputs(metadata.parent, output)

    small_disk.free()
    with captured_logs() as logs:
        semantic_run(input_dir, small_disk.root)
    assert set(duplicate_ids(small_disk.root / "output")["id"]) == set(duplicate_ids(fresh / "output")["id"])
    assert kept_rows(small_disk.root / "output") == kept_rows(fresh / "output")
    assert not any("nothing to do" in line and line.startswith(phase) for line in logs)
