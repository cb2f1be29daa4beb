"""Hive folder names, ``<column>=<value>``, as pyarrow, Spark and DuckDB write and read them.

A value becomes part of a path, so it is percent-encoded (``urllib.parse.quote``
with no safe characters, as pyarrow's ``segment_encoding="uri"``): a ``/`` or a
``..`` cannot leave its folder, and ``%``, ``=`` and characters outside ASCII
come back exactly. A null or an empty value becomes ``__HIVE_DEFAULT_PARTITION__``,
the name Hive, Spark and pyarrow give a null: Spark refuses a folder ``language=``
with no value, so an empty string reads back as null, as Spark writes it.
"""

from __future__ import annotations

from collections import defaultdict
from urllib.parse import quote, unquote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.errors import CuratorSettingsError

NULL_FOLDER = "__HIVE_DEFAULT_PARTITION__"


def partition_folder(columns: list[str], values: tuple[str | None, ...]) -> str:
    """``language=de`` (or ``a=1/b=x`` for several columns) for the values, as strings or None."""
    return "/".join(f"{column}={quote(value, safe='') if value else NULL_FOLDER}"
                    for column, value in zip(columns, values))


def split_by_columns(table: pa.Table, columns: list[str]) -> dict[str, pa.Table]:
    """The rows of ``table`` by their values of ``columns``, as ``{folder: rows without those
    columns}`` in folder order, each keeping the rows' order; values are written as pyarrow
    casts them to strings (``true``, ``3``, ``0.5``). No rows, no folders."""
    if table.num_rows == 0:
        return {}
    absent = [column for column in columns if column not in table.column_names]
    if absent:
        raise CuratorSettingsError(f"partition_cols {absent} are not fields of the documents "
                                   f"(they have {', '.join(table.column_names)})")
    keys = [pc.cast(table.column(column), pa.string()).to_pylist() for column in columns]
    rows: dict[str, list[int]] = defaultdict(list)
    for index, key in enumerate(zip(*keys)):
        rows[partition_folder(columns, key)].append(index)
    rest = table.drop_columns(columns)
    return {folder: rest.take(pa.array(indices, pa.int64())) for folder, indices in sorted(rows.items())}


def remove_stale(path: str, name: str, columns: list[str], written: set[str]) -> None:
    """Delete ``<folder>/<name>`` from the partition folders under ``path`` other than ``written``:
    what an earlier run of the same task wrote for values its documents no longer have (its input
    changed since). Costs one listing per folder level and a check per other folder."""
    fs, root = fsspec.core.url_to_fs(path)
    fs.invalidate_cache(root)  # folders other workers made since this process listed them
    level = [root.rstrip("/")]
    for column in columns:
        try:
            level = [entry["name"].rstrip("/") for folder in level for entry in fs.ls(folder, detail=True)
                     if entry["type"] == "directory"
                     and entry["name"].rstrip("/").rsplit("/", 1)[-1].startswith(f"{column}=")]
        except FileNotFoundError:  # nothing was ever written here
            return
    stale = [f"{folder}/{name}" for folder in level if folder[len(root.rstrip('/')) + 1:] not in written]
    stale = [file for file in stale if fs.exists(file)]
    if stale:
        fs.rm(stale)


def partition_values(path: str, roots: list[str]) -> dict[str, str | None]:
    """The values the ``<column>=<value>`` folders between a file and the input it was listed from
    give it (``{}`` where there are none, or where the input named the file itself). ``roots``
    are the inputs as given: folders, globs or files."""
    _, file_path = fsspec.core.url_to_fs(path)
    for root in roots:
        _, base = fsspec.core.url_to_fs(root)
        base = listing_base(base).rstrip("/")
        if file_path.startswith(base + "/"):
            folders = file_path[len(base) + 1:].split("/")[:-1]
            return dict(_column_value(folder) for folder in folders if "=" in folder)
    return {}


def listing_base(root: str) -> str:
    """The folder a listing of ``root`` starts from: ``root`` itself, or for a glob
    (``data/*/part-*.jsonl``) the folder before its first wildcard."""
    if not any(character in root for character in "*?["):
        return root
    return root.split("*")[0].split("?")[0].split("[")[0].rsplit("/", 1)[0] + "/"


def _column_value(folder: str) -> tuple[str, str | None]:
    column, value = folder.split("=", 1)
    return column, None if value in ("", NULL_FOLDER) else unquote(value)
