"""``CuratorStages`` in a user's own Beam pipeline refuses what ``Pipeline.run`` refuses (issue 27:
it kept stale output after a stage setting changed, and wrote into its own input, doubling rows):
a changed pipeline on a checkpoint with marks, an output or checkpoint inside or equal to the input,
and, while a run holds a checkpoint, a reset of it. Two runs at once on one checkpoint are not
refused by either: job-array shards share one on purpose."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apache_beam as beam
import pytest

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.checkpoint.store import CheckpointBusyError
from beam_curator.data import sample_corpus_path
from beam_curator.runners import pipeline_options
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import CuratorStages, PipelineChangedError
from stages_for_tests import DropShort

SAMPLE_FILES = 6
TESTS_DIR = Path(__file__).resolve().parent


def curate(stages: list[ProcessingStage], checkpoint: str | None, **settings: object) -> None:
    """Apply the stages as ``curate`` in a plain Beam pipeline on the local runner and run it."""
    with beam.Pipeline(options=pipeline_options("local")) as pipeline:
        _ = pipeline | "curate" >> CuratorStages(stages, checkpoint, **settings)


def on_disk(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time: what a run would change."""
    return {str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_changed_stage_setting_is_refused_before_anything_is_written_and_keep_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out, ckpt = tmp_path / "out", str(tmp_path / "ckpt")

    def stages(min_length: int) -> list[ProcessingStage]:
        return [JsonlReader(sample_corpus_path(), fields=["doc_id", "text"]), DropShort(min_length=min_length),
                JsonlWriter(str(out))]

    curate(stages(5), ckpt)
    assert len(open_store(ckpt).completed()) == SAMPLE_FILES
    written, checkpoint_files = on_disk(out), on_disk(Path(ckpt))
    with pytest.raises(PipelineChangedError) as caught:
        curate(stages(40), ckpt)
    message = str(caught.value)
    assert f"pipeline 'curate' changed since its checkpoint {ckpt} was written " \
           "(stage 'drop_short': min_length 5 -> 40)" in message
    assert f"beam-curator checkpoint reset {ckpt}" in message and "changed_pipeline='keep'" in message
    assert on_disk(out) == written and on_disk(Path(ckpt)) == checkpoint_files, "nothing written"

    with caplog.at_level(logging.WARNING, logger="beam_curator.transforms.refusals"):
        curate(stages(40), ckpt, changed_pipeline="keep")
    assert "pipeline 'curate' changed since checkpoint" in caplog.text and "keeping its marks as asked" in caplog.text
    assert on_disk(out) == written, "every partition kept as complete: none written again"
    recorded = {stage["stage"]: stage["settings"] for stage in open_store(ckpt).recorded_pipeline()}
    assert recorded["drop_short"] == {"min_length": 40}, "the new pipeline recorded"
    curate(stages(40), ckpt)  # now the checkpoint's own pipeline: no refusal
    with pytest.raises(PipelineChangedError):
        curate(stages(5), ckpt)
    curate(stages(5), ckpt, changed_pipeline=None)  # no check at all
    with pytest.raises(ValueError, match="changed_pipeline must be 'refuse', 'keep' or None, not 'ignore'"):
        CuratorStages(stages(5), ckpt, changed_pipeline="ignore")


@pytest.mark.parametrize(("writes", "checkpoint"), [
    ("in/out", "ckpt"),   # the output inside the input
    ("in", "ckpt"),       # the output is the input
    ("out", "in/ckpt"),   # the checkpoint inside the input
])
def test_an_output_or_checkpoint_inside_the_input_is_refused_as_pipeline_run_refuses_it(
    tmp_path: Path, writes: str, checkpoint: str
) -> None:
    # A copy of the sample, so that a failing check could not write into the package's own data.
    source = Path(shutil.copytree(sample_corpus_path(), tmp_path / "in"))
    before = on_disk(source)

    def stages() -> list[ProcessingStage]:
        return [JsonlReader(str(source), fields=["doc_id", "text"]), JsonlWriter(str(tmp_path / writes))]

    with pytest.raises(CuratorInputError, match="a run would read its own output back as input") as in_beam:
        curate(stages(), str(tmp_path / checkpoint))
    with pytest.raises(CuratorInputError) as in_run:
        Pipeline("curate", stages=stages()).run(str(tmp_path / checkpoint), progress=False)
    assert str(in_beam.value) == str(in_run.value), "the same refusal, naming both paths"
    named = "checkpoint_path" if checkpoint.startswith("in/") else "JsonlWriter path"
    assert str(in_beam.value).startswith(f"{named} '{tmp_path / (checkpoint if named == 'checkpoint_path' else writes)}'")
    assert on_disk(source) == before, "nothing written into the input"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in"], "no output or checkpoint folder created"


class WaitForRelease(ProcessingStage):
    """Holds its run open: says so in ``started``, then waits until ``release`` exists."""

    name = "wait_for_release"

    def __init__(self, started: str, release: str) -> None:
        self.started, self.release = started, release

    def process(self, task: DocumentBatch) -> DocumentBatch:
        Path(self.started).touch()
        while not os.path.exists(self.release):
            time.sleep(0.05)
        return task


HOLD = """
import sys
from beam_curator import Pipeline
from beam_curator.data import sample_corpus_path
from beam_curator.stages.io import JsonlReader, JsonlWriter
from test_curator_stages_refusals import WaitForRelease, curate
how, checkpoint, out, started, release = sys.argv[1:]
stages = [JsonlReader(sample_corpus_path(), fields=["doc_id", "text"]), WaitForRelease(started, release),
          JsonlWriter(out)]
if how == "pipeline-run":
    Pipeline("curate", stages=stages).run(checkpoint, progress=False)
else:
    curate(stages, checkpoint)
"""


@pytest.mark.parametrize("first", ["curator-stages", "pipeline-run"])
def test_a_second_run_beside_a_running_one_goes_on_and_a_reset_meanwhile_is_refused(tmp_path: Path, first: str) -> None:
    """Whichever way the first run was started, a second process finds what ``Pipeline.run``'s users
    find: its writer file is held from the run's start, so ``checkpoint reset`` refuses naming it, and
    a second run beside it (a shard of a job array) runs."""
    ckpt, started, release = tmp_path / "ckpt", tmp_path / "started", tmp_path / "release"
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, first, str(ckpt), str(tmp_path / "held-out"), str(started),
                               str(release)], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert holder.poll() is None, holder.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the first run never started its stage"
            time.sleep(0.05)
        with pytest.raises(CheckpointBusyError, match=f"checkpoint {ckpt} is in use by running writers "
                                                      rf"\(.*{socket.gethostname()}-{holder.pid}\.mdb\)"):
            open_store(str(ckpt)).reset()
        curate([JsonlReader(sample_corpus_path(), fields=["doc_id", "text"]), JsonlWriter(str(tmp_path / "beside"))],
               str(ckpt))
        assert len(list((tmp_path / "beside").glob("*.jsonl"))) == SAMPLE_FILES, "the second run was not refused"
    finally:
        release.touch()
        output = holder.communicate(timeout=300)[0]
    assert holder.returncode == 0, output[-3000:]
    assert len(list((tmp_path / "held-out").glob("*.jsonl"))) == SAMPLE_FILES
    open_store(str(ckpt)).reset()  # both runs ended: nothing holds it now


