"""What the dedup transforms share about the documents they are given: a
field read from a dict or a schema'd ``beam.Row`` (an error naming the
document otherwise), the screening of documents that lack one
(``on_bad_record``, as the readers take it), the form of a removed
document, the refusal of input a transform cannot deduplicate in full (an
unbounded one: a duplicate of a document not yet seen could always arrive,
so no copy could ever be kept for good), and the split of tagged elements
into the kept and removed outputs."""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import apache_beam as beam
from apache_beam.typehints.row_type import RowTypeConstraint

from beam_curator.stages.io.errors import CuratorInputError

logger = logging.getLogger(__name__)
SKIPPED_COUNTER = "bad_records_skipped"  # the Beam counter of the documents on_bad_record="skip" dropped

KEPT, REMOVED = "kept", "removed"  # the tags of the kept and the removed documents
DUPLICATE_OF = "duplicate_of"  # the id of the document kept in a removed one's stead
SIMILARITY = "similarity"  # a removed document's similarity to the one kept in its stead
MATCHED_ID = "matched_id"  # the id of the document a removed one matched (kept or not; fuzzy groups chain)
MATCHED_SIMILARITY = "matched_similarity"  # the similarity of that pair
# A removed document's added fields, in order; a removal is their values, as a tuple.
REMOVAL_FIELDS = (DUPLICATE_OF, SIMILARITY, MATCHED_ID, MATCHED_SIMILARITY)


def check_input(documents: beam.PCollection, transform: str) -> None:
    """Refuse what the transform cannot deduplicate in full: an unbounded
    input, or a pipeline on Beam's DaskRunner, which computes only the last
    of the branches a step fans out into (every dedup's steps do, and its
    ``.kept`` and ``.removed`` are two), so documents would be lost without
    an error."""
    if not documents.is_bounded:
        raise ValueError(
            f"{transform} takes a bounded PCollection, but {documents.producer.full_label!r} produces an unbounded "
            "one: deduplication must see every document before it keeps any; read a bounded source (files) "
            "or window and write the stream first"
        )
    if type(documents.pipeline.runner).__name__ == "DaskRunner":
        raise ValueError(
            f"{transform} cannot run on Beam's DaskRunner: it computes only the last branch of a pipeline whose "
            "steps fan out, as a dedup's do, so documents would be lost; on a Dask cluster run the dedup "
            "workflows (runner='dask'), which run each step as a pipeline of its own"
        )


def check_field_names(transform: str, **fields: object) -> None:
    """Each of ``fields`` (``id_field=...``) names a field: a non-empty string."""
    for parameter, value in fields.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{transform}: {parameter} must name a field of the documents, not {value!r}")


def _which(document: Any, id_field: str | None) -> str:
    """How an error names a document: by its id where it has one."""
    value = None
    if id_field is not None:
        value = document.get(id_field) if isinstance(document, dict) else getattr(document, id_field, None)
    return "a document" if value is None else f"the document with {id_field} {value!r}"


def _fields(document: Any) -> list[str]:
    return list(document) if isinstance(document, dict) else list(getattr(document, "_fields", []))


def _advice(parameter: str) -> str:
    """What to do about a document lacking a usable field: a DoFn sees one
    document, so whether the others have it cannot be told here."""
    return (f"if no document has it, set {parameter} to the field that holds it; if only some lack it, fix "
            "those or pass on_bad_record='skip' to drop and count them")


def field_of(document: Any, name: str, parameter: str, transform: str, id_field: str | None = None) -> Any:
    """``document[name]`` for a dict, ``document.name`` for a Row; a missing
    field is an error naming the document (by ``id_field``), its fields and
    the parameter that named it."""
    try:
        return document[name] if isinstance(document, dict) else getattr(document, name)
    except (KeyError, AttributeError):
        raise CuratorInputError(
            f"{transform}: {_which(document, id_field)} has no field {name!r} ({parameter}); its fields are "
            f"{_fields(document)}: {_advice(parameter)}"
        ) from None


def text_of(document: Any, text_field: str, transform: str, id_field: str | None = None) -> str:
    """The document's text; anything but a string is an error naming the
    document (by ``id_field``) and ``text_field``."""
    text = field_of(document, text_field, "text_field", transform, id_field)
    if not isinstance(text, str):
        raise CuratorInputError(
            f"{transform}: {_which(document, id_field)}: text_field {text_field!r} holds a {type(text).__name__} "
            f"({text!r:.60}), not a string: {_advice('text_field')}"
        )
    return text


