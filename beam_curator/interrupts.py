"""Ctrl-C and SIGTERM: one line, exit status 130 or 143, and never a native abort.

Schedulers stop jobs with SIGTERM (Slurm's scancel and time limit,
Kubernetes, systemd), which would otherwise end the process on the spot,
leaving the engine's job running and the job servers, worker pools and
clusters it started. While a run goes on (:func:`stops_unwind_runs`), both
signals raise ``KeyboardInterrupt`` instead, so a run unwinds the same way
for either: the engine's job cancelled, marks kept, exit handlers run.

A run interrupted inside Beam leaves threads of native libraries (gRPC,
torch, tokenizers) running; letting the interpreter finalise beside them can
end in ``terminate called without an active exception`` (SIGABRT) or in
tracebacks from every thread. So an interrupted process says what is kept,
runs its exit handlers (which stop the job servers, worker pools and clusters
it started) and leaves at once. :class:`~beam_curator.errors.RunInterrupted`
that nobody catches does the same in a user's own script.

A finished command leaves the same way (:func:`exit_now` with its status):
Arrow's and gRPC's pools can race the interpreter's finalisation after a
clean run too (apache/arrow#34314), and a run that did all its work must not
exit with SIGABRT.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from beam_curator.errors import RunInterrupted

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C
_KEPT = "finished partitions and phases are kept: rerun the same command to resume"
STOPPED_AT_ONCE = f"stopped at once, while stopping; {_KEPT}"


def stopped(signal_number: int) -> str:
    """How the one line names a stop: "interrupted" for a Ctrl-C, "stopped by SIGTERM" for a scheduler's stop."""
    return "interrupted" if signal_number == signal.SIGINT else f"stopped by {signal.Signals(signal_number).name}"


def message(error: BaseException) -> str:
    """The one line to print for a stop: the run's own account, if it gave one."""
    if isinstance(error, RunInterrupted) and str(error):
        return str(error)
    return f"{stopped(_stopped_by or signal.SIGINT)}; {_KEPT}"


def exit_status(signal_number: int) -> int:
    """What shells report for a process a signal ended: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + signal_number


def status_of(error: BaseException) -> int:
    """The exit status for a stop: that of the signal that stopped the run (130 for a Ctrl-C)."""
    if isinstance(error, RunInterrupted):
        return exit_status(error.signal_number)
    return exit_status(_stopped_by or signal.SIGINT)


# The signals that stop a run, and the disposition each has when nobody set one.
_STOPS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
_stopped_by: int | None = None


@contextmanager
def stops_unwind_runs() -> Iterator[None]:
    """While the body runs in the main thread, Ctrl-C and SIGTERM both mark
    the process stopped and raise ``KeyboardInterrupt``, as Python does for
    Ctrl-C; :func:`stop_signal` tells which one it was. From that mark on,
    the package's log filter drops what other libraries log as their threads
    fall over while the run unwinds (``beam_curator.logs``). A second signal
    while the first unwinds the run ends the process at once, with one line.
    Entering clears the mark, so a notebook's next run shows libraries'
    errors again. A handler of the user's own, or a body outside the main
    thread, is left alone; nested uses leave the outer one's handlers."""
    global _stopped_by
    _stopped_by = None
    replaced = {}
    if threading.current_thread() is threading.main_thread():
        replaced = {number: signal.getsignal(number) for number in _STOPS if _ours_to_take(number)}
    for number in replaced:
        signal.signal(number, _mark_and_interrupt)
    try:
        yield
    finally:
        for number, previous in replaced.items():
            signal.signal(number, previous)


def _ours_to_take(number: int) -> bool:
    """Whether the signal's handler is unset, or one a Beam job server left over it (:func:`reclaim_stops`)."""
    handler = signal.getsignal(number)
    return handler is _STOPS[number] or _job_servers_over(handler) in (_STOPS[number], _mark_and_interrupt)


def _job_servers_over(handler: object) -> object:
    """The handler that a Beam job server's SIGINT handler (``StopOnExitJobServer``'s) calls after its own
    work, or None for any other handler."""
    server = getattr(handler, "__self__", None)
    return server._original_sigint_handler if type(server).__name__ == "StopOnExitJobServer" else None


def reclaim_stops() -> None:
    """Take Ctrl-C back from a Beam job server started meanwhile. Beam's
    ``StopOnExitJobServer`` installs a SIGINT handler of its own as the job
    server starts (Flink's, Spark's, and never puts the previous one back),
    which stops the job server before the run can cancel its job, and so
    before the stop is marked: the job ran on, and the job server's threads
    falling over printed 20 lines. The job server is stopped at exit anyway.
    A handler of the user's own that Beam's calls is left alone."""
    if stop_signal() is None and threading.current_thread() is threading.main_thread() and \
            _job_servers_over(signal.getsignal(signal.SIGINT)) in (signal.default_int_handler, _mark_and_interrupt):
        signal.signal(signal.SIGINT, _mark_and_interrupt)


def stop_signal() -> int | None:
    """The signal that stopped the current or last run (``signal.SIGINT``, ``signal.SIGTERM``), or None."""
    return _stopped_by


def _mark_and_interrupt(signum: int, frame: object) -> None:
    global _stopped_by
    if _stopped_by is not None:
        _leave_at_once(signum, frame)
    _stopped_by = signum
    raise KeyboardInterrupt


def _leave_at_once(signum: int, frame: object) -> None:
    """A second stop: what is left of the unwinding is skipped (the services it would have stopped are
    ended by the next one started, ``beam_curator.runners.services``)."""
    print(STOPPED_AT_ONCE, file=sys.stderr, flush=True)
    os._exit(exit_status(signum))


def exit_now(code: int = INTERRUPTED_EXIT) -> None:
    """Flush, run the exit handlers, and end the process without finalising
    the interpreter. A Ctrl-C or SIGTERM while the handlers run (a job server
    or cluster slow to stop) leaves at once, with one line."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if threading.current_thread() is threading.main_thread():
        for number in _STOPS:
            signal.signal(number, _leave_at_once)
    atexit._run_exitfuncs()
    os._exit(code)


def _hook(kind: type[BaseException], error: BaseException, trace: object) -> None:
    if issubclass(kind, RunInterrupted):
        print(message(error), file=sys.stderr)
        exit_now(status_of(error))
    _previous(kind, error, trace)


_previous = sys.excepthook


def install_interrupt_hook() -> None:
    """Print an uncaught ``RunInterrupted`` as its message alone and exit 130 or 143 (other errors as before)."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
