"""The base of the errors a user acts on.

A ``CuratorError``'s message names what is wrong (a file, a line, a
parameter, a folder) and what to do, so the command prints the message alone
(exit 2) and the Python API raises it as is, wherever it was raised: in the
driver, or inside a Beam stage on a worker process (see
``beam_curator.pipeline``). Nothing here imports anything of the package, so
every layer may raise one.
"""

from __future__ import annotations

import functools
import importlib
import re
import signal
from typing import Callable, Iterator, TypeVar
from urllib.parse import urlsplit

_Result = TypeVar("_Result")


class CuratorError(Exception):
    """An error about input, settings or the folders a run uses, whose message is enough to act on."""


class CuratorSettingsError(CuratorError, ValueError):
    """A workflow's parameter that cannot work, found when the workflow is made (before anything runs)."""


# What to do with an input record that cannot be used (the readers', the workflows' and the dedup
# transforms' on_bad_record): stop with an error naming it, or drop it and count it.
ON_BAD_RECORD = ("raise", "skip")


def check_on_bad_record(on_bad_record: str, owner: str | None = None) -> None:
    """``on_bad_record`` is one of :data:`ON_BAD_RECORD`; a ``ValueError`` naming ``owner`` otherwise."""
    if on_bad_record not in ON_BAD_RECORD:
        where = f"{owner}: " if owner else ""
        raise ValueError(f"{where}on_bad_record must be 'raise' or 'skip', not {on_bad_record!r}")


class OutputWriteError(CuratorError, OSError):
    """A file (an output, a cache file, a checkpoint mark) could not be written
    for lack of space; the message names it. Nothing incomplete was kept under
    its final name and nothing was marked done, so freeing space and rerunning
    finishes the work (see ``beam_curator.writing``)."""


class ObjectStoreUnreachableError(CuratorError, ConnectionError):
    """The object store (an S3 endpoint) stopped answering: refused, closed or
    timed out after the client's own retries. Whatever was not written whole
    was not marked done, so rerunning once the store is back resumes the run."""