def id_of(document: Any, id_field: str, transform: str) -> int | str:
    """The document's id; anything but an integer or a string is an error naming the document."""
    value = field_of(document, id_field, "id_field", transform)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, str)):
        raise CuratorInputError(
            f"{transform}: a document with the fields {_fields(document)}: id_field {id_field!r} holds {value!r}; give every "
            "document a unique integer or string id, or pass on_bad_record='skip' to drop and count those without one"
        )
    return value


def check_id_and_text(document: Any, id_field: str, text_field: str, transform: str) -> None:
    """What exact and fuzzy dedup read of a document: an integer or string id
    and a string text; a ``CuratorInputError`` naming the document otherwise
    (the ``check`` their ``ScreenDocuments`` take, with the fields bound)."""
    id_of(document, id_field, transform)
    text_of(document, text_field, transform, id_field)


class ScreenDocuments(beam.DoFn):
    """The documents a dedup transform can deduplicate, passed on; ``check``
    (the transform's reading of a document's id and text, or vector) raises
    ``CuratorInputError`` for one it cannot. With ``on_bad_record="raise"``
    that error stops the run, naming the document; with ``"skip"`` the
    document is dropped (in neither output), counted in the Beam counter
    ``bad_records_skipped`` (namespace: the transform's name) and logged once
    per bundle with the count and the first one's error. Screening first
    keeps the shuffles after it free of documents that would fail there."""

    def __init__(self, transform: str, on_bad_record: str, check: Callable[[Any], object]) -> None:
        self.transform, self.on_bad_record, self.check = transform, on_bad_record, check
        self.skipped_counter = beam.metrics.Metrics.counter(transform, SKIPPED_COUNTER)

    def start_bundle(self) -> None:
        self.skipped, self.first = 0, None

    def process(self, document: Any) -> Iterator[Any]:
        try:
            self.check(document)
        except CuratorInputError as error:
            if self.on_bad_record == "raise":
                raise
            self.skipped_counter.inc()
            self.skipped += 1
            self.first = self.first or str(error)
            return
        yield document

    def finish_bundle(self) -> None:
        if self.skipped:
            logger.warning("%s skipped %d bad document(s) (on_bad_record='skip'); the first: %s",
                           self.transform, self.skipped, self.first)


def removed_form(document: Any, removal: tuple[Any, float, Any, float]) -> Any:
    """The document with its ``removal`` (the values of ``REMOVAL_FIELDS``:
    the id kept instead, their similarity, the id it matched, theirs) as
    four more fields of the same kind of element (dict or Row), so that it
    can be written where the kept ones are."""
    fields = dict(document) if isinstance(document, dict) else document._asdict()
    taken = [name for name in REMOVAL_FIELDS if name in fields]
    if taken:
        raise ValueError(f"a document to remove already has the fields {taken} that would say what it "
                         "duplicates: rename them before deduplicating")
    added = dict(zip(REMOVAL_FIELDS, removal))
    return {**fields, **added} if isinstance(document, dict) else beam.Row(**fields, **added)


def removed_type(document_type: Any, id_field: str) -> Any:
    """The element type of the removed documents: for schema'd Rows, their
    schema and the four fields; for dicts, ``Any`` (their keys are not typed)."""
    if not isinstance(document_type, RowTypeConstraint):
        return Any
    fields = dict(document_type._fields)
    id_type = fields.get(id_field, Any)
    return RowTypeConstraint.from_fields([*fields.items(), (DUPLICATE_OF, id_type), (SIMILARITY, float),
                                          (MATCHED_ID, id_type), (MATCHED_SIMILARITY, float)])


class DedupOutputs(NamedTuple):
    """What a dedup transform gives: the kept documents and the removed ones."""

    kept: beam.PCollection
    removed: beam.PCollection


def split_by_tag(tagged: beam.PCollection, tags: Sequence[str], label: str) -> dict[str, beam.PCollection]:
    """The values of ``(tag, value)`` pairs, one PCollection per tag. Beam's
    DaskRunner puts every output of a multi-output ParDo into one bag, so the
    transforms tag their elements themselves and take each tag's with a
    FlatMap of its own (fused with the step before on every runner)."""
    return {tag: tagged | f"{label}{tag.title()}" >> beam.FlatMap(
        lambda pair, tag=tag: [pair[1]] if pair[0] == tag else []) for tag in tags}


def kept_and_removed(tagged: beam.PCollection, kept_type: Any, removed_element_type: Any) -> DedupOutputs:
    """The ``(KEPT | REMOVED, document)`` pairs of a transform's last step as its two typed outputs."""
    outputs = split_by_tag(tagged, [KEPT, REMOVED], "Take")
    outputs[KEPT].element_type, outputs[REMOVED].element_type = kept_type, removed_element_type
    return DedupOutputs(outputs[KEPT], outputs[REMOVED])
