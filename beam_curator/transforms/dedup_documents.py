"""What the dedup transforms share about the documents they are given: a
field read from a dict or a schema'd ``beam.Row``, the form of a removed
document, the refusal of input a transform cannot deduplicate in full (an
unbounded one: a duplicate of a document not yet seen could always arrive,
so no copy could ever be kept for good), and the split of tagged elements
into the kept and removed outputs."""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import apache_beam as beam
from apache_beam.typehints.row_type import RowTypeConstraint

KEPT, REMOVED = "kept", "removed"  # the tags of the kept and the removed documents
DUPLICATE_OF = "duplicate_of"  # the id of the document kept in a removed one's stead
SIMILARITY = "similarity"


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


def field_of(document: Any, name: str, parameter: str, transform: str) -> Any:
    """``document[name]`` for a dict, ``document.name`` for a Row; a missing
    field is an error naming the parameter that named it."""
    try:
        return document[name] if isinstance(document, dict) else getattr(document, name)
    except (KeyError, AttributeError):
        fields = list(document) if isinstance(document, dict) else list(getattr(document, "_fields", []))
        raise ValueError(
            f"{transform}: a document has no field {name!r} ({parameter}); its fields are {fields}: "
            f"set {parameter} to the field that holds it"
        ) from None


def text_of(document: Any, text_field: str, transform: str) -> str:
    """The document's text; anything but a string is an error naming ``text_field``."""
    text = field_of(document, text_field, "text_field", transform)
    if not isinstance(text, str):
        raise ValueError(f"{transform}: text_field {text_field!r} holds a {type(text).__name__} ({text!r:.60}), "
                         "not a string: set text_field to the field holding the text")
    return text


def removed_form(document: Any, duplicate_of: Any, similarity: float) -> Any:
    """The document with the id of the one kept instead and their similarity,
    as two more fields of the same kind of element (dict or Row), so that it
    can be written where the kept ones are."""
    fields = dict(document) if isinstance(document, dict) else document._asdict()
    taken = [name for name in (DUPLICATE_OF, SIMILARITY) if name in fields]
    if taken:
        raise ValueError(f"a document to remove already has the fields {taken} that would say what it "
                         "duplicates: rename them before deduplicating")
    added = {DUPLICATE_OF: duplicate_of, SIMILARITY: similarity}
    return {**fields, **added} if isinstance(document, dict) else beam.Row(**fields, **added)


def removed_type(document_type: Any, id_field: str) -> Any:
    """The element type of the removed documents: for schema'd Rows, their
    schema and the two fields; for dicts, ``Any`` (their keys are not typed)."""
    if not isinstance(document_type, RowTypeConstraint):
        return Any
    fields = dict(document_type._fields)
    return RowTypeConstraint.from_fields([*fields.items(), (DUPLICATE_OF, fields.get(id_field, Any)),
                                          (SIMILARITY, float)])


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
