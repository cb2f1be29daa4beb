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
import subprocess
import sys

from beam_curator.runners.services import Service, free_port


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
        self.service = Service("worker-pool", [python, "-m", "beam_curator.runners.worker_pool", f"--port={self.port}"],
                               self.port, env=self._environment(), startup_timeout=startup_timeout)

    @property
    def process(self) -> subprocess.Popen | None:
        return self.service.process

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
        self.service.start()
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the pool and its SDK workers (its process group); kill what is left after ``grace``."""
        self.service.stop(grace)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the pool's output (its workers' too), for error messages."""
        return self.service.log_tail(lines)

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


if __name__ == "__main__":
    main()
