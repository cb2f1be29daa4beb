"""A long-running helper process (worker pool, JobManager, Spark master...) owned by a run or a test.

Each runs in its own session, so stopping it takes down everything it
started (SDK workers, executors) even when a run failed halfway; its output
goes to a log file whose tail goes into every error about it.

Nothing is left behind. A process that exits any way but SIGKILL stops the
services it still holds (an exit handler; SIGTERM and Ctrl-C unwind a run,
see ``beam_curator.interrupts``). For SIGKILL, each running service, and
each Beam job server a run started, leaves a marker naming its owner's pid,
its own process group and its scratch folders (:data:`MARKERS`): the next
service or run started on this machine ends the group and removes the
folders of every marker whose owner is gone.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO, Callable

import psutil

# One marker per running service or job server: ``<owner pid>-<its pid>.json``.
MARKERS = Path(tempfile.gettempdir()) / "beam-curator-services"


def get_json(url: str, timeout: float = 10.0) -> dict:
    """The JSON a service's HTTP API answers at ``url`` (a REST API, a web UI's JSON)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


class Service:
    """``command`` run as its own process group, ready once ``port`` answers
    (and ``ready()``, where given, says so). ``folders`` are its scratch
    folders, removed with its marker when its owner died without stopping it."""

    def __init__(self, name: str, command: list[str], port: int | None, env: dict[str, str] | None = None,
                 cwd: str | None = None, startup_timeout: float = 60.0, folders: list[Path] | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self.name, self.command, self.port, self.env, self.cwd = name, command, port, env, cwd
        self.startup_timeout, self.folders, self.ready = startup_timeout, [str(f) for f in folders or []], ready
        self.process: subprocess.Popen | None = None
        self.owner = os.getpid()  # the process that started it
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not started"
        return self.process.pid

    def start(self) -> "Service":
        end_orphans()
        self._drop_log()  # a killed service's, started again
        self.owner = os.getpid()
        self._log = tempfile.NamedTemporaryFile(prefix=f"beam-curator-{self.name}-", suffix=".log", delete=False)
        self.process = subprocess.Popen(self.command, env=self.env, cwd=self.cwd, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        _running[self.process.pid] = self
        self._write_marker()
        if self.port is None:
            return self
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")
            if answers("localhost", self.port) and (self.ready is None or self.ready()):
                return self
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise TimeoutError(f"{self.name} did not listen on localhost:{self.port} within {self.startup_timeout} s:\n{tail}")

    def kill(self) -> None:
        """SIGKILL the whole group at once, as a crash or the OOM killer would; its log goes with it
        (once its marker is gone, nothing else would remove it)."""
        if self.process is not None:
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self._forget()
            self._drop_log()

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the group; kill what is left after ``grace``."""
        if self.process is None:
            return
        group = self.process.pid
        _signal_group(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.process.poll()  # reap the leader, or the group never looks empty
            if not _signal_group(group, 0):
                break
            time.sleep(0.1)
        _signal_group(group, signal.SIGKILL)
        self.process.wait()
        self._forget()
        self._drop_log()

    def _drop_log(self) -> None:
        if self._log is not None:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
            self._log = None

    @property
    def _marker(self) -> Path:
        return MARKERS / f"{self.owner}-{self.pid}.json"

    def _write_marker(self) -> None:
        _write_record(self._marker, self.name, self.owner, self.pid, True,
                      [*self.folders, *([self._log.name] if self._log else [])])

    def _forget(self) -> None:
        assert self.process is not None
        _running.pop(self.process.pid, None)
        self._marker.unlink(missing_ok=True)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the process's output, for error messages."""
        if self._log is None:
            return ""
        return "\n".join(Path(self._log.name).read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> "Service":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_running: dict[int, Service] = {}  # this process's started services, by process group


@atexit.register
def _stop_running() -> None:
    """At exit, stop what this process started and still holds (a run or test that did not get to stop it)."""
    for service in list(_running.values()):
        if service.owner == os.getpid():  # not in a forked child, which inherits the handler
            service.stop(grace=5.0)
    for marker in _adopted:  # Beam stopped them (its handlers, registered later, ran first)
        marker.unlink(missing_ok=True)


def _started(pid: int) -> float | None:
    """When process ``pid`` started (None: there is none): a pid alone may be reused."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _write_record(marker: Path, name: str, owner: int, pid: int, group: bool, paths: list[str]) -> None:
    """Record that ``owner`` runs process ``pid`` (with its process group, if ``group``) using ``paths``."""
    MARKERS.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "owner": owner, "owner_started": _started(owner), "pid": pid, "pid_started": _started(pid),
              "group": group, "paths": paths}
    temporary = marker.with_suffix(".tmp")
    temporary.write_text(json.dumps(record))
    temporary.replace(marker)


_adopted: list[Path] = []  # the markers of this process's Beam job servers


def adopt_job_servers() -> None:
    """Markers for the Beam job servers this process runs (``java -jar ...job-server...jar``, started by
    Beam's runners, stopped by Beam at exit), so that one a SIGKILLed driver left, with its artifacts
    folder, is ended by :func:`end_orphans` too: on a cluster it would go on running the job."""
    for child in psutil.Process().children():
        try:
            command = child.cmdline()
        except psutil.Error:
            continue
        marker = MARKERS / f"{os.getpid()}-{child.pid}.json"
        if "-jar" not in command or "job-server" not in " ".join(command) or marker in _adopted:
            continue
        artifacts = command[command.index("--artifacts-dir") + 1] if "--artifacts-dir" in command else None
        _write_record(marker, "job-server", os.getpid(), child.pid, False,
                      [str(Path(artifacts).parent)] if artifacts else [])
        _adopted.append(marker)


def end_orphans() -> list[str]:
    """End the services and job servers whose owner died without stopping them
    (SIGKILL): SIGKILL their process group (a job server: the process),
    remove their scratch folders, log and marker. Returns their names."""
    ended = []
    for marker in MARKERS.glob("*.json") if MARKERS.is_dir() else []:
        try:
            record = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue  # being written, or removed meanwhile
        if record["owner_started"] is not None and _started(record["owner"]) == record["owner_started"]:
            continue  # its owner lives
        if not record["group"]:
            if _started(record["pid"]) == record["pid_started"]:
                os.kill(record["pid"], signal.SIGKILL)
        elif _started(record["pid"]) in (None, record["pid_started"]):
            # No process has the group's number (a group outlives its leader, and Linux reuses no number a
            # group still has), or its leader is the one recorded: the group is the service's, not another's.
            _signal_group(record["pid"], signal.SIGKILL)
            deadline = time.monotonic() + 10
            while group_members(record["pid"]) and time.monotonic() < deadline:
                time.sleep(0.1)
        for path in map(Path, record["paths"]):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
        ended.append(record["name"])
    return ended


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group`` (not the zombies of a group whose owner died, which
    stay until the machine's first process reaps them)."""
    members = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return members


def _signal_group(group: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(group, sig)
        return True
    except ProcessLookupError:
        return False
