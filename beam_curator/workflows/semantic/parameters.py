"""NeMo Curator's parameter names for the semantic workflows, and what is checked at construction.

Users come with NeMo Curator code: its names are accepted beside ours (one
setting given under two names is an error), misspelt names are refused with
the closest valid ones before anything runs, and runner settings are
checked against the runner presets then too, not when a phase starts.
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


def pick(owner: str, default: Any, **named: Any) -> Any:
    """The value given under one of several names of one setting (None: not given), else ``default``."""
    given = {name: value for name, value in named.items() if value is not None}
    if len(given) > 1:
        raise TypeError(f"{owner}: {' and '.join(given)} name the same setting; give only one of them")
    return next(iter(given.values()), default)


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


def check_cache_path(owner: str, cache_path: object, nemo_argument: str, nemo_values: tuple[str, ...] = ()) -> None:
    """NeMo Curator code that passes ``nemo_argument`` (one of ``nemo_values``,
    or not a string) where our signature has ``cache_path`` gets told so,
    rather than a cache folder named after it."""
    if cache_path is not None and (not isinstance(cache_path, str) or cache_path in nemo_values):
        raise TypeError(
            f"{owner}: cache_path must be a folder, got {cache_path!r}; NeMo Curator has {nemo_argument} in this "
            f"position: pass {nemo_argument}= by name"
        )


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
