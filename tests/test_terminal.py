"""What an operator sees in the terminal: one line per interrupt or input
error, no other library's chatter, progress within a partition, and a
summary that says when a rerun had nothing to do.

The command and the scripts run as separate processes, as a user starts
them, so that what reaches stderr is what a terminal would show.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import write_corpus  # noqa: E402
from semdedup_helpers import copy_corpus  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.models import make_embedding_handler  # noqa: E402
from beam_curator.models.base import TextListHandler  # noqa: E402
from beam_curator.stages.io import CuratorInputError, JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.transforms.progress import ProgressRecorder, ProgressView, ProgressWatcher, advance, read_progress  # noqa: E402

FILES = ("part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl")  # 308 documents of the bundled corpus
COMMAND = [str(Path(sys.executable).parent / "beam-curator")]  # the console script, as a user runs it
ENVIRONMENT = {**os.environ, "HF_HUB_OFFLINE": "1"}


def semdedup(data: Path, out: Path, *extra: str) -> list[str]:
    return [*COMMAND, "semdedup", "--input", str(data), "--output", str(out), "--n-clusters", "4", "--eps", "0.1",
            *extra]


def summary_row(stdout: str, name: str) -> str:
    (row,) = [line for line in stdout.splitlines() if line.strip().startswith(name)]
    return row.strip()[len(name):].strip()


def test_ctrl_c_while_embedding_then_rerun_then_nothing_to_do(tmp_path: Path) -> None:
    data = copy_corpus(tmp_path / "in", FILES)
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        first = subprocess.Popen(semdedup(data, tmp_path / "out", "--quiet"), stdout=subprocess.DEVNULL,
                                 stderr=stderr, env=ENVIRONMENT, start_new_session=True)
        deadline = time.monotonic() + 120
        while not (tmp_path / "out" / "checkpoints" / "embedding").exists():
            assert first.poll() is None and time.monotonic() < deadline, errors.read_text()[-3000:]
            time.sleep(0.1)
        time.sleep(2)  # the model is loading or embedding
        os.killpg(first.pid, signal.SIGINT)
        assert first.wait(timeout=30) == 130, errors.read_text()[-3000:]  # not -6 (a native abort)
    lines = errors.read_text().splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r"interrupted; \d+ partitions of 'embedding' complete: rerun the same command to resume", lines[0]), lines

    rerun = subprocess.run(semdedup(data, tmp_path / "out"), capture_output=True, text=True, env=ENVIRONMENT,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert summary_row(rerun.stdout, "this run").startswith("ran embedding")
    assert summary_row(rerun.stdout, "documents in") == "308"
    again = subprocess.run(semdedup(data, tmp_path / "out"), capture_output=True, text=True, env=ENVIRONMENT,
                           timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_row(again.stdout, "this run").startswith("nothing to do")
    assert summary_row(again.stdout, "removed") == summary_row(rerun.stdout, "removed")
    assert "nothing to do" in again.stderr


# A stage whose library keeps a thread that falls over once the run is interrupted, logging on its way out, as
# RunInference's did when its model manager went away while the run unwound (CI, 12-06).
FALLOUT_SCRIPT = """
import logging, os, sys, threading, time
from pathlib import Path
from beam_curator import Pipeline
from beam_curator.errors import RunInterrupted
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter

class HoldsALibraryThread(ProcessingStage):
    name = "holds_a_library_thread"

    def process(self, task):
        def library_thread():
            while not Path("interrupted").exists():
                time.sleep(0.05)
            logging.getLogger("a_library").error("its manager went away")
            raise ConnectionError("its manager went away")
        threading.Thread(target=library_thread, daemon=True).start()
        Path("running").touch()
        time.sleep(60)
        return task

try:
    Pipeline("fallout", stages=[JsonlReader("in"), HoldsALibraryThread(), JsonlWriter("out")]).run("ckpt", "local")
except RunInterrupted as interrupt:
    time.sleep(2)  # the library's thread logs and dies meanwhile
    print(interrupt, file=sys.stderr, flush=True)
    os._exit(130)
