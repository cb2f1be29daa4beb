"""The dedup transforms in a user's own ``beam.Pipeline`` show their progress
as ``Pipeline.run`` does: a bar per transform on a terminal while the job
runs, and each transform's counts on stderr when it ends, whichever process
the workers run in; ``progress=False`` prints nothing."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_curator.runners import pipeline_options
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import ExactDedup, FuzzyDedup

# 30 documents, ten unlike texts each written three times: 10 kept, 20 removed.
DOCUMENTS = [{"doc_id": number, "text": hashlib.sha256(str(number % 10).encode()).hexdigest() * 2}
             for number in range(30)]
COUNTS = "30 documents in, 10 kept, 20 removed"


def run_exact(options: PipelineOptions, **progress: object) -> None:
    with beam.Pipeline(options=options) as pipeline:
        deduplicated = pipeline | beam.Create(DOCUMENTS) | ExactDedup(id_field="doc_id", **progress)
        _ = deduplicated.kept | beam.Map(lambda document: None)


@pytest.mark.parametrize("runner", ["DirectRunner", "local-multiprocess", "portable-external"])
def test_a_users_pipeline_prints_each_dedups_counts_when_it_ends(
    runner: str, request: pytest.FixtureRequest, capfd: pytest.CaptureFixture,
) -> None:
    """In the driver, in worker processes, and behind a portable job service whose ``run`` returns a running job."""
    if runner == "DirectRunner":
        options = PipelineOptions(runner="DirectRunner")
    elif runner == "local-multiprocess":
        options = pipeline_options(runner, num_workers=2)
    else:
        options = pipeline_options("portable", **request.getfixturevalue("worker_pool").settings())
    run_exact(options)
    err = capfd.readouterr().err
    assert err.count("documents in") == 1 and f"ExactDedup: {COUNTS}" in err, err


def test_quiet_dedups_print_nothing(capfd: pytest.CaptureFixture) -> None:
    run_exact(PipelineOptions(runner="DirectRunner"), progress=False)
    assert "ExactDedup" not in capfd.readouterr().err


def test_batches_are_counted_by_row_once_per_transform(capfd: pytest.CaptureFixture) -> None:
    """``FuzzyDedup`` steps the rows of batches through a copy of itself: only the transform itself reports."""
    batches = [DocumentBatch("a", "corpus", pa.Table.from_pylist(DOCUMENTS[:15])),
               DocumentBatch("b", "corpus", pa.Table.from_pylist(DOCUMENTS[15:]))]
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        _ = (pipeline | beam.Create(batches).with_output_types(DocumentBatch)
             | "fuzzy" >> FuzzyDedup(id_field="doc_id", char_ngrams=5))
    err = capfd.readouterr().err
    assert err.count("documents in") == 1 and f"fuzzy: {COUNTS}" in err, err


def test_documents_skipped_as_bad_records_are_counted_apart(capfd: pytest.CaptureFixture) -> None:
    """Two documents without a text, skipped: in, but neither kept nor removed, so the line counts them apart."""
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        _ = (pipeline | beam.Create(DOCUMENTS + [{"doc_id": 100}, {"doc_id": 101, "text": None}])
             | ExactDedup(id_field="doc_id", on_bad_record="skip"))
    err = capfd.readouterr().err
    assert "ExactDedup: 32 documents in, 10 kept, 20 removed, 2 skipped as bad records" in err, err


def test_on_a_terminal_a_bar_shows_the_documents_and_the_kept_and_removed(tmp_path: Path) -> None:
    script = tmp_path / "dedup.py"
    script.write_text(textwrap.dedent(f"""
        import apache_beam as beam
        from beam_curator.transforms import ExactDedup
        with beam.Pipeline(runner="DirectRunner") as pipeline:
            _ = pipeline | beam.Create({DOCUMENTS!r}) | ExactDedup(id_field="doc_id")
    """))
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))  # 200 columns wide
    process = subprocess.Popen([sys.executable, str(script)], stdout=terminal, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(60) == 0, shown
    bar = shown.decode(errors="replace").split(f"ExactDedup: {COUNTS}")[0]
    assert "ExactDedup: 100%" in bar and "30/30" in bar and "10 kept, 20 removed" in bar, shown


@pytest.mark.parametrize("settings", [{"progress": "yes"}, {"progress_folder": ""}])
def test_a_bad_progress_setting_is_refused_naming_it(settings: dict) -> None:
    with pytest.raises(ValueError, match=f"FuzzyDedup: {next(iter(settings))} must"):
        FuzzyDedup(id_field="doc_id", **settings)
