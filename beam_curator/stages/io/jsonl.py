"""JSON Lines: reader and writer."""

from __future__ import annotations

import json

import fsspec
import pyarrow as pa

from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.reader import FileReader, FileReaderStage
from beam_curator.stages.io.writer import FileWriterStage


class JsonlReaderStage(FileReaderStage):
    """Parses line by line so that every problem is reported with its line number."""

    name = "jsonl_reader"

    def read_file(self, path: str) -> tuple[pa.Table, int]:
        records, lines, skipped = [], [], 0
        with fsspec.open(path, "rb", compression="infer") as handle:
            for number, raw in enumerate(handle, start=1):
                record = self._parse(path, number, raw)
                if record is None:
                    skipped += raw.strip() != b""
                    continue
                records.append(record)
                lines.append(number)
        if not records:
            return pa.table({name: pa.array([], pa.string()) for name in self.fields or []}), skipped
        try:
            return pa.Table.from_pylist(records), skipped
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise CuratorInputError(f"{path}: {_first_odd_record(records, lines)}; make each field one type") from error

    def _parse(self, path: str, number: int, raw: bytes) -> dict | None:
        if not raw.strip():
            return None
        where = f"line {number}"
        try:
            record = json.loads(raw.decode("utf-8-sig" if number == 1 else "utf-8"))  # a byte-order mark may open a file
        except UnicodeDecodeError as error:
            self.bad_record(path, where, f"not UTF-8 (byte {error.start} is {raw[error.start]:#04x})")
            return None
        except json.JSONDecodeError as error:
            self.bad_record(path, where, f"malformed JSON ({error.msg} at column {error.colno})")
            return None
        if not isinstance(record, dict):
            self.bad_record(path, where, f"expected a JSON object, found {type(record).__name__}")
            return None
        if self.fields is None:
            return record
        missing = [name for name in self.fields if record.get(name) is None]
        if missing:
            present = ", ".join(name for name, value in record.items() if value is not None) or "none"
            self.bad_record(
                path, where, f"missing field(s) {', '.join(missing)} (the record has: {present}); "
                "if no record has it, the field name is wrong",
            )
            return None
        return {name: record[name] for name in self.fields}


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
