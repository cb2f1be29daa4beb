"""``ExactDedup``: exact deduplication as a PTransform in a user's own pipeline.

Documents are keyed by the md5 of their text and grouped by it, so that the
copies of a text meet on one worker and nothing is collected in the driver;
of each group the copy the exact workflow would keep is kept
(``beam_curator.dedup.exact``: the smallest id), whatever the runner, the
bundles or the order the documents come in. A group holds its copies' ids,
and its documents are read twice (Beam's grouped values can be iterated
again), so that a text repeated many times is never held as many documents.

The package's ``DocumentBatch`` tasks (a PCollection typed ``Task``, as
``CuratorStages`` gives) are deduplicated by row: only ``(digest, id, batch,
row)`` records are grouped by digest (not the rows' texts, as
``batch_rows.RowsOfBatches`` would group them), and each batch then meets the
rows to drop from it (``batch_rows.DropRows``). Rows are screened as
documents are, so ``on_bad_record`` treats a row without a usable id or text
as it treats such a document.
"""

from __future__ import annotations

import uuid
import functools
from typing import Any, Iterable, Iterator

import apache_beam as beam
import pyarrow as pa

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.exact import HASH_COLUMN, later_copies, md5_hex
from beam_curator.errors import check_on_bad_record
from beam_curator.transforms.batch_rows import (
    BATCH_KEY,
    BATCH_ROW,
    SCREENED,
    DropRows,
    places,
    rows_of,
    takes_tasks,
)
from beam_curator.transforms.dedup_documents import (
    KEPT,
    REMOVED,
    DedupOutputs,
    ScreenDocuments,
    check_field_names,
    check_id_and_text,
    check_input,
    field_of,
    kept_and_removed,
    removed_form,
    removed_type,
    text_of,
)
from beam_curator.transforms.dedup_progress import progress_settings, watched

_NAME = "ExactDedup"


class ExactDedup(beam.PTransform):
    """Documents whose ``text_field`` is byte-for-byte equal, all but one removed.

    Takes a bounded PCollection of dicts, schema'd ``beam.Row``s or
    ``DocumentBatch`` tasks, each document with a unique ``id_field`` (all
    integers or all strings; the default is NeMo Curator's name, the one the
    workflows generate) and a string ``text_field``. Gives two outputs
    (``DedupOutputs``): ``.kept``, the kept documents as they came (a
    batch with its removed rows dropped), and ``.removed``, the others, each
    with four more fields: ``duplicate_of``, the id of the kept copy,
    ``similarity``, 1.0, and ``matched_id`` and ``matched_similarity``, the
    same (the kept copy is the one it matched). ``on_bad_record``, as the
    readers take it: ``"raise"`` stops the run at a document without an
    integer or string id or a string text, naming it; ``"skip"`` drops such
    documents from both outputs and counts them (``ScreenDocuments``).
    ``progress`` (None: unless logging was set up quiet) shows, on a
    terminal, the documents counted in while the pipeline runs and prints
    the counts in, kept and removed on stderr when it ends, on any runner
    (``dedup_progress``); workers on other machines record them in
    ``progress_folder``, a folder they can write to.
    """

    def __init__(self, id_field: str = GENERATED_ID, text_field: str = "text", on_bad_record: str = "raise",
                 progress: bool | None = None, progress_folder: str | None = None) -> None:
        super().__init__()
        self.progress, self.progress_folder = progress_settings(_NAME, progress, progress_folder)
        check_field_names(_NAME, id_field=id_field, text_field=text_field)
        check_on_bad_record(on_bad_record, _NAME)
        self.id_field = id_field
        self.text_field = text_field
        self.on_bad_record = on_bad_record
        self._check = functools.partial(check_id_and_text, id_field=id_field, text_field=text_field, transform=_NAME)

    def expand(self, documents: beam.PCollection) -> DedupOutputs:
        check_input(documents, _NAME)
        if takes_tasks(documents):
            return watched(self, documents, self._batches(documents))
        grouped = (
            documents
            | "ScreenDocuments" >> beam.ParDo(ScreenDocuments(_NAME, self.on_bad_record, self._check))
            | "KeyByDigest" >> beam.Map(self._keyed)
            | "GroupCopies" >> beam.GroupByKey()
        )
        tagged = grouped | "KeepSmallestId" >> beam.ParDo(_KeepSmallestId(self.id_field))
        return watched(self, documents, kept_and_removed(tagged, documents.element_type,
                                                         removed_type(documents.element_type, self.id_field)))

    def _keyed(self, document: Any) -> tuple[str, Any]:
        return md5_hex(text_of(document, self.text_field, _NAME)), document

    def _batches(self, batches: beam.PCollection) -> DedupOutputs:
        keyed = batches | "KeyBatches" >> beam.Map(lambda batch: (uuid.uuid4().hex, batch))
        columns = {"id_field": self.id_field, "text_field": self.text_field}
        screened = (keyed
                    | "Rows" >> beam.FlatMap(rows_of, columns, _NAME)
                    | "ScreenRows" >> beam.ParDo(ScreenDocuments(_NAME, self.on_bad_record, self._check)))
        later = (
            screened
            | "RowDigests" >> beam.Map(self._row_record)
            | "GroupCopies" >> beam.GroupByKey()
            | "LaterRows" >> beam.FlatMap(self._later_rows)
        )
        sides = {"batch": keyed, "removed": later}
        if self.on_bad_record == "skip":  # a row that did not pass screening was skipped
            sides[SCREENED] = screened | places()
        joined = sides | "MeetTheirBatch" >> beam.CoGroupByKey()
        tagged = joined | "DropLaterRows" >> beam.ParDo(DropRows(self.id_field, _NAME))
        return kept_and_removed(tagged, batches.element_type, batches.element_type)

    def _row_record(self, row: dict) -> tuple[str, tuple[Any, str, int]]:
        """``(digest, (id, batch key, row))`` of a screened row of a batch."""
        return md5_hex(row[self.text_field]), (row[self.id_field], row[BATCH_KEY], row[BATCH_ROW])

    def _later_rows(self, group: tuple[str, Iterable[tuple[Any, str, int]]]
                    ) -> Iterator[tuple[str, tuple[int, tuple]]]:
        """``(batch key, (row, removal))`` of each later copy of a digest."""
        digest, records = group
        records = list(records)  # ids and places only
        kept_of = kept_ids(digest, [document_id for document_id, _, _ in records], self.id_field)
        for document_id, key, row in records:
            if document_id in kept_of:
                yield key, (row, _copy_of(kept_of[document_id]))


