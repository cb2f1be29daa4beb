"""``SurvivingRepresentatives``: each removal of chained dedup passes resolved, in a user's pipeline, to a
document in the final output.

A removed document's ``duplicate_of`` may have been removed too: by a later
pass (exact, then fuzzy, then semantic), or in the same semantic pass (it
names its best earlier-ranked match). This transform takes the ``.removed``
of every pass, flattened into one PCollection, and gives ``(removed id,
surviving id)`` pairs by ``dedup.survivors.surviving_representatives``.
Following a chain needs every removal at hand, so the ``(id, duplicate_of)``
pairs (not the documents) are gathered on one worker: about a hundred bytes
a removal.
"""

from __future__ import annotations

from typing import Any, Iterator

import apache_beam as beam

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.survivors import surviving_representatives
from beam_curator.transforms.batch_rows import check_columns, task_table, takes_tasks
from beam_curator.transforms.dedup_documents import DUPLICATE_OF, check_field_names, field_of

_NAME = "SurvivingRepresentatives"


class SurvivingRepresentatives(beam.PTransform):
    """The removed documents of any number of dedup passes (dicts, Rows or
    ``DocumentBatch`` tasks, with ``duplicate_of``) in; for each, ``(its
    id_field, the id of the document it resolves to)``, a document no pass removed."""

    def __init__(self, id_field: str = GENERATED_ID) -> None:
        super().__init__()
        check_field_names(_NAME, id_field=id_field)
        self.id_field = id_field

    def expand(self, removed: beam.PCollection) -> beam.PCollection:
        pairs = removed | "Removals" >> beam.FlatMap(self._batch_pairs if takes_tasks(removed) else self._pairs)
        return (pairs
                | "Gather" >> beam.combiners.ToList()
                | "Resolve" >> beam.FlatMap(lambda gathered: surviving_representatives(gathered).items()))

    def _pairs(self, document: Any) -> Iterator[tuple[Any, Any]]:
        yield (field_of(document, self.id_field, "id_field", _NAME),
               field_of(document, DUPLICATE_OF, "the removal's field", _NAME))

    def _batch_pairs(self, batch: Any) -> Iterator[tuple[Any, Any]]:
        table = task_table(batch, _NAME)
        check_columns(table, {"id_field": self.id_field, "the removal's field": DUPLICATE_OF}, _NAME)
        yield from zip(table.column(self.id_field).to_pylist(), table.column(DUPLICATE_OF).to_pylist())
