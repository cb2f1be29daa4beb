"""The package's ``DocumentBatch`` tasks deduplicated by row.

A dedup transform that works on documents takes task batches (a
PCollection typed ``Task``, as ``CuratorStages`` gives) through
``RowsOfBatches``: each batch is keyed by a key drawn for it, its rows go
through the transform as dicts holding only the columns it reads (and where
they came from), and each batch then meets the rows removed from it. A
batch comes out as it went in, less those rows (``kept``), and the removed
rows come out as a batch of their own, with the columns of
``dedup_documents.REMOVAL_FIELDS`` (``removed``). With
``on_bad_record="skip"`` a batch also meets the places of its rows that
passed screening, so that a row the transform skipped leaves the batch too,
in neither output, as a skipped document does.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Iterable, Iterator, Mapping

import apache_beam as beam
import pyarrow as pa

from beam_curator.tasks import DocumentBatch, Task
from beam_curator.transforms.dedup_documents import (
    DUPLICATE_OF,
    KEPT,
    MATCHED_ID,
    REMOVAL_FIELDS,
    REMOVED,
    DedupOutputs,
    kept_and_removed,
)

# Where a row came from: its batch's key and its place in the batch.
BATCH_KEY, BATCH_ROW = "__batch_key", "__batch_row"
SCREENED = "screened"  # the side of DropRows naming the rows that passed screening, where rows may be skipped


def takes_tasks(documents: beam.PCollection) -> bool:
    """Whether a PCollection is typed as the package's tasks."""
    return isinstance(documents.element_type, type) and issubclass(documents.element_type, Task)


def check_columns(table: pa.Table, columns: Mapping[str, str], transform: str) -> None:
    """Each ``parameter: column`` of ``columns`` is a column of the batch; a
    missing one is an error naming the parameter."""
    for parameter, name in columns.items():
        if name not in table.column_names:
            raise ValueError(f"{transform}: a batch has no column {name!r} ({parameter}); its columns are "
                             f"{table.column_names}: set {parameter} to the column that holds it")


class RowsOfBatches(beam.PTransform):
    """``row_dedup`` (a dedup transform on dicts) applied to the rows of
    ``DocumentBatch`` tasks; ``columns`` maps its parameters to the columns
    it reads (``{"id_field": "doc_id", "text_field": "text"}``, always with
    ``id_field``); ``row_dedup.on_bad_record`` says whether it may skip rows.
    Gives ``DedupOutputs`` of batches."""

    def __init__(self, row_dedup: beam.PTransform, columns: Mapping[str, str], transform: str) -> None:
        super().__init__()
        self.row_dedup, self.columns, self.transform = row_dedup, dict(columns), transform

    def expand(self, batches: beam.PCollection) -> DedupOutputs:
        keyed = batches | "KeyBatches" >> beam.Map(lambda batch: (uuid.uuid4().hex, batch))
        rows = keyed | "Rows" >> beam.FlatMap(rows_of, self.columns, self.transform).with_output_types(dict)
        deduplicated = rows | "DedupRows" >> self.row_dedup
        sides = {"batch": keyed, "removed": deduplicated.removed | "ByBatch" >> beam.Map(
            lambda row: (row[BATCH_KEY], (row[BATCH_ROW], tuple(row[name] for name in REMOVAL_FIELDS))))}
        if self.row_dedup.on_bad_record == "skip":  # a row in neither output was skipped
            sides[SCREENED] = (deduplicated.kept, deduplicated.removed) | "Screened" >> beam.Flatten() | places()
        joined = sides | "MeetTheirBatch" >> beam.CoGroupByKey()
        tagged = joined | "DropRemovedRows" >> beam.ParDo(DropRows(self.columns["id_field"], self.transform))
        return kept_and_removed(tagged, batches.element_type, batches.element_type)



def rows_of(keyed: tuple[str, Task], columns: Mapping[str, str], transform: str) -> Iterator[dict]:
    """The rows of a keyed batch as dicts of the ``columns`` a transform reads, with where they came from."""
    key, batch = keyed
    table = task_table(batch, transform)
    check_columns(table, columns, transform)
    names = list(dict.fromkeys(columns.values()))
    for row, record in enumerate(table.select(names).to_pylist()):
        yield {**record, BATCH_KEY: key, BATCH_ROW: row}


def places() -> beam.PTransform:
    """Rows of ``rows_of`` to ``(batch key, row)``: the side of ``DropRows`` that names the screened rows."""
    return "Places" >> beam.Map(lambda row: (row[BATCH_KEY], row[BATCH_ROW]))


def task_table(batch: Any, transform: str) -> pa.Table:
    """The table of a ``DocumentBatch``; any other element is an error."""
    if not isinstance(batch, DocumentBatch):
        raise ValueError(f"{transform}: a PCollection of tasks must hold DocumentBatch tasks, not {type(batch).__name__}")
    return batch.to_pyarrow()


class DropRows(beam.DoFn):
    """A batch (``batch``), ``(row, removal)`` of its rows to remove
    (``removed``) and, where rows may have been skipped, the rows that passed
    screening (``SCREENED``) in; the batch less the removed and the skipped
    rows tagged ``kept``, the removed rows with the removals' columns
    (``REMOVAL_FIELDS``) as a batch of their own tagged ``removed``."""

    def __init__(self, id_field: str, transform: str) -> None:
        self.id_field, self.transform = id_field, transform

    def process(self, joined: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[tuple[str, Any]]:
        _, sides = joined
        (batch,) = sides["batch"]
        removed = dict(sides["removed"])
        table = batch.to_pyarrow()
        screened = set(sides[SCREENED]) if SCREENED in sides else None  # None: no row was skipped
        if not removed and (screened is None or len(screened) == table.num_rows):
            yield KEPT, batch
            return
        kept = [row not in removed and (screened is None or row in screened) for row in range(table.num_rows)]
        yield KEPT, dataclasses.replace(batch, data=table.filter(pa.array(kept)))
        if not removed:
            return
        taken = [name for name in REMOVAL_FIELDS if name in table.column_names]
        if taken:
            raise ValueError(f"{self.transform}: a batch already has the columns {taken} that would say what a "
                             "removed row duplicates: rename them before deduplicating")
        rows = sorted(removed)
        id_type = table.schema.field(self.id_field).type
        gone = table.take(rows)
        for number, name in enumerate(REMOVAL_FIELDS):
            kind = id_type if name in (DUPLICATE_OF, MATCHED_ID) else pa.float64()
            gone = gone.append_column(name, pa.array([removed[row][number] for row in rows], kind))
        yield REMOVED, dataclasses.replace(batch, data=gone, _credits={})