"""


def test_after_ctrl_c_a_library_thread_falling_over_is_not_shown(tmp_path: Path) -> None:
    write_corpus(tmp_path / "in", 1)
    first = subprocess.Popen([sys.executable, "-c", FALLOUT_SCRIPT], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=ENVIRONMENT)
    deadline = time.monotonic() + 120
    while not (tmp_path / "running").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()[-3000:]
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    time.sleep(0.5)
    (tmp_path / "interrupted").touch()
    assert first.wait(timeout=30) == 130
    assert first.stderr.read().splitlines() == [
        "interrupted; 0 partitions of 'fallout' complete: rerun the same command to resume"]


def test_an_input_error_inside_a_stage_is_printed_once_and_creates_nothing(tmp_path: Path) -> None:
    data = copy_corpus(tmp_path / "in", FILES)
    lines = (data / FILES[1]).read_text().splitlines(keepends=True)
    lines[49] = "{" + lines[49]  # line 50: not JSON; the check before work reads first records only
    (data / FILES[1]).write_text("".join(lines))
    result = subprocess.run(semdedup(data, tmp_path / "out", "--quiet"), capture_output=True, text=True,
                            env=ENVIRONMENT, timeout=300)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {data / FILES[1]}, line 50: malformed JSON (Expecting property name enclosed in double quotes "
        "at column 2). Fix or remove the record, or read with on_bad_record='skip' (beam-curator: --on-bad-record "
        "skip) to drop and count such records"
    ]


def test_settings_errors_are_one_line_before_any_folder_is_made(tmp_path: Path) -> None:
    data = copy_corpus(tmp_path / "in", FILES[:1])
    for flags, says in [(["--eps", "2"], "eps must be in [0, 1)"),
                        (["--recall-sample", "1"], "recall_sample (--recall-sample) must be"),
                        (["--input", str(tmp_path / "nowhere")], "matches no .jsonl")]:
        result = subprocess.run([*semdedup(data, tmp_path / "out"), *flags], capture_output=True, text=True,
                                env=ENVIRONMENT, timeout=120)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr[-3000:]
        assert result.stderr.startswith("error: ") and says in result.stderr
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("runner", ["local-multiprocess", "dask"])
def test_an_input_error_in_a_worker_process_reaches_the_api_as_itself(
    runner: str, tmp_path: Path, worker_pythonpath: None,
) -> None:
    data = write_corpus(tmp_path / "in", 4)
    (data / "part-001.jsonl").write_text('{"id": "a", "n": 1, "text": "fine"}\n{"id": "b", n: 2}\n')
    pipeline = Pipeline("bad", stages=[JsonlReader(str(data)), JsonlWriter(str(tmp_path / "out"))])
    with pytest.raises(CuratorInputError) as raised:
        pipeline.run(str(tmp_path / "ckpt"), runner, num_workers=2)
    assert str(raised.value).startswith(f"{data / 'part-001.jsonl'}, line 2: malformed JSON")
    assert "while running" not in str(raised.value) and "Traceback" not in str(raised.value)


def test_dask_runs_keep_dask_and_beam_off_the_terminal(tmp_path: Path) -> None:
    data = copy_corpus(tmp_path / "in", FILES[:2])
    result = subprocess.run(semdedup(data, tmp_path / "out", "--runner", "dask", "--num-workers", "2"),
                            capture_output=True, text=True, env=ENVIRONMENT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert lines and all(" INFO beam_curator." in line for line in lines), [
        line for line in lines if " INFO beam_curator." not in line][:10]
    assert sum("started a dask LocalCluster" in line for line in lines) == 1  # one cluster serves every phase


def test_the_python_api_shows_no_library_noise_without_any_logging_setup(tmp_path: Path) -> None:
    copy_corpus(tmp_path / "in", FILES[:1])
    script = (
        "from beam_curator.workflows import TextSemanticDeduplicationWorkflow\n"
        "TextSemanticDeduplicationWorkflow(input_path='in', output_path='out', input_filetype='jsonl', "
        "n_clusters=2, eps=0.1).run()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENVIRONMENT,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == "", result.stderr[-3000:]  # no apitools warning, no "Loading weights" bar
    assert (tmp_path / "out" / "deduplicated").is_dir()


def test_embedding_reports_documents_as_it_goes() -> None:
    """A whole file is one example of RunInference: the count moves every few hundred texts."""
    seen: list[int] = []
    handler = TextListHandler(make_embedding_handler(backend="sentence-transformers", device="cpu"), seen.append)
    vectors = handler.run_inference([[f"text number {i}" for i in range(600)]], handler.load_model())
    assert seen == [256, 256, 88] and vectors[0].shape == (600, 384)


def test_the_bar_moves_with_documents_before_the_sink_sees_any(tmp_path: Path) -> None:
    folder = str(tmp_path / "progress")
    ProgressRecorder.for_folder(folder).partition("pending", 1)
    stream = io.StringIO()
    watcher = ProgressWatcher([ProgressView(folder, "embedding", "reader", "writer")], show=True, stream=stream)
    with watcher:
        advance(120)
        ProgressRecorder.latest.write(force=True)
        watcher.update(read_progress(folder))
        assert watcher._bar.n == 120
        assert "partitions 0/1" in stream.getvalue().replace("\r", "\n").splitlines()[-1]
