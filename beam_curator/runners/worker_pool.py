"""A Beam worker pool for ``environment_type=EXTERNAL``, started with the right interpreter.

Beam's ``worker_pool_main`` starts one SDK worker process per worker the
runner asks for, so stages run in processes other than the one that builds
the pipeline. It launches them as plain ``python``, whatever comes first on
``PATH``: a pool started as ``/venv/bin/python -m ...`` from a shell whose
``PATH`` lacks ``/venv/bin`` runs workers without Beam, which die at once
while the job waits for them. ``python -m beam_curator.runners.worker_pool
--port PORT`` (and :class:`WorkerPool`, which runs it in a child process)
puts its own interpreter's folder first on ``PATH`` before starting Beam's
pool, so the workers run the interpreter the pool was started with.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


class WorkerPool:
    """Start with ``with WorkerPool() as pool:``; run with ``**pool.settings()``.

    ``pythonpath`` folders are prepended to the workers' ``PYTHONPATH`` so
    they can import stage modules that are not installed. The pool runs in
    its own session and is torn down as a process group, so its SDK workers
    go with it even if a run failed halfway.
    """

    def __init__(
        self,
        python: str = sys.executable,
        pythonpath: list[str] | None = None,
        port: int | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.python = python
        self.pythonpath = [str(folder) for folder in pythonpath or []]
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def settings(self) -> dict[str, str]:
        """Preset settings that send a portable runner's work to this pool."""
        return {"environment_type": "EXTERNAL", "environment_config": self.address}

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        pythonpath = [*self.pythonpath, *filter(None, [env.get("PYTHONPATH")])]
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        return env

    def start(self) -> "WorkerPool":
        self._log = tempfile.NamedTemporaryFile(prefix="beam-worker-pool-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [self.python, "-m", "beam_curator.runners.worker_pool", f"--port={self.port}"],
            env=self._environment(), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"worker pool exited with {self.process.returncode}:\n{tail}")
            try:
                socket.create_connection(("localhost", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise TimeoutError(f"worker pool did not listen on {self.address} within {self.startup_timeout} s:\n{tail}")

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the pool and its SDK workers (its process group); kill what is left after ``grace``."""
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

    def log_tail(self, lines: int = 30) -> str:
        """The end of the pool's output (its workers' too), for error messages."""
        if self._log is None:
            return ""
        return "\n".join(Path(self._log.name).read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> "WorkerPool":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve a worker pool on ``--port`` until interrupted; workers run this interpreter."""
    parser = argparse.ArgumentParser(
        prog="python -m beam_curator.runners.worker_pool",
        description="A Beam worker pool (environment_type=EXTERNAL) whose SDK workers run this interpreter.",
    )
    parser.add_argument("--port", type=int, required=True, help="port the pool listens on")
    args = parser.parse_args(argv)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    from apache_beam.runners.worker import worker_pool_main

    worker_pool_main.main([f"--service_port={args.port}"])


def _signal_group(group: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(group, sig)
        return True
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    main()
