"""What a user sees: beam_curator's messages, not the libraries' chatter.

Runs the resume example as a user would, with worker processes, and reads
everything it printed.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from beam_curator.workflows import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "resume_demo.py"


def run_example(tmp_path: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--output", str(tmp_path / "out"), "--runner", "local-multiprocess",
         "--seconds-per-batch", "0", *flags],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_worker_processes_and_beam_stay_quiet_at_the_default_level(tmp_path: Path) -> None:
    out = run_example(tmp_path)
    assert "6 partitions pending, 0 skipped as complete, 6 completed this run" in out
    for noise in ("apitools not found", "INFO:", "Logging handler created", "semi_persistent_directory",
                  "sdk harness", "Loading weights"):
        assert noise not in out, f"{noise!r} leaked into the output:\n{out[-3000:]}"
    assert " INFO beam_curator." in out, "our own messages still show"


@pytest.mark.parametrize("workflow", ["exact", "fuzzy"])
def test_exact_and_fuzzy_runs_log_under_their_own_names(tmp_path: Path, caplog, workflow: str) -> None:
    """Their phases (the shared phase book's messages, removal's too) come under
    the workflow's own logger, not the semantic workflow's, whose book it once was."""
    (tmp_path / "in").mkdir()
    texts = ["The quick brown fox jumps over the lazy dog", "The quick brown fox jumps over the lazy dog",
             "Something else entirely, and long enough to have many n-grams"]
    for number, text in enumerate(texts):
        (tmp_path / "in" / f"part{number}.jsonl").write_text(json.dumps({"text": text}) + "\n")
    settings = {"input_path": str(tmp_path / "in"), "input_filetype": "jsonl", "perform_removal": True}
    caplog.set_level(logging.INFO, logger="beam_curator")
    if workflow == "exact":
        ExactDeduplicationWorkflow(str(tmp_path / "out"), **settings, verbose=True).run()
    else:
        FuzzyDeduplicationWorkflow(str(tmp_path / "cache"), str(tmp_path / "out"), **settings, char_ngrams=5,
                                   verbose=True).run()
    names = {record.name for record in caplog.records if record.name.startswith("beam_curator.workflows")}
    assert names == {f"beam_curator.workflows.{workflow}.workflow"}, names
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("removal: ") for message in messages), messages  # the phase book's, in removal
    assert any(" finished in " in message for message in messages), messages


def test_a_job_servers_hang_up_is_silent_and_real_errors_still_show() -> None:
    """A LOOPBACK worker's data-plane thread dies of the stream a job server cancels as a job ends
    ('Multiplexer hanging up'), after logging it at ERROR: neither reaches stderr; another error does."""
    script = (
        "import logging, threading, grpc\n"
        "import beam_curator\n"
        "class HungUp(grpc.RpcError):\n"
        "    def code(self): return grpc.StatusCode.CANCELLED\n"
        "    def details(self): return 'Multiplexer hanging up'\n"
        "def fail(error):\n"
        "    logging.getLogger('apache_beam.runners.worker.data_plane').error('Failed to read inputs', exc_info=error)\n"
        "    raise error\n"
        "for error in (HungUp(), ValueError('a real failure')):\n"
        "    thread = threading.Thread(target=fail, args=(error,), name='read_grpc_client_inputs')\n"
        "    thread.start(); thread.join()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HungUp" not in done.stderr and "Multiplexer" not in done.stderr, done.stderr
    assert done.stderr.count("ValueError: a real failure") == 2, done.stderr  # logged, and the thread's death


def test_importing_beam_curator_after_apache_beam_prints_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", "import apache_beam; import beam_curator"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # no "apitools not found"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_after_a_stop_only_our_own_messages_show_until_the_next_run(sig: signal.Signals) -> None:
    """The stop mark of ``stops_unwind_runs`` (Ctrl-C or SIGTERM, both raised as ``KeyboardInterrupt``) drops
    other libraries' records, not the package's, and a new run clears it (a notebook's next run must show a
    library's errors); the default handlers are back after each."""
    script = f"""if True:
        import logging, os, signal, time
        from beam_curator.interrupts import stop_signal, stops_unwind_runs
        library, ours = logging.getLogger("a_library"), logging.getLogger("beam_curator.a_module")
        try:
            with stops_unwind_runs():
                os.kill(os.getpid(), {int(sig)})
                time.sleep(5)
        except KeyboardInterrupt:
            library.error("library, after the stop")
            ours.warning("ours, after the stop " + str(stop_signal()))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        with stops_unwind_runs():
            library.error("library, in the next run")
    """
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"ours, after the stop {int(sig)}", "library, in the next run"], done.stderr


@pytest.mark.parametrize("where", ["in the run", "in the exit handlers"])
def test_a_second_stop_while_the_first_unwinds_the_run_leaves_at_once(where: str) -> None:
    """A run slow to unwind (a job being cancelled, a job server or cluster slow to stop at exit) is left
    at once on a second Ctrl-C or SIGTERM, with one line and the second signal's status."""
    script = """if True:
        import atexit, os, signal, sys, time
        from beam_curator import interrupts
        def slow_to_stop():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
        try:
            with interrupts.stops_unwind_runs():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
        except KeyboardInterrupt:
            pass
        atexit.register(slow_to_stop)
        interrupts.exit_now(130)
    """ if where == "in the exit handlers" else """if True:
        import os, signal, time
        from beam_curator.interrupts import stops_unwind_runs
        with stops_unwind_runs():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(60)
    """
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines() == ["stopped at once, while stopping; finished partitions and phases are kept: "
                                        "rerun the same command to resume"], done.stderr


ASYNCIO_TASKS = """
import asyncio, gc, io, sys
from beam_curator.logs import configure_logging

async def fail(error):
    raise error

async def main():
    # Tasks nobody awaits: an object store client's write to a connection the store closed, and a bug.
    tasks = [asyncio.ensure_future(fail(error)) for error in (ConnectionResetError("closing transport"),
                                                             ValueError("a real bug"))]
    await asyncio.sleep(0.01)
    tasks.clear()

configure_logging(verbose=len(sys.argv) > 1)
asyncio.run(main())
gc.collect()
"""


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_an_unawaited_tasks_connection_error_is_dropped_and_any_other_error_shown(verbose: bool) -> None:
    """When an object store goes away, asyncio reports its client's unawaited write as an error with a traceback,
    beside the one line that says the store went away: dropped unless verbose. Other unawaited errors show."""
    run = subprocess.run([sys.executable, "-c", ASYNCIO_TASKS, *(["-v"] if verbose else [])], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and "a real bug" in run.stderr, run.stderr
    assert ("closing transport" in run.stderr) == verbose, run.stderr
