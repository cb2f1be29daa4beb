"""Ctrl-C: one line, exit status 130, and never a native abort.

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
import sys

from beam_curator.errors import RunInterrupted

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C
_GENERIC = "interrupted; finished partitions and phases are kept: rerun the same command to resume"


def message(error: BaseException) -> str:
    """The one line to print for a Ctrl-C: the run's own account, if it gave one."""
    return str(error) if isinstance(error, RunInterrupted) and str(error) else _GENERIC


def exit_now(code: int = INTERRUPTED_EXIT) -> None:
    """Flush, run the exit handlers, and end the process without finalising the interpreter."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    atexit._run_exitfuncs()
    os._exit(code)


def _hook(kind: type[BaseException], error: BaseException, trace: object) -> None:
    if issubclass(kind, RunInterrupted):
        print(message(error), file=sys.stderr)
        exit_now()
    _previous(kind, error, trace)


_previous = sys.excepthook


def install_interrupt_hook() -> None:
    """Print an uncaught ``RunInterrupted`` as its message alone and exit 130 (other errors as before)."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
