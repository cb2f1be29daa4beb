"""Reading a column of a batch as Python values, writing Python values back as a column, and keeping
some of a batch's rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from beam_curator.tasks import DocumentBatch


def column_values(table: pa.Table, field: str) -> list[Any]:
    """The values of ``field`` as Python objects, one per row; a missing field is named with the
    fields the batch has, as a stage's setting (``text_field``, ``score_field``) is the usual cause."""
    if field not in table.column_names:
        raise KeyError(f"the batch has no field {field!r}; its fields are {table.column_names}")
    return table.column(field).to_pylist()


def put_column(table: pa.Table, field: str, values: list[Any]) -> pa.Table:
    """``table`` with ``field`` set to ``values``: replaced where it is (keeping the columns' order), or
    added last, as assigning a pandas column does.

    An empty batch keeps an existing field's type (no values say what the new type is) and gains a
    new field as an empty null column, so that a later stage or a writer that selects the field
    finds it in every batch, empty or not.
    """
    if field in table.column_names:
        if table.num_rows == 0:
            return table
        return table.set_column(table.column_names.index(field), field, pa.array(values))
    return table.append_column(field, pa.array(values))


def keep_rows(table: pa.Table, keep: list[bool]) -> pa.Table:
    """The rows of ``table`` whose entry in ``keep`` is true, in order."""
    return table.filter(pa.array(keep, pa.bool_()))


def with_table(task: DocumentBatch, table: pa.Table) -> DocumentBatch:
    """A batch holding ``table`` in place of ``task``'s documents, with its dataset and metadata."""
    return DocumentBatch(dataset_name=task.dataset_name, data=table, _metadata=task._metadata)
