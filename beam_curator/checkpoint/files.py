"""Records of written files, and their cheap verification.

Whatever a partition or a phase produced is remembered as
``[name relative to a root folder, bytes, records]``. Names are relative so
that a moved or copied folder still matches its records. Checking a set of
records lists each folder involved once (one call per folder, not per file,
which matters on object stores) and compares sizes: a file deleted,
truncated or replaced by other bytes of another length is found without
reading it.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from typing import Iterable

import fsspec

FileRecord = list  # [relative name, bytes, records]


def join(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def relative_name(root: str, path: str) -> str:
    """``path`` relative to ``root`` (both URLs or local paths of one filesystem)."""
    _, root_path = fsspec.core.url_to_fs(root)
    _, file_path = fsspec.core.url_to_fs(path)
    return posixpath.relpath(file_path, root_path.rstrip("/") or "/")


def describe_files(root: str, paths: Iterable[str]) -> list[FileRecord]:
    """Records of files as they are now (sizes from one listing per folder;
    the record count is not known without reading them)."""
    names = [relative_name(root, path) for path in paths]
    sizes = _sizes(root, names)
    return [[name, sizes.get(name), None] for name in names]


def _sizes(root: str, names: Iterable[str]) -> dict[str, int]:
    fs, root_path = fsspec.core.url_to_fs(root)
    by_folder: dict[str, list[str]] = defaultdict(list)
    for name in names:
        by_folder[posixpath.dirname(name)].append(name)
    sizes: dict[str, int] = {}
    for folder in by_folder:
        path = posixpath.join(root_path, folder) if folder else root_path
        try:
            listing = fs.ls(path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            continue
        prefix = f"{folder}/" if folder else ""
        for info in listing:
            if info.get("type") == "file":
                sizes[prefix + info["name"].rstrip("/").rsplit("/", 1)[-1]] = int(info["size"])
    return sizes


def check_files(root: str, records: Iterable[FileRecord]) -> list[str]:
    """Problems with recorded files under ``root`` (empty when all are there,
    at their recorded sizes)."""
    records = list(records)
    return _problems(root, records, _sizes(root, (record[0] for record in records)))


def check_partitions(root: str, outputs: dict[str, dict[str, list[list[FileRecord]]]]) -> dict[str, list[str]]:
    """Problems with each partition's outputs (``Snapshot.outputs``), found
    with one listing per folder for all of them. Per terminal task, one of
    the recorded candidates (a task written again leaves several) must match."""
    names = (record[0] for tasks in outputs.values() for candidates in tasks.values()
             for records in candidates for record in records)
    sizes = _sizes(root, names)
    found: dict[str, list[str]] = {}
    for key, tasks in outputs.items():
        problems = []
        for candidates in tasks.values():
            results = [_problems(root, records, sizes) for records in candidates]
            if all(results):
                problems.extend(results[-1])
        if problems:
            found[key] = problems
    return found


def _problems(root: str, records: list[FileRecord], sizes: dict[str, int]) -> list[str]:
    problems = []
    for name, size, *_ in records:
        found = sizes.get(name)
        if found is None:
            problems.append(f"{join(root, name)} is missing")
        elif size is not None and found != size:
            problems.append(f"{join(root, name)} has {found} bytes where {size} were written")
    return problems
