"""Documents of a batch a text stage cannot use, and documents a filter or modifier fails on: how
an error names them, and ``on_bad_record`` for texts that are missing or not strings.

A stage sees a batch, not a file, so its errors name the document by its other fields (its id,
whatever the field is called) and the batch by the files the reader read it from
(``_metadata["source_files"]``): enough to find the record without rerunning anything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.errors import CuratorError
from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.text.columns import column_values
from beam_curator.tasks import DocumentBatch

logger = logging.getLogger(__name__)
SKIPPED = "bad_records_skipped"  # what a stage counts of the documents on_bad_record="skip" dropped
_SHOWN = 160  # characters of a document's other fields shown in an error


class DocumentFailedError(CuratorError, RuntimeError):
    """A filter or modifier raised on a document; the message names it, the document and its file."""


def source_of(task: DocumentBatch) -> str:
    """`` of the batch read from <files>``, or nothing for a batch that no reader made."""
    files = task._metadata.get("source_files") or []
    return f" of the batch read from {', '.join(map(str, files))}" if files else ""


def document_at(task: DocumentBatch, table: pa.Table, row: int, hidden: list[str]) -> str:
    """Row ``row`` of ``table`` (``task``'s documents) by its fields other than ``hidden`` (the
    texts: long, and not what finds a record) and its batch's files."""
    record = {name: value for name, value in table.slice(row, 1).to_pylist()[0].items() if name not in hidden}
    shown = json.dumps(record, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= _SHOWN else shown[:_SHOWN - 3] + "..."
    return f"row {row}{source_of(task)} ({shown})"


def each_document(function: Callable[[Any], Any], values: list[Any], what: str, task: DocumentBatch,
                  table: pa.Table, hidden: list[str]) -> list[Any]:
    """``function`` of each value of a column of ``table``; an exception it raises is re-raised as a
    ``DocumentFailedError`` naming ``what`` (the filter or modifier) and the document, as a bare
    error from a worker names neither."""
    results = []
    for row, value in enumerate(values):
        try:
            results.append(function(value))
        except Exception as error:
            raise DocumentFailedError(
                f"{what} raised {type(error).__name__} ({error}) on {document_at(task, table, row, hidden)}"
            ) from error
    return results


def screen_texts(stage: ProcessingStage, task: DocumentBatch, table: pa.Table, fields: list[str],
                 on_bad_record: str) -> pa.Table:
    """``table`` less the documents whose ``fields`` are null or not strings: with
    ``on_bad_record="raise"`` the first stops the run with a ``CuratorInputError`` naming the field,
    the document and its file; with ``"skip"`` they are dropped, logged and counted
    (``<stage>.bad_records_skipped``), as the readers skip a bad record. A field no document of the
    batch has is a ``KeyError`` naming the fields there are: the stage's setting is the likely cause."""
    bad = pa.array([False] * table.num_rows, pa.bool_())
    problems = []
    for field in dict.fromkeys(fields):
        if field not in table.column_names:  # no document has it: a setting to fix, whatever on_bad_record says
            column_values(table, field)
        if (kind := table.schema.field(field).type) in (pa.string(), pa.large_string(), pa.null()):
            field_bad, problem = pc.is_null(table.column(field)).combine_chunks(), "it is missing (null)"
        else:
            field_bad, problem = pa.array([True] * table.num_rows, pa.bool_()), f"it holds {kind} values, not strings"
        bad = pc.or_(bad, field_bad)
        problems.append((field, field_bad, problem))
    skipped = pc.sum(bad).as_py() or 0
    if not skipped:
        return table
    field, field_bad, problem = next(entry for entry in problems if pc.any(entry[1]).as_py())
    row = pc.index(field_bad, True).as_py()
    message = (f"{stage.stage_name}: text_field {field!r} of {document_at(task, table, row, fields)}: {problem}")
    if on_bad_record == "raise":
        raise CuratorInputError(f"{message}. Set text_field to the field that holds the text, fix the record, or pass "
                                "on_bad_record='skip' to drop and count such documents")
    logger.warning("%s skipped %d document(s) without a usable text (on_bad_record='skip'); the first: %s",
                   stage.stage_name, skipped, message)
    stage.count(f"{stage.stage_name}.{SKIPPED}", skipped)
    return table.filter(pc.invert(bad))
