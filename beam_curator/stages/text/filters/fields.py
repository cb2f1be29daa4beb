"""One setting per filter: how ``Score``, ``Filter`` and ``ScoreFilter`` spread their field and
``invert`` settings over a list of filters, by NeMo Curator's rules.

A single value is shared by every filter, except where sharing would lose data: each filter's score
needs a column of its own, and ``Filter`` reads one stored score per filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.functions import function_name


def per_function(value: Any, count: int, setting: str, kind: type, *, shared: bool = True,
                 optional: bool = False) -> list[Any]:
    """``value`` as a list of one setting per filter.

    ``value`` is one setting of type ``kind`` or a list of them (``None`` entries too where
    ``optional``); one setting, alone or in a list of one, is shared by all filters when ``shared``,
    and is refused for more than one filter otherwise. A list of several must have one per filter.
    """
    if value is None and not optional:
        raise ValueError(f"{setting} cannot be None")
    values = value if isinstance(value, list) else [value]
    for item in values:
        if not (isinstance(item, kind) or (optional and item is None)):
            raise TypeError(f"{setting} must be a {kind.__name__} or a list of them, one per filter: {value!r}")
    if len(values) == 1 and count > 1:
        if not shared:
            raise ValueError(f"{setting} must be a list of {count} names, one per filter, "
                             f"when {count} filters are given: {value!r}")
        return values * count
    if len(values) != count:
        raise ValueError(f"{setting} has {len(values)} entries for {count} filter(s): {value!r}")
    return values


def stage_name(functions: list[DocumentFilter | Callable[..., Any]], kind: str) -> str:
    """A filter's own name, ``<kind>_fn`` for a lone function, or ``<kind>_chain_of_<names>`` for a list."""
    if len(functions) == 1:
        only = functions[0]
        return only.name if isinstance(only, DocumentFilter) else f"{kind}_fn"
    return f"{kind}_chain_of_" + "_".join(function_name(function) for function in functions)