class ObjectStoreFailedError(CuratorError, OSError):
    """The object store answered a request with a server error (HTTP 5xx:
    ``InternalError``, ``SlowDown``, ``ServiceUnavailable``) on every one of
    the client's attempts. A fault of the store, not of the input or the
    settings; as with an outage, nothing unfinished was marked done."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM ended a run; the message says what is kept and how to go on.

    A ``KeyboardInterrupt``, so code that stops on Ctrl-C still stops, also on
    a scheduler's SIGTERM. ``signal_number`` is the signal that stopped it.
    Uncaught, it prints its message alone and exits as that signal would be
    reported, 130 or 143 (see :func:`beam_curator.interrupts.install_interrupt_hook`).
    """

    def __init__(self, message: str = "", signal_number: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signal_number = signal_number


# How a Python traceback names an exception of the package: `beam_curator.module.Class: message`.
_NAMED = re.compile(r"^(beam_curator(?:\.\w+)*)\.(\w+): (.+)$", re.MULTILINE)
# How botocore's connection errors name the request that failed, raised here or printed in a worker's traceback:
# 'Could not connect to the endpoint URL: "http://host:port/bucket/key?..."' (and 'Read timeout on', 'Connect
# timeout on', 'Connection was closed before we received a valid response from' the same).
_UNREACHABLE = re.compile(r"(\w[^:\n]*?) (?:the )?endpoint URL: \"([^\"]+)\"")
# How botocore names a request the store failed, raised here or printed in a worker's traceback: 'An error occurred
# (InternalError) when calling the ListObjectsV2 operation (reached max retries: 1): We encountered an internal
# error.' The code is S3's name of a server error, or the bare HTTP status when the answer had no body (HEAD).
_SERVER_ERROR = re.compile(
    r"An error occurred \((InternalError|ServiceUnavailable|SlowDown|5\d\d)\) when calling the (\w+) operation"
    r"(?: \(reached max retries: (\d+)\))?: ([^\n]*)"
)
# What Beam appends each time a stage's error passes through a step, possibly more than once.
_STEP_NOTE = re.compile(r"(?: \[while running '[^']*'\])+$")


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the errors behind it, as Python's traceback shows them: the
    cause, else the error being handled unless ``raise ... from None`` hid it
    (a stage that replaced the package's error meant its own to be reported)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _rebuilt(kind: type, message: str) -> CuratorError | None:
    """A fresh ``kind`` holding ``message`` without Beam's step notes (None if it cannot be built so)."""
    try:
        return kind(_STEP_NOTE.sub("", message.strip()))
    except TypeError:  # a subclass with another constructor: keep the original
        return None


def user_error_in(error: BaseException) -> CuratorError | None:
    """The ``CuratorError`` behind ``error``, when a runner wrapped it.

    Beam re-raises a stage's exception with step names appended (local
    runner), or, from worker processes (portable, Flink, Spark), as a
    ``RuntimeError`` whose text holds the worker's traceback: there the last
    line naming one of the package's error classes is the one raised.
    """
    outage = store_outage_in(error)  # before an error that wrapped it with advice about a file or folder
    if outage is not None:
        return outage
    for link in _chain(error):
        if isinstance(link, CuratorError):
            return _rebuilt(type(link), str(link)) or link
    for module, name, message in reversed(_NAMED.findall(str(error))):
        try:
            kind = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if isinstance(kind, type) and issubclass(kind, CuratorError):
            found = _rebuilt(kind, message)
            if found is not None:
                return found
    return None


def store_outage_in(error: BaseException) -> ObjectStoreUnreachableError | ObjectStoreFailedError | None:
    """The object store's failure behind ``error`` (raised, or as text from a
    worker), in one line that says what to do: an
    ``ObjectStoreUnreachableError`` naming the endpoint when the S3 client
    could not connect, an ``ObjectStoreFailedError`` naming the request and
    the store's answer when the store answered server errors."""
    for link in _chain(error):
        text = str(link)
        found = _UNREACHABLE.search(text)
        if found is not None:
            what, url = found.groups()
            parts = urlsplit(url)
            return ObjectStoreUnreachableError(
                f"cannot reach the object store at {parts.scheme}://{parts.netloc} (for {parts.path or '/'}): "
                f"{what.lower()} the endpoint; check that it is up and reachable from every worker, then rerun "
                "the same command (finished partitions are kept)"
            )
        failed = _SERVER_ERROR.search(text)
        if failed is not None:
            code, operation, retries, message = failed.groups()
            attempts = f"on all {int(retries) + 1} attempts" if retries else "after the client's retries"
            return ObjectStoreFailedError(
                f"the object store failed: it answered {operation} with a server error ({code}: "
                f"{message.strip() or 'no message'}) {attempts}; this is the store's fault, not the input's: "
                "rerun the same command once it answers again (finished partitions are kept; AWS_MAX_ATTEMPTS "
                "sets how often a request is tried)"
            )
    return None


def store_outages_named(run: Callable[..., _Result]) -> Callable[..., _Result]:
    """Wraps a workflow's ``run``: an S3 client's connection failure or a
    store's server error raised in the driver (listing, reading a phase's
    results) comes out as the same one-line error that ``Pipeline.run``
    raises for one inside a Beam stage, instead of botocore's own exception,
    or of an error that took it for a fault of a file or folder (a folder
    found not writable)."""

    @functools.wraps(run)
    def named(*args: object, **kwargs: object) -> _Result:
        try:
            return run(*args, **kwargs)
        except Exception as error:
            found = store_outage_in(error)
            if found is None:
                raise
            raise found from error

    return named


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` is, or wraps, a Ctrl-C (Beam turns one inside a stage into a RuntimeError)."""
    return any(isinstance(link, KeyboardInterrupt) for link in _chain(error)) or "KeyboardInterrupt" in str(error)
