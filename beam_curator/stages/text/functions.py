"""The filters or modifiers a stage is given: one or a list, each an object of the stage's kind
(``DocumentFilter``, ``DocumentModifier``) or a plain function, and the names stages take from them."""

from __future__ import annotations

from typing import Any


def as_functions(functions: Any, setting: str, kind: type) -> list[Any]:
    """The object or function, or the list of them, as a non-empty list of ``kind`` objects and callables."""
    listed = list(functions) if isinstance(functions, list) else [functions]
    if not listed:
        raise ValueError(f"{setting} is an empty list: give a {kind.__name__}, a function or a list of them")
    for function in listed:
        if not (isinstance(function, kind) or callable(function)):
            raise TypeError(f"{setting} must be a {kind.__name__}, a callable or a list of them, not {function!r}")
    return listed


def function_name(function: Any) -> str:
    """A filter's or modifier's ``name``, or a function's ``__name__``."""
    name = getattr(function, "name", None)
    if isinstance(name, str):
        return name
    return getattr(function, "__name__", type(function).__name__)
