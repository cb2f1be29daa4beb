"""Quiet SDK worker processes for the ``local-multiprocess`` runner.

Beam's FnApiRunner starts each worker as ``python -m
apache_beam.runners.worker.sdk_worker_main`` and hands it no pipeline
options, so ``--default_sdk_harness_log_level`` never reaches it: every
worker prints its start-up, channels and shut-down at INFO, plus Beam's
import-time "apitools not found", straight into the user's terminal.
:class:`LocalMultiProcessRunner` is that runner with one change, its workers
start as ``python -m beam_curator.runners.sdk_worker``, which sets up
logging (at ``beam_curator.logs.worker_log_level()``, passed in the
environment) before Beam is imported, ignores the terminal's Ctrl-C, and then
runs Beam's own worker. Beam starts the command through ``sh -c``; ``exec``
puts the worker in the shell's place, so that no shell dies of the Ctrl-C.
"""

from __future__ import annotations

import sys

from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import SubprocessSDKEnvironment


_WORKER_MODULE = "beam_curator.runners.sdk_worker"  # by name: imported here, ``-m`` would run a second copy


class LocalMultiProcessRunner(FnApiRunner):
    """FnApiRunner whose worker processes start as ``python -m beam_curator.runners.sdk_worker``.

    FnApiRunner picks the workers' command when a run starts (from
    ``direct_running_mode``); this attribute keeps ours whatever it assigns.
    """

    @property
    def _default_environment(self) -> SubprocessSDKEnvironment:
        return SubprocessSDKEnvironment.from_command_string(f"exec {sys.executable} -m {_WORKER_MODULE}")

    @_default_environment.setter
    def _default_environment(self, _: object) -> None:
        pass

