"""The one logging set-up of the command, the examples and scripts.

A user reading a run's output wants beam_curator's own progress and
warnings, not the chatter of the libraries below it: Apache Beam logs
start-up notes on the root logger while it is being imported (for example
"apitools not found" when the Google Cloud extras are absent), and SDK
worker processes log every bundle at INFO. ``configure_logging`` therefore
shows beam_curator's INFO messages and other libraries' warnings only,
drops Beam's import-time notes, and asks workers for WARNING and above;
``verbose`` restores everything.

No Apache Beam import here: it must run before Beam is imported, so that
Beam's import-time messages meet the filter. For the same reason the SDK
worker processes of ``local-multiprocess`` set it up first
(``beam_curator.runners.sdk_worker``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from beam_curator.errors import interrupted, user_error_in
from beam_curator.interrupts import stop_signal

_PACKAGE = "beam_curator"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATE_FORMAT = "%H:%M:%S"
# Libraries whose INFO output is not meant for users of this tool.
_QUIET_LIBRARIES = ("apache_beam", "urllib3", "filelock", "fsspec", "matplotlib", "PIL", "httpx",
                    "sentence_transformers", "transformers", "torch", "vllm", "numba", "asyncio", "distributed")
_worker_level = "WARN"  # the spelling both Python and Java SDK harnesses accept (Java has no WARNING)
_progress = True
WORKER_LEVEL_VARIABLE = "BEAM_CURATOR_WORKER_LOG_LEVEL"
# Where the driver re-logs what local worker processes send it; they print it themselves. And where
# Beam says, at WARNING, that it starts and stops a Flink or Spark job server, as every run does.
_ROUTINE_WARNINGS = ("apache_beam.runners.portability.local_job_service", "apache_beam.utils.subprocess_server")


def _stream_hung_up(error: BaseException | None) -> bool:
    """Whether ``error`` is the gRPC data stream a Flink or Spark job server
    cancels as it closes an SDK worker's connection ("Multiplexer hanging
    up"), which it does at the end of every job and every Spark stage. A
    worker in this process (LOOPBACK) that reads the stream just before it is
    told to close logs that at ERROR with a traceback, and its threads die
    raising it, after a job that succeeded; a job that failed reports its own
    error. (Duck-typed: gRPC is not imported here.)"""
    details = getattr(error, "details", None)
    return callable(details) and details() == "Multiplexer hanging up"


class _LibraryNoise(logging.Filter):
    """What no logger level can silence, dropped unless verbose: warnings that
    libraries log on the *root* logger (Beam does while being imported),
    other libraries' reports of an error that reaches the user anyway, once,
    as the package's own exception (a ``CuratorError`` or a stop that Beam
    logs with its traceback on its way up), and a job server's hang-up of a
    finished job's data stream (see ``_stream_hung_up``), asyncio's report of
    a connection error in a task nobody awaited (an object store's client
    writing to a connection the store closed: the request's own error reaches
    the user as the store's outage), and Beam's routine warnings of every run
    (``_ROUTINE_WARNINGS``), as ``configure_logging`` drops them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == _PACKAGE or record.name.startswith(f"{_PACKAGE}."):
            return True
        if stop_signal() is not None or (record.name in _ROUTINE_WARNINGS and record.levelno < logging.ERROR):
            return False
        if record.name == "root" and record.levelno < logging.ERROR:
            return _PACKAGE in record.pathname or "site-packages" not in record.pathname
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and (user_error_in(error) is not None or interrupted(error) or _stream_hung_up(error)
                                  or (record.name == "asyncio" and isinstance(error, ConnectionError))):
            return False
        return not _REPORTED.search(record.getMessage())


# A record whose text carries one of the package's errors (a worker's traceback) or a Ctrl-C.
_REPORTED = re.compile(r"beam_curator(?:\.\w+)+Error: |KeyboardInterrupt")
_NOISE = _LibraryNoise()


def make_handler(stream, verbose: bool) -> logging.Handler:
    """The package's log handler: a stream, its format, other libraries' noise filtered unless verbose."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, _DATE_FORMAT))
    if not verbose:
        handler.addFilter(_NOISE)
    return handler


def replace_root_handlers(handler: logging.Handler) -> logging.Logger:
    root = logging.getLogger()
    for old in list(root.handlers):  # importing Beam may have installed one already
        root.removeHandler(old)
    root.addHandler(handler)
    return root


def configure_logging(quiet: bool = False, verbose: bool = False, stream=None) -> None:
    """Set up logging for a process that runs pipelines.

    Default: beam_curator at INFO, other libraries at WARNING, Beam's
    root-logged notes dropped, SDK workers at WARNING. ``quiet``: WARNING
    for everything. ``verbose``: INFO from every library and worker (a
    ``-v`` on the command line).
    """
    global _worker_level, _progress
    root = replace_root_handlers(make_handler(stream, verbose))
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for target in filter(None, [root, logging.lastResort]):  # see silence_library_noise
        (target.removeFilter if verbose else target.addFilter)(_NOISE)
    logging.getLogger(_PACKAGE).setLevel(logging.WARNING if quiet else logging.INFO)
    for library in _QUIET_LIBRARIES:
        logging.getLogger(library).setLevel(logging.INFO if verbose else logging.WARNING)
    for routine in _ROUTINE_WARNINGS:
        logging.getLogger(routine).setLevel(logging.INFO if verbose else logging.ERROR)
    _worker_level = "INFO" if verbose else "WARN"
    os.environ[WORKER_LEVEL_VARIABLE] = _worker_level  # local worker processes inherit it
    _progress = not quiet
    if not verbose:  # the model libraries' own bars (loading weights...) in every worker
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def progress_shown() -> bool:
    """Whether runs draw progress bars (on a terminal): not after a quiet set-up."""
    return _progress


def worker_log_level() -> str:
    """The log level SDK worker processes are asked for (Beam's
    ``--default_sdk_harness_log_level``): WARNING unless set up verbose."""
    return _worker_level


def verbose() -> bool:
    """Whether this process (a driver set up verbose, or a worker whose driver was) shows everything."""
    return _worker_level == "INFO" or os.environ.get(WORKER_LEVEL_VARIABLE) == "INFO"


def _thread_died(args: threading.ExceptHookArgs) -> None:
    """Python's report of a thread that died raising, except a LOOPBACK
    worker's threads that die of a job server's hang-up (``_stream_hung_up``)
    and threads that die after a stop (``interrupts.stops_unwind_runs``)."""
    if verbose() or not (_stream_hung_up(args.exc_value) or stop_signal() is not None):
        _threads_own_hook(args)


_threads_own_hook = threading.excepthook


def silence_library_noise() -> None:
    """Keep other libraries' noise out of a process that never called
    :func:`configure_logging` (a script on the Python API, a Dask worker):
    run when the package is imported, before Apache Beam is, and again when a
    run starts, for the handlers that appeared since (Beam's import installs
    one on the root logger), Python's last-resort handler and its report of
    threads that die raising. Verbose: nothing."""
    global _threads_own_hook
    if verbose():
        return
    if threading.excepthook is not _thread_died:
        _threads_own_hook, threading.excepthook = threading.excepthook, _thread_died
    root = logging.getLogger()
    for target in [root, *root.handlers, *filter(None, [logging.lastResort])]:
        if _NOISE not in target.filters:
            target.addFilter(_NOISE)
    dask = logging.getLogger("distributed")
    if dask.getEffectiveLevel() < logging.WARNING:  # dask sets INFO on it when imported
        dask.setLevel(logging.WARNING)


@contextmanager
def unwrap_errors() -> Iterator[None]:
    """One of the package's errors raised inside a Beam stage comes out of
    the body as that error alone, as ``Pipeline.run`` raises it: its message
    once, without Beam's step notes, its re-raises and the workers'
    tracebacks (kept as ``__cause__`` when verbose), and Beam's logging of it
    dropped. For a user's own pipeline:
    ``with unwrap_errors(), beam.Pipeline(...) as pipeline:``. Other errors
    and a Ctrl-C come out as raised."""
    logging.basicConfig()  # as making a beam.Pipeline does, first, so that the filter goes on its handler
    silence_library_noise()
    try:
        yield
    except Exception as error:
        found = None if interrupted(error) else user_error_in(error)
        if found is None or (type(found) is type(error) and str(found) == str(error)):
            raise  # not the package's error, or already as the user needs it (raised in this process, unwrapped)
        raise found from (error if verbose() else None)


@contextmanager
def model_loading() -> Iterator[None]:
    """Loading a model without the model libraries' bars (transformers'
    "Loading weights") unless verbose: a worker may load one per process."""
    if verbose():
        yield
        return
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()

