"""What every workflow (exact, fuzzy, semantic) checks when it is constructed, and the settings it applies then.

A workflow refuses a bad setting before anything runs, as the package's own
settings error naming the parameter: runner settings against the runner
presets, counts that must be positive; object-store options and verbosity
take effect at construction too, so that the first phase already has them.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
from typing import Any, Callable

import fsspec

from beam_curator.errors import CuratorError, CuratorSettingsError
from beam_curator.pipeline import Pipeline
from beam_curator.runners.options import SETTINGS, runner_args
from beam_curator.stages.arguments import refuse_unknown
from beam_curator.transforms.stateful_completion import check_completion

# The runner presets' settings, and the options of ``Pipeline.run`` itself (progress, worker start-up).
RUNNER_SETTINGS = frozenset().union(*SETTINGS.values(), [
    parameter.name for parameter in inspect.signature(Pipeline.run).parameters.values()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name != "beam_args"
])


def settings_checked(init: Callable[..., None]) -> Callable[..., None]:
    """For a workflow's ``__init__``: a value it refuses (a ``ValueError``
    from any check it calls) becomes a ``CuratorSettingsError``, the
    package's own error about settings, which the command prints alone."""

    @functools.wraps(init)
    def checked(self: object, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except CuratorError:
            raise
        except ValueError as error:
            raise CuratorSettingsError(str(error)) from error

    return checked


def check_positive_integers(*, unset_allowed: bool = False, **values: object) -> None:
    """Each of ``values`` (``name=value``) a whole number of 1 or more, else a
    ``ValueError`` naming that parameter, its value and what is valid, so that
    a 0 or a negative is refused by name before any work (not later, in a
    check of another parameter it feeds). ``unset_allowed``: None passes (the default applies)."""
    for name, value in values.items():
        if value is None and unset_allowed:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}; pass a whole number of 1 or more")


def check_runner_settings(workflow: object, runner: str | None, settings: dict[str, object]) -> None:
    """The keywords ``workflow.__init__`` took into ``**runner_settings``:
    unknown names are refused (the closest parameters or runner settings
    suggested); known ones must suit ``runner``."""
    parameters = inspect.signature(type(workflow).__init__).parameters.values()
    named = [p.name for p in parameters if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
    refuse_unknown(settings, [*named, *RUNNER_SETTINGS], type(workflow).__name__)
    check_completion(settings.get("completion", "fused"), runner)  # type: ignore[arg-type]
    timeout = settings.get("worker_start_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"worker_start_timeout must be a number of seconds above 0 (or None: no limit), got {timeout!r}")
    if runner:
        pipeline_options = RUNNER_SETTINGS - frozenset().union(*SETTINGS.values())
        # The settings alone: whether the cluster answers is checked when the run starts.
        runner_args(runner, reach=False, **{k: v for k, v in settings.items() if k not in pipeline_options})  # type: ignore[arg-type]


def apply_storage_options(owner: str, **where: tuple[str | list[str], dict[str, Any] | None]) -> None:
    """NeMo's ``read_kwargs`` / ``write_kwargs`` / ``cache_kwargs`` carry
    ``storage_options`` (credentials, endpoints) for object stores; each is
    given here with the path it is for. Every file is opened by URL through
    fsspec, so the options become fsspec's defaults for that path's protocol,
    in this process and, through ``FSSPEC_<PROTOCOL>`` environment
    variables, in worker processes started after it."""
    for name, (path, kwargs) in where.items():
        if not kwargs:
            continue
        refuse_unknown(kwargs, ["storage_options"], f"{owner} {name}")
        first = path[0] if isinstance(path, list) else path
        protocol = fsspec.core.split_protocol(first)[0] or "file"
        merged = {**fsspec.config.conf.get(protocol, {}), **kwargs["storage_options"]}
        fsspec.config.conf[protocol] = merged
        os.environ[f"FSSPEC_{protocol.upper()}"] = json.dumps(merged)


def set_verbosity(verbose: bool) -> None:
    """``verbose=False`` keeps the workflows' progress messages (INFO) out of
    the log; ``True`` leaves the level to the application's logging setup."""
    logging.getLogger("beam_curator.workflows").setLevel(logging.NOTSET if verbose else logging.WARNING)
