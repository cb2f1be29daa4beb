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
worker processes of ``local-multiprocess`` start as ``python -m
beam_curator.logs`` (see :func:`run_sdk_worker`).
"""

from __future__ import annotations

import logging
import os
import sys

_PACKAGE = "beam_curator"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATE_FORMAT = "%H:%M:%S"
# Libraries whose INFO output is not meant for users of this tool.
_QUIET_LIBRARIES = ("apache_beam", "urllib3", "filelock", "fsspec", "matplotlib", "PIL", "httpx",
                    "sentence_transformers", "transformers", "torch", "vllm", "numba", "asyncio")
_worker_level = "WARN"  # the spelling both Python and Java SDK harnesses accept (Java has no WARNING)
_progress = True
WORKER_LEVEL_VARIABLE = "BEAM_CURATOR_WORKER_LOG_LEVEL"
# Where the driver re-logs what local worker processes send it; they print it themselves. And where
# Beam says, at WARNING, that it starts and stops a Flink or Spark job server, as every run does.
_ROUTINE_WARNINGS = ("apache_beam.runners.portability.local_job_service", "apache_beam.utils.subprocess_server")


class _ThirdPartyRootRecords(logging.Filter):
    """Drops warnings that libraries log on the *root* logger (not their own),
    which no logger level can silence: Beam does so while being imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "root" or record.levelno >= logging.ERROR:
            return True
        return _PACKAGE in record.pathname or "site-packages" not in record.pathname


def _handler(stream, verbose: bool) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, _DATE_FORMAT))
    if not verbose:
        handler.addFilter(_ThirdPartyRootRecords())
    return handler


def _replace_root_handlers(handler: logging.Handler) -> logging.Logger:
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
    root = _replace_root_handlers(_handler(stream, verbose))
    root.setLevel(logging.INFO if verbose else logging.WARNING)
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


def run_sdk_worker() -> None:
    """An SDK worker process of ``local-multiprocess`` (``python -m
    beam_curator.logs``): logging first, at the level the driver passed in
    the environment, then Beam's own worker. The level sits on the handler
    because Beam's worker resets the root logger's level to INFO as it starts."""
    level = os.environ.get(WORKER_LEVEL_VARIABLE, "WARN")
    handler = _handler(None, verbose=level == "INFO")
    handler.setLevel(level)
    _replace_root_handlers(handler)
    from apache_beam.runners.worker import sdk_worker_main

    if level != "INFO":  # its one warning says a local worker has no cache folder, as intended
        logging.getLogger(sdk_worker_main.__name__).setLevel(logging.ERROR)
    sdk_worker_main.main(sys.argv)


def progress_shown() -> bool:
    """Whether runs draw progress bars (on a terminal): not after a quiet set-up."""
    return _progress


def worker_log_level() -> str:
    """The log level SDK worker processes are asked for (Beam's
    ``--default_sdk_harness_log_level``): WARNING unless set up verbose."""
    return _worker_level


if __name__ == "__main__":
    run_sdk_worker()
