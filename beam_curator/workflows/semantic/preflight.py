"""Checks that run before any expensive work: paths that cannot be written,
and input whose ids or texts cannot work, found from each file's first
record (a read of a few bytes per file) instead of hours into embedding."""

from __future__ import annotations

import json
import posixpath
import uuid
from contextlib import contextmanager
from typing import Iterator

import fsspec
import pyarrow as pa

from beam_curator.running.lock import run_lock
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.overlap import check_paths
from beam_curator.stages.io.parquet import parquet_metadata
from beam_curator.stages.io.partitioning import expand_paths
from beam_curator.workflows.phases import remove_tree
from beam_curator.workflows.semantic.removal import count_records


def check_writable_folders(folders: dict[str, str]) -> None:
    """Each ``{parameter: folder}`` can be created and written."""
    for parameter, url in folders.items():
        fs, path = fsspec.core.url_to_fs(url)
        ancestor, parent = path.rstrip("/"), None
        while ancestor and ancestor != parent:
            if fs.isfile(ancestor):
                raise CuratorInputError(
                    f"{parameter} {url!r} lies under {ancestor!r}, which is a file, not a folder; choose another path"
                )
            ancestor, parent = posixpath.dirname(ancestor), ancestor
        probe = f"{path.rstrip('/')}/.probe-{uuid.uuid4().hex}"
        try:
            fs.makedirs(path, exist_ok=True)
            with fs.open(probe, "wb") as handle:
                handle.write(b"ok")
            fs.rm_file(probe)  # one object: DeleteObject, not the bulk DeleteObjects some S3 servers refuse
        except OSError as error:
            raise CuratorInputError(
                f"{parameter} {url!r} is not writable ({error}); fix its permissions or choose another path"
            ) from error


def _first_jsonl_record(path: str, skip_bad: bool) -> tuple[int, dict] | None:
    """The first record of a JSON Lines file, parsed as the reader will parse it (a UTF-8 byte-order
    mark is allowed). A first line that is not a JSON object is an error here, before any work, unless
    bad records are skipped; then the first good one is the file's first record."""
    with fsspec.open(path, "rb", compression="infer") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
                problem = "" if isinstance(record, dict) else f"expected a JSON object, found {type(record).__name__}"
            except UnicodeDecodeError as error:
                problem = f"not UTF-8 (byte {error.start} is {raw[error.start]:#04x})"
            except ValueError as error:
                problem = f"malformed JSON ({error})"
            if not problem:
                return number, record
            if not skip_bad:
                raise CuratorInputError(
                    f"{path}, line {number}: {problem}; every input file must be JSON Lines (one JSON object per "
                    "line): fix or move the file, or pass on_bad_record='skip' (--on-bad-record skip) to skip such lines"
                )
    return None


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else type(value).__name__


def _arrow_kind(kind: pa.DataType) -> str:
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_floating(kind):
        return "float"
    return str(kind)


def _first_kinds(path: str, filetype: str, fields: list[str], skip_bad: bool) -> tuple[str, dict[str, str]]:
    """Where the first record is, and the kind of each field's value there."""
    if filetype == "parquet":
        schema = parquet_metadata(path).schema.to_arrow_schema()
        return "schema", {field: _arrow_kind(schema.field(field).type) for field in fields if field in schema.names}
    found = _first_jsonl_record(path, skip_bad)
    if found is None:
        return "", {}
    number, record = found
    return f"line {number}", {field: _kind(record[field]) for field in fields if field in record}


def check_enough_records(input_path: str | list[str], paths: list[str], filetype: str, n_clusters: int) -> None:
    """At least ``n_clusters`` records in ``paths``, the files of ``input_path``
    (reading only until that many are found)."""
    found = 0
    for path in paths:
        found += count_records(path, filetype, n_clusters - found)
        if found >= n_clusters:
            return
    if not found:
        raise CuratorInputError(
            f"input {input_path!r} holds no records to deduplicate; check input_path and input_filetype"
        )
    raise CuratorInputError(
        f"n_clusters={n_clusters} is more than the {found} records in {input_path!r}; pass n_clusters <= {found}"
    )


def check_input_files(
    paths: list[str], filetype: str, text_field: str, id_field: str | None, on_bad_record: str = "raise",
) -> None:
    """Every file's first record parses; texts must be strings; ids integers or strings, one kind across all files."""
    first_of_kind: dict[str, str] = {}
    for path in paths:
        where, kinds = _first_kinds(path, filetype, [text_field] + ([id_field] if id_field else []),
                                    skip_bad=on_bad_record == "skip")
        text = kinds.get(text_field)
        if text not in (None, "string", "null"):
            raise CuratorInputError(
                f"{path}, {where}: text_field {text_field!r} holds a {text}, not text; "
                "point text_field at the column of texts, or fix the file"
            )
        if id_field is None or id_field not in kinds:
            continue
        kind = kinds[id_field]
        if kind not in ("integer", "string"):
            raise CuratorInputError(
                f"{path}, {where}: id_field {id_field!r} holds a {kind}; ids must be integers or strings "
                "(leave id_field unset to generate ids)"
            )
        first_of_kind.setdefault(kind, path)
        if len(first_of_kind) > 1:
            (one, first), (other, second) = first_of_kind.items()
            raise CuratorInputError(
                f"id_field {id_field!r} holds {one}s in {first} but {other}s in {second}; "
                "ids must be of one kind across all files"
            )





@contextmanager
def checked_text_input(
    input_path: str | list[str], folders: dict[str, str], extensions: tuple[str, ...], filetype: str,
    text_field: str, id_field: str | None, on_bad_record: str, clear_output: bool, wait: bool,
    records_needed: int = 1,
) -> Iterator[None]:
    """A text workflow's start: input checked first, folders after (so that a
    run failing a check creates or clears nothing), then ``folders`` held
    against other runs (``wait``: until they are free) and, with
    ``clear_output``, emptied, as NeMo Curator always starts."""
    check_paths({"input_path": input_path}, folders)
    paths = expand_paths(input_path, extensions)
    check_input_files(paths, filetype, text_field, id_field, on_bad_record)
    check_enough_records(input_path, paths, filetype, records_needed)
    check_writable_folders(folders)
    with run_lock(folders, wait=wait):
        if clear_output:
            for folder in set(folders.values()):
                remove_tree(folder)
            check_writable_folders(folders)
        yield