@pytest.mark.parametrize("runner", ["local", "in-process"])
def test_a_process_that_ran_a_pipeline_lets_go_of_its_checkpoint(tmp_path: Path, runner: str) -> None:
    """A notebook or service lives on after its runs, ended or failed: the checkpoint is not held as a live
    run's, and ``beam-curator checkpoint reset`` from a shell goes through without ``--force``."""
    ckpt = str(tmp_path / "ckpt")
    Pipeline("copy", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "out"))]).run(
        ckpt, runner=runner, progress=False)
    assert open_store(ckpt).status().live_writers == []
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "part.jsonl").write_text('{"text": "fine"}\n{"text": \n')
    with pytest.raises(CuratorInputError):
        Pipeline("bad", stages=[JsonlReader(str(tmp_path / "bad")), JsonlWriter(str(tmp_path / "bad-out"))]).run(
            str(tmp_path / "bad-ckpt"), runner=runner, progress=False)
    assert open_store(str(tmp_path / "bad-ckpt")).status().live_writers == []
    reset = subprocess.run([str(Path(sys.executable).parent / "beam-curator"), "checkpoint", "reset", ckpt],
                           capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stderr[-2000:]
    assert open_store(ckpt).completed() == set()


def test_on_dask_a_later_steps_refusal_comes_before_the_first_step_runs(tmp_path: Path) -> None:
    """Dask runs each step as a pipeline of its own; the second step's refusals still come first."""
    from beam_curator.pipeline import run_in_order

    copied = tmp_path / "copied"
    first = Pipeline("first", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(copied))])
    second = Pipeline("second", stages=[JsonlReader(str(copied)), JsonlWriter(str(copied / "again"))])
    with pytest.raises(CuratorInputError, match="inside"):
        run_in_order([(first, str(tmp_path / "ckpt-1")), (second, str(tmp_path / "ckpt-2"))], "dask")
    assert not copied.exists(), "the first step ran before the second step's refusal"


@pytest.mark.parametrize("runner", ["local", "dask"])
def test_a_refused_run_without_a_checkpoint_leaves_no_progress_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: str
) -> None:
    """A chain without a checkpoint records its progress in a temporary folder, made before the
    pipeline is built; a refusal while it is built removes it, on Dask (steps refused before the
    first runs) as elsewhere."""
    from beam_curator.pipeline import run_in_order

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # this test's own, not the shared /tmp
    source = Path(shutil.copytree(sample_corpus_path(), tmp_path / "in"))
    copied = Pipeline("copied", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(tmp_path / "copied"))])
    inside = Pipeline("inside", stages=[JsonlReader(str(source)), JsonlWriter(str(source / "out"))])
    with pytest.raises(CuratorInputError, match="inside"):
        run_in_order([(copied, str(tmp_path / "ckpt")), (inside, None)], runner, progress=False)
    assert not (tmp_path / "copied").exists(), "refused before the first step ran"
    assert list(temporary.glob("beam-curator-progress-*")) == []
