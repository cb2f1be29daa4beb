"""``_target_`` entries: the class a path names, checked parameters, and the object made from them.

A target is a class of ``beam_curator.stages``; NeMo Curator's ``nemo_curator.stages...`` paths are read
as ours, since our classes sit at its paths. Only classes of the package are made, so a configuration
file cannot run arbitrary code. Anything wrong (a class we lack, a misspelt parameter, a constructor
refusing a value) is a ``ConfigError`` naming the file's line and, where one is close, the valid name
meant; it is raised while the file is read, before any work.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import re
from functools import cache
from typing import Any

from beam_curator.configs.yaml_lines import Located
from beam_curator.errors import CuratorError

TARGET = "_target_"
OURS, NEMO = "beam_curator.", "nemo_curator."
_SEARCHED = "beam_curator.stages.text"  # where the catalog of valid targets is listed from
_VARIABLE = re.compile(r"\$\{([^}]+)\}")


class ConfigError(CuratorError):
    """A configuration file that cannot run as written; the message names its line."""


def ours(target: str) -> str:
    """The path of ``target`` in this package: NeMo Curator's prefix replaced by ours."""
    return OURS + target[len(NEMO):] if target.startswith(NEMO) else target


@cache
def catalog() -> dict[str, type]:
    """Every public class of ``beam_curator.stages.text`` by each path it can be imported at: what a
    misspelt target is compared with."""
    from beam_curator.stages.base import ProcessingStage
    from beam_curator.stages.text.filters.doc_filter import DocumentFilter
    from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier

    package = importlib.import_module(_SEARCHED)
    modules = [package] + [importlib.import_module(info.name)
                           for info in pkgutil.walk_packages(package.__path__, f"{_SEARCHED}.")]
    return {f"{module.__name__}.{name}": value for module in modules for name, value in vars(module).items()
            if not name.startswith("_") and isinstance(value, type)
            and issubclass(value, (ProcessingStage, DocumentFilter, DocumentModifier))}


def closest(name: str, valid: list[str]) -> str:
    """`` (did you mean X?)`` for the valid name closest to ``name``, or nothing when none is close."""
    found = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""


def resolve(target: Any, where: str) -> type:
    """The class ``target`` names; an error at ``where`` naming the closest target we have if it is not one."""
    if not isinstance(target, str) or not ours(target).startswith(f"{OURS}stages."):
        raise ConfigError(f"{where}: {TARGET} {target!r} is not a class of beam_curator.stages (or nemo_curator.stages)")
    module_name, _, name = ours(target).rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        found = None
    if isinstance(found, type):
        return found
    meant = closest_target(ours(target))
    suggestion = f" (did you mean {meant.replace(OURS, NEMO if target.startswith(NEMO) else OURS, 1)}?)" if meant else ""
    raise ConfigError(f"{where}: unknown filter or stage {target}: beam_curator has no {ours(target)}{suggestion}")


def closest_target(path: str) -> str | None:
    """The catalog's path closest to ``path``: of the classes named most like its class, the one at the
    most similar path (so a class at another module is found, and a misspelt one at its own)."""
    by_name: dict[str, list[str]] = {}
    for known in catalog():
        by_name.setdefault(known.rpartition(".")[2], []).append(known)
    names = difflib.get_close_matches(path.rpartition(".")[2], list(by_name), n=1, cutoff=0.75)
    if not names:
        return None
    return max(by_name[names[0]], key=lambda known: difflib.SequenceMatcher(None, known, path).ratio())


def check_parameters(cls: type, entry: Located, skip: tuple[str, ...] = ()) -> None:
    """Each key of ``entry`` (but ``_target_`` and ``skip``) is a parameter of ``cls``, and every
    parameter without a default is given."""
    parameters = {name: parameter for name, parameter in inspect.signature(cls).parameters.items()
                  if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)}
    for key in entry:
        if key != TARGET and key not in skip and key not in parameters:
            raise ConfigError(f"{entry.where(key)}: {cls.__name__} has no parameter {key!r}"
                              f"{closest(str(key), list(parameters))}; its parameters: {', '.join(parameters)}")
    missing = [name for name, parameter in parameters.items()
               if parameter.default is parameter.empty and name not in entry and name not in skip]
    if missing:
        raise ConfigError(f"{entry.where(TARGET)}: {cls.__name__} needs {', '.join(missing)}")


def build(value: Any, variables: dict[str, Any], where: str) -> Any:
    """``value`` with each ``${name}`` replaced by ``variables[name]`` and each mapping holding a
    ``_target_`` made into its object, inner ones first."""
    if isinstance(value, str):
        return _interpolated(value, variables, where)
    if isinstance(value, list):
        return [build(item, variables, where) for item in value]
    if isinstance(value, Located):
        if TARGET not in value:
            return {key: build(item, variables, value.where(key)) for key, item in value.items()}
        cls = resolve(value[TARGET], value.where(TARGET))
        check_parameters(cls, value)
        settings = {key: build(item, variables, value.where(key)) for key, item in value.items() if key != TARGET}
        try:
            return cls(**settings)
        except (ValueError, TypeError, ImportError, CuratorError) as error:
            raise ConfigError(f"{value.where(TARGET)}: {cls.__name__}: {error}") from error
    return value


def _interpolated(text: str, variables: dict[str, Any], where: str) -> Any:
    """OmegaConf's ``${name}`` of a top-level value: the value itself when it is the whole string,
    else its text in place. ``???`` (OmegaConf's mandatory value) left unset is an error."""
    def value_of(name: str) -> Any:
        if name not in variables:
            raise ConfigError(f"{where}: ${{{name}}} names no top-level value{closest(name, list(variables))}")
        if variables[name] == "???":
            raise ConfigError(f"{where}: ${{{name}}} is ??? (mandatory): give {name} a value in the file")
        return variables[name]

    whole = _VARIABLE.fullmatch(text)
    if whole:
        return value_of(whole.group(1).strip())
    return _VARIABLE.sub(lambda match: str(value_of(match.group(1).strip())), text)
