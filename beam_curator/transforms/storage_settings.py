"""fsspec's settings of the driver, carried to the workers that open files.

Object-store options (credentials, endpoints: NeMo's ``storage_options``,
``fsspec.config.conf``, ``FSSPEC_<PROTOCOL>`` variables) are set in the
driver's process. Workers on Flink, Spark or Dask run elsewhere, started
before the run with an environment of their own, and open every input,
output, cache file and checkpoint mark by URL through fsspec: the driver's
settings travel inside the DoFns that open files and become the worker's
fsspec defaults before they open any. They are never part of a stage's
settings, so no checkpoint, log or summary records them.
"""

from __future__ import annotations

import copy
from typing import Any

import fsspec.config

StorageSettings = dict[str, dict[str, Any]]


def driver_settings() -> StorageSettings:
    """fsspec's defaults per protocol in this process, as they are now."""
    return copy.deepcopy(fsspec.config.conf)


def apply_settings(settings: StorageSettings) -> None:
    """Make the driver's defaults this process's, over what the worker had (they are this run's)."""
    for protocol, options in settings.items():
        fsspec.config.conf[protocol] = {**fsspec.config.conf.get(protocol, {}), **options}
