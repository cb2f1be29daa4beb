"""A long-running helper process (worker pool, JobManager, Spark master...) owned by a run or a test.

Each runs in its own session, so stopping it takes down everything it
started (SDK workers, executors) even when a run failed halfway; its output
goes to a log file whose tail goes into every error about it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO


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
    """``command`` run as its own process group, ready once ``port`` answers."""

    def __init__(self, name: str, command: list[str], port: int | None, env: dict[str, str] | None = None,
                 cwd: str | None = None, startup_timeout: float = 60.0) -> None:
        self.name, self.command, self.port, self.env, self.cwd = name, command, port, env, cwd
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not started"
        return self.process.pid

    def start(self) -> "Service":
        self._log = tempfile.NamedTemporaryFile(prefix=f"beam-curator-{self.name}-", suffix=".log", delete=False)
        self.process = subprocess.Popen(self.command, env=self.env, cwd=self.cwd, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        if self.port is None:
            return self
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")
            if answers("localhost", self.port):
                return self
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise TimeoutError(f"{self.name} did not listen on localhost:{self.port} within {self.startup_timeout} s:\n{tail}")

    def kill(self) -> None:
        """SIGKILL the whole group at once, as a crash or the OOM killer would."""
        if self.process is not None:
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait()

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
        if self._log is not None:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
            self._log = None

    def log_tail(self, lines: int = 30) -> str:
        """The end of the process's output, for error messages."""
        if self._log is None:
            return ""
        return "\n".join(Path(self._log.name).read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> "Service":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(group: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(group, sig)
        return True
    except ProcessLookupError:
        return False
