"""Refusing misspelt keyword arguments when an object is built, naming the closest valid ones.

A workflow or stage that swallowed unknown keywords would fail minutes later
on a cluster, or never, silently ignoring a setting; one that raised
Python's bare ``TypeError`` would not say what was meant.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from typing import Callable, Iterable


def refuse_unknown(given: Iterable[str], valid: Iterable[str], owner: str) -> None:
    """Raise ``TypeError`` naming each of ``given`` that is not in ``valid``,
    with the closest valid names."""
    valid = sorted(set(valid))
    unknown = [name for name in given if name not in valid]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
        hints.append(f"{name!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    raise TypeError(
        f"{owner} got unknown keyword argument(s) {', '.join(hints)}; it takes {', '.join(valid)}"
    )


@functools.lru_cache(maxsize=None)
def keyword_names(init: Callable[..., None]) -> tuple[str, ...] | None:
    """The keywords ``init`` takes, or None when it takes ``**kwargs``."""
    parameters = inspect.signature(init).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return tuple(p.name for p in parameters if p.name != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL)
