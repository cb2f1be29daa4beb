"""Folders derived from a model (an ONNX export, a distilled static model), built once and reused.

A derived folder costs seconds to minutes to build, so it is cached under
``$XDG_CACHE_HOME/beam_curator/<kind>`` (``~/.cache/...`` by default), not
beside its model: the bundled model lives inside an installed package, which
is no place to write. Each folder is known by a *key*, the digest of the
source model's files and of the settings that shape the build. The folder
is reused only when its ``build.json`` holds that key and the SHA-256 of
every file it lists; it is built in a temporary folder and renamed into
place when complete, so an interrupted or damaged build is never loaded: it
is built again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from beam_curator.stages.io.fingerprint import file_digest

RECORD_FILE = "build.json"


def default_cache(kind: str) -> Path:
    """``$XDG_CACHE_HOME/beam_curator/<kind>`` (``~/.cache/beam_curator/<kind>`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "beam_curator" / kind


def build_key(model_dir: str | Path, settings: dict[str, Any]) -> str:
    """Digest of every file of ``model_dir`` (name and bytes) and of ``settings`` (JSON-serialisable)."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    root = Path(model_dir)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + file_digest(path).encode())
    return digest.hexdigest()


def cached_build(folder: Path, key: str, build: Callable[[Path], dict[str, Any]]) -> Path:
    """``folder``, once it holds a verified build made under ``key``.

    ``build(target)`` writes every file of the build into the empty folder
    ``target`` and returns what else the record should say (shown to users
    who look, never trusted); it runs only when ``folder`` is missing,
    stale or damaged, and its result replaces the folder whole.
    """
    if verified(folder, key):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    partial.chmod(0o755)  # readable like any cache folder, not mkdtemp's owner-only
    try:
        notes = build(partial)
        files = {str(path.relative_to(partial)): file_digest(path)
                 for path in sorted(partial.rglob("*")) if path.is_file()}
        (partial / RECORD_FILE).write_text(json.dumps({**notes, "key": key, "files": files}, indent=1))
        if folder.exists():  # damaged or stale: replaced by the complete build
            shutil.rmtree(folder)
        try:
            partial.rename(folder)
        except OSError:  # another process renamed its complete build first
            if not verified(folder, key):
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def verified(folder: Path, key: str) -> bool:
    """True when ``folder`` holds a complete build made under ``key``, every listed file intact."""
    try:
        record = json.loads((folder / RECORD_FILE).read_text())
        files = record["files"]
        return record["key"] == key and bool(files) and all(
            file_digest(folder / name) == digest for name, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