def kept_ids(digest: str, ids: list[Any], id_field: str) -> dict[Any, Any]:
    """Each later copy's id, among the ``ids`` of one digest's copies, mapped
    to the kept copy's id."""
    if any(value is None for value in ids):
        raise ValueError(f"{_NAME}: a document's id_field {id_field!r} is missing (None); give every "
                         "document a unique id")
    if len(ids) == 1:
        return {}
    if len(set(ids)) < len(ids):
        repeated = sorted({str(value) for value in ids if ids.count(value) > 1})
        raise ValueError(f"{_NAME}: id_field {id_field!r} repeats the ids {repeated[:5]} on documents of "
                         "one text; ids must be unique")
    try:
        table = pa.table({HASH_COLUMN: [digest] * len(ids), id_field: ids})
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as error:
        raise ValueError(f"{_NAME}: id_field {id_field!r} holds {sorted(map(repr, ids))[:5]}; ids must be "
                         f"all integers or all strings ({error})") from None
    later, kept = later_copies(table, [id_field])
    return {ids[copy]: ids[keeper] for copy, keeper in zip(later.to_pylist(), kept.to_pylist())}


def _copy_of(kept_id: Any) -> tuple[Any, float, Any, float]:
    """The removal of a copy of ``kept_id``'s text: it matched the kept copy itself."""
    return kept_id, 1.0, kept_id, 1.0


class _KeepSmallestId(beam.DoFn):
    """The copies of one text in; the kept one tagged ``kept``, the others,
    each with the id of the kept one, ``removed``."""

    def __init__(self, id_field: str) -> None:
        self.id_field = id_field

    def process(self, group: tuple[str, Iterable[Any]]) -> Iterator[Any]:
        digest, copies = group
        kept_of = kept_ids(digest, [field_of(copy, self.id_field, "id_field", _NAME) for copy in copies],
                           self.id_field)
        for copy in copies:
            copy_id = field_of(copy, self.id_field, "id_field", _NAME)
            if copy_id in kept_of:
                yield REMOVED, removed_form(copy, _copy_of(kept_of[copy_id]))
            else:
                yield KEPT, copy
