"""JSON Lines: reader and writer."""

from __future__ import annotations

import functools
import json
from typing import BinaryIO, Callable, Iterator

import fsspec
import fsspec.utils
import pyarrow as pa

from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.reader import FileReader, FileReaderStage, FileRecords
from beam_curator.stages.io.writer import FileWriterStage
from beam_curator.tasks import FileBlock

_CHUNK = 8 << 20  # bytes read at a time to count the lines before a block


class JsonlReaderStage(FileReaderStage):
    """Parses line by line so that every problem is reported with its line number.

    A block is a byte range ``[start, stop)`` of an uncompressed file and owns
    the lines that start in it: its reader skips the end of a line begun
    before ``start`` and reads on past ``stop`` to the end of its last line,
    so the blocks of a file hold each of its lines exactly once. Lines are
    split at ``\\n`` alone (a ``\\r`` before it is whitespace to JSON), so a
    multibyte character is never cut."""

    name = "jsonl_reader"

    @staticmethod
    def split_file(path: str, size: int, blocksize: int) -> list[tuple[int, int]]:
        """Equal byte ranges of about ``blocksize``; a compressed file is read whole."""
        if fsspec.utils.infer_compression(path) is not None:
            return []
        count = -(-size // blocksize)
        return [(size * index // count, size * (index + 1) // count) for index in range(count)]

    def rows_before(self, path: str, block: FileBlock) -> int:
        """The lines before the block's first line: its newlines are counted,
        which reads the file up to the block (only done where row numbers or
        a bad record's line number are wanted)."""
        with fsspec.open(path, "rb") as handle:
            first = _first_line_start(handle, block.start)
            handle.seek(0)
            lines = 0
            while first > 0:
                chunk = handle.read(min(first, _CHUNK))
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                first -= len(chunk)
        return lines

    def read_file(self, path: str, block: FileBlock | None = None) -> FileRecords:
        records, rows, skipped, fields = [], [], 0, self.fields_in(path)
        lines_before = functools.cache(lambda: self.rows_before(path, block) if block else 0)
        with fsspec.open(path, "rb", compression=None if block else "infer") as handle:
            for row, raw in enumerate(_lines(handle, block)):
                first_of_file = row == 0 and (block is None or block.start == 0)
                record = self._parse(path, raw, lambda: lines_before() + row + 1, first_of_file, fields)
                if record is None:
                    skipped += raw.strip() != b""
                    continue
                records.append(record)
                rows.append(row)
        if not records:
            table = pa.table({name: pa.array([], pa.string()) for name in fields or []})
            return FileRecords(table, pa.array([], pa.int64()), skipped)
        try:
            # With no field left to read (the file's folders give them all), the records still count.
            table = pa.Table.from_pylist(records) if fields != [] else pa.table({"": pa.nulls(len(records))}).select([])
            return FileRecords(table, pa.array(rows, pa.int64()), skipped)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            lines = [lines_before() + row + 1 for row in rows]
            raise CuratorInputError(f"{path}: {_first_odd_record(records, lines)}; make each field one type") from error

    def _parse(self, path: str, raw: bytes, line: Callable[[], int], first_of_file: bool,
               fields: list[str] | None) -> dict | None:
        """The record of one line (only ``fields``, None: all), or None for a blank or skipped one. ``line()``
        gives its number in the file, which for a block costs a read of the
        file up to it: asked only for a bad record."""
        if not raw.strip():
            return None
        try:
            record = json.loads(raw.decode("utf-8-sig" if first_of_file else "utf-8"))  # a byte-order mark may open a file
        except UnicodeDecodeError as error:
            self.bad_record(path, f"line {line()}", f"not UTF-8 (byte {error.start} is {raw[error.start]:#04x})")
            return None
        except json.JSONDecodeError as error:
            self.bad_record(path, f"line {line()}", f"malformed JSON ({error.msg} at column {error.colno})")
            return None
        if not isinstance(record, dict):
            self.bad_record(path, f"line {line()}", f"expected a JSON object, found {type(record).__name__}")
            return None
        if fields is None:
            return record
        missing = [name for name in fields if record.get(name) is None]
        if missing:
            present = ", ".join(name for name, value in record.items() if value is not None) or "none"
            self.bad_record(
                path, f"line {line()}", f"missing field(s) {', '.join(missing)} (the record has: {present}); "
                "if no record has it, the field name is wrong",
            )
            return None
        return {name: record[name] for name in fields}


def _first_line_start(handle: BinaryIO, start: int) -> int:
    """Where the first line that starts at or after ``start`` starts (the file's end if none does)."""
    if start == 0:
        return 0
    handle.seek(start - 1)
    return start - 1 + len(handle.readline())


def _lines(handle: BinaryIO, block: FileBlock | None) -> Iterator[bytes]:
    """The lines of the file, or those that start in ``block``."""
    if block is None:
        yield from handle
        return
    position = _first_line_start(handle, block.start)
    handle.seek(position)
    while position < block.stop:
        raw = handle.readline()
        if not raw:
            return
        position += len(raw)
        yield raw


def _first_odd_record(records: list[dict], lines: list[int]) -> str:
    """Where a field first holds another kind of value than on the first
    line that has it, with the record (so its id) shown."""
    first: dict[str, tuple[str, int]] = {}
    for record, line in zip(records, lines):
        for name, value in record.items():
            kind = type(value).__name__
            if value is None:
                continue
            seen = first.setdefault(name, (kind, line))
            if {seen[0], kind} not in ({kind}, {"int", "float"}):
                shown = json.dumps(record, default=str)
                shown = shown if len(shown) <= 160 else shown[:157] + "..."
                return f"line {line}: field {name!r} holds a {kind} where line {seen[1]} holds a {seen[0]} ({shown})"
    return "records have inconsistent types"


class JsonlReader(FileReader):
    """Read ``.jsonl`` files (optionally compressed) into DocumentBatches, one per file group."""

    extensions = (".jsonl", ".jsonl.gz", ".json")
    reader_stage = JsonlReaderStage


class JsonlWriter(FileWriterStage):
    """One ``<task_id>.jsonl`` per task."""

    name = "jsonl_writer"
    extension = "jsonl"

    def serialize(self, table: pa.Table, handle) -> None:
        for row in table.to_pylist():
            handle.write(json.dumps(row, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
