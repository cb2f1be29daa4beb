"""``ExactDedup``: exact deduplication as a PTransform in a user's own pipeline.

Documents are keyed by the md5 of their text and grouped by it, so that the
copies of a text meet on one worker and nothing is collected in the driver;
of each group the copy the exact workflow would keep is kept
(``beam_curator.dedup.exact``: the smallest id), whatever the runner, the
bundles or the order the documents come in. A group holds its copies' ids,
and its documents are read twice (Beam's grouped values can be iterated
again), so that a text repeated many times is never held as many documents.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import apache_beam as beam
import pyarrow as pa

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.exact import HASH_COLUMN, later_copies, md5_hex
from beam_curator.transforms.dedup_documents import REMOVED, field_of, refuse_unbounded, removed_form, removed_type

_NAME = "ExactDedup"


class ExactDedup(beam.PTransform):
    """Documents whose ``text_field`` is byte-for-byte equal, all but one removed.

    Takes a bounded PCollection of dicts or schema'd ``beam.Row``s, each with
    a unique ``id_field`` (all integers or all strings; the default is NeMo
    Curator's name, the one the workflows generate) and a string
    ``text_field``. Gives the outputs of a ``ParDo.with_outputs``: ``.kept``,
    the kept documents as they came, and ``.removed``, the others, each with
    two more fields: ``duplicate_of``, the id of the kept copy, and
    ``similarity``, 1.0.
    """

    def __init__(self, id_field: str = GENERATED_ID, text_field: str = "text") -> None:
        super().__init__()
        for parameter, value in (("id_field", id_field), ("text_field", text_field)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{_NAME}: {parameter} must name a field of the documents, not {value!r}")
        self.id_field = id_field
        self.text_field = text_field

    def expand(self, documents: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        refuse_unbounded(documents, _NAME)
        grouped = (
            documents
            | "KeyByDigest" >> beam.Map(self._keyed)
            | "GroupCopies" >> beam.GroupByKey()
        )
        results = grouped | "KeepSmallestId" >> beam.ParDo(_KeepSmallestId(self.id_field)).with_outputs(
            REMOVED, main="kept")
        results.kept.element_type = documents.element_type
        results.removed.element_type = removed_type(documents.element_type, self.id_field)
        return results

    def _keyed(self, document: Any) -> tuple[str, Any]:
        text = field_of(document, self.text_field, "text_field", _NAME)
        if not isinstance(text, str):
            raise ValueError(f"{_NAME}: text_field {self.text_field!r} holds a {type(text).__name__} "
                             f"({text!r:.60}), not a string: set text_field to the field holding the text")
        return md5_hex(text), document


class _KeepSmallestId(beam.DoFn):
    """The copies of one text in; the kept one to the main output, the others,
    each with the id of the kept one, to ``removed``."""

    def __init__(self, id_field: str) -> None:
        self.id_field = id_field

    def process(self, group: tuple[str, Iterable[Any]]) -> Iterator[Any]:
        digest, copies = group
        ids = [field_of(copy, self.id_field, "id_field", _NAME) for copy in copies]
        kept_of = self._kept_of(digest, ids)
        for copy in copies:
            copy_id = field_of(copy, self.id_field, "id_field", _NAME)
            if copy_id in kept_of:
                yield beam.pvalue.TaggedOutput(REMOVED, removed_form(copy, kept_of[copy_id], 1.0))
            else:
                yield copy

    def _kept_of(self, digest: str, ids: list[Any]) -> dict[Any, Any]:
        """Each later copy's id mapped to the kept copy's id."""
        if any(value is None for value in ids):
            raise ValueError(f"{_NAME}: a document's id_field {self.id_field!r} is missing (None); give every "
                             "document a unique id")
        if len(ids) == 1:
            return {}
        if len(set(ids)) < len(ids):
            repeated = sorted({str(value) for value in ids if ids.count(value) > 1})
            raise ValueError(f"{_NAME}: id_field {self.id_field!r} repeats the ids {repeated[:5]} on documents of "
                             "one text; ids must be unique")
        try:
            table = pa.table({HASH_COLUMN: [digest] * len(ids), self.id_field: ids})
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as error:
            raise ValueError(f"{_NAME}: id_field {self.id_field!r} holds {sorted(map(repr, ids))[:5]}; ids must be "
                             f"all integers or all strings ({error})") from None
        later, kept = later_copies(table, [self.id_field])
        return {ids[copy]: ids[keeper] for copy, keeper in zip(later.to_pylist(), kept.to_pylist())}
