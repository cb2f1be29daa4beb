"""NeMo Curator's parameter names for the semantic workflows.

Users come with NeMo Curator code: its names are accepted beside ours (one
setting given under two names is an error), and NeMo's positional arguments
where ours differ are refused with what to pass instead. What every workflow
checks at construction is in ``beam_curator.workflows.parameters``.
"""

from __future__ import annotations

from typing import Any


def pick(owner: str, default: Any, **named: Any) -> Any:
    """The value given under one of several names of one setting (None: not given), else ``default``."""
    given = {name: value for name, value in named.items() if value is not None}
    if len(given) > 1:
        raise TypeError(f"{owner}: {' and '.join(given)} name the same setting; give only one of them")
    return next(iter(given.values()), default)


def check_cache_path(owner: str, cache_path: object, nemo_argument: str, nemo_values: tuple[str, ...] = ()) -> None:
    """NeMo Curator code that passes ``nemo_argument`` (one of ``nemo_values``,
    or not a string) where our signature has ``cache_path`` gets told so,
    rather than a cache folder named after it."""
    if cache_path is not None and (not isinstance(cache_path, str) or cache_path in nemo_values):
        raise TypeError(
            f"{owner}: cache_path must be a folder, got {cache_path!r}; NeMo Curator has {nemo_argument} in this "
            f"position: pass {nemo_argument}= by name"
        )
