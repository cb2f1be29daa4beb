"""The settings of the filters and modifiers a stage holds, as plain JSON values for its fingerprint.

A checkpoint records each stage's fingerprint, so that a rerun notices a changed pipeline. The
default fingerprint (``ProcessingStage.fingerprint``) names a filter or a function by its type alone,
so ``WordCountFilter(min_words=50)`` and ``WordCountFilter(min_words=80)`` would look alike and a
rerun would keep the first run's output; these describe them by their settings instead.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from beam_curator.stages.base import plain


def describe(function: Any) -> object:
    """A filter, modifier, bound method or function as a JSON value that changes with its settings:
    an object by its class and its attributes, a function by its qualified name (a lambda's body is
    not seen: name the function to have its changes noticed), a ``functools.partial`` by its function
    and arguments."""
    if inspect.ismethod(function):
        return {"method": function.__name__, "of": describe(function.__self__)}
    if inspect.isroutine(function) or isinstance(function, type):
        return _qualified_name(function)
    if isinstance(function, functools.partial):
        return {"partial": describe(function.func), "args": _setting(list(function.args)),
                "keywords": {key: _setting(value) for key, value in sorted(function.keywords.items())}}
    settings = vars(function) if hasattr(function, "__dict__") else {}
    return {"class": _qualified_name(type(function)),
            "settings": {key: _setting(value) for key, value in sorted(settings.items())}}


def _setting(value: Any) -> object:
    """One attribute of a filter or modifier: patterns by their text, functions by name, named
    tuples (such as ftfy's ``TextFixerConfig``) by field, anything else as ``plain`` gives it."""
    if isinstance(value, re.Pattern):
        return {"pattern": value.pattern, "flags": int(value.flags)}
    if inspect.isroutine(value):
        return _qualified_name(value)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {key: _setting(item) for key, item in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [_setting(item) for item in value]
    return plain(value)


def _qualified_name(function: Any) -> str:
    """``module.qualname``; a method of a built-in type (``str.upper``) has its module on its class."""
    module = getattr(function, "__module__", None) or getattr(getattr(function, "__objclass__", None), "__module__", "")
    return f"{module}.{function.__qualname__}"
