"""``FilterDocuments``: the filter and modifier stages (``Score``, ``Filter``, ``ScoreFilter``,
``Modify``) in a user's own Beam pipeline, over dicts or schema'd ``beam.Row``s.

Documents are batched (``beam.BatchElements``) and each batch becomes a ``DocumentBatch`` of the
fields the stages read, so that the stages run as they do in a ``Pipeline``: their own ``process``
(``decide``, for the stages that drop) over whole batches, their counts reported as the runners
report them. Each kept document comes out as it came in, with the fields the stages wrote (scores,
modified texts) set; each dropped one also with ``filter_name`` and ``filter_score``.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, Iterator, NamedTuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.typehints.row_type import RowTypeConstraint

from beam_curator.errors import check_on_bad_record
from beam_curator.stages.text.filters import Filter, Score, ScoreFilter
from beam_curator.stages.text.filters.dropped import FILTER_NAME, FILTER_SCORE
from beam_curator.stages.text.modifiers import Modify
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms.dedup_documents import KEPT, ScreenDocuments, field_of, split_by_tag, text_of
from beam_curator.transforms.stage_dofns import report_counts

_NAME = "FilterDocuments"
DROPPED = "dropped"  # the tag of the dropped documents
_ROW = "__filter_documents_row"  # a batch row's place among the documents it was built from
FilterStage = Score | Filter | ScoreFilter | Modify


class FilterOutputs(NamedTuple):
    """What ``FilterDocuments`` gives: the documents kept, and those dropped."""

    kept: beam.PCollection
    dropped: beam.PCollection


class _Fields(NamedTuple):
    """Which fields the stages read from the documents as given (texts, and the stored values
    ``Filter`` decides on) and which they write; a field an earlier stage wrote is not read from
    the documents."""

    texts: list[str]
    values: list[str]
    written: list[str]


class FilterDocuments(beam.PTransform):
    """The documents ``stages`` keep (``.kept``), and those they drop (``.dropped``).

    Takes a PCollection of dicts or schema'd ``beam.Row``s; gives ``FilterOutputs``. Kept documents
    are of the kind they came as (a Row's schema gains the fields the stages add); dropped ones
    also carry ``filter_name``, the filter that dropped them, and ``filter_score``, the score or
    value it dropped them on. A document whose text (a field a stage scores or modifies) is missing
    or not a string follows ``on_bad_record``, as the readers and dedup transforms take it: it stops
    the run with an error naming the document by ``id_field`` where given (``"raise"``), or is
    dropped from both outputs and counted (``"skip"``). At most ``max_batch_size`` documents go
    through the stages at once. A stage's ``exclusion_path`` names each batch's file by a random id:
    a bundle that Beam retries writes its file again under another name, so ``.dropped`` is the
    record to rely on here.
    """

    def __init__(self, stages: list[FilterStage], on_bad_record: str = "raise", id_field: str | None = None,
                 max_batch_size: int = 1000) -> None:
        super().__init__()
        check_on_bad_record(on_bad_record, _NAME)
        self.stages = list(stages)
        if not self.stages:
            raise ValueError(f"{_NAME} needs at least one stage")
        for stage in self.stages:
            if not isinstance(stage, (Score, Filter, ScoreFilter, Modify)):
                raise TypeError(f"{_NAME} runs Score, Filter, ScoreFilter and Modify stages, not {stage!r}; "
                                "apply other stages with CuratorStages")
        self.on_bad_record, self.id_field, self.max_batch_size = on_bad_record, id_field, max_batch_size
        self.fields = fields_of(self.stages)

    def expand(self, documents: beam.PCollection) -> FilterOutputs:
        check = functools.partial(_check, fields=self.fields, id_field=self.id_field)
        tagged = (
            documents
            | "ScreenDocuments" >> beam.ParDo(ScreenDocuments(_NAME, self.on_bad_record, check))
            | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=self.max_batch_size)
            | "RunStages" >> beam.ParDo(_RunStages(self.stages, self.fields, self.id_field))
        )
        outputs = split_by_tag(tagged, [KEPT, DROPPED], "Take")
        kept_type, dropped_type = _output_types(documents.element_type, self.fields.written)
        outputs[KEPT].element_type, outputs[DROPPED].element_type = kept_type, dropped_type
        return FilterOutputs(outputs[KEPT], outputs[DROPPED])


def fields_of(stages: list[FilterStage]) -> _Fields:
    """The fields ``stages`` read from the documents and those they write, in order."""
    texts, values, written = [], [], []
    for stage in stages:
        if isinstance(stage, Filter):
            values += [field for field in stage.filter_field if field not in written]
            continue
        read = ([field for group in stage.input_fields for field in group] if isinstance(stage, Modify)
                else stage.text_field)
        texts += [field for field in read if field not in written]
        outputs = stage.output_fields if isinstance(stage, Modify) else stage.score_field
        written += [field for field in outputs if field is not None]
    return _Fields(list(dict.fromkeys(texts)), list(dict.fromkeys(values)), list(dict.fromkeys(written)))


def _check(document: Any, fields: _Fields, id_field: str | None) -> None:
    """``ScreenDocuments``' check: every text the stages read is a string, every value is there."""
    for field in fields.texts:
        text_of(document, field, _NAME, id_field)
    for field in fields.values:
        field_of(document, field, "filter_field", _NAME, id_field)


class _RunStages(beam.DoFn):
    """A list of documents in; each kept one tagged ``kept``, each dropped one ``dropped``."""

    def __init__(self, stages: list[FilterStage], fields: _Fields, id_field: str | None) -> None:
        self.stages, self.fields, self.id_field = stages, fields, id_field

    def setup(self) -> None:
        for stage in self.stages:
            stage.setup()

    def teardown(self) -> None:
        for stage in self.stages:
            stage.teardown()

    def process(self, documents: list[Any]) -> Iterator[tuple[str, Any]]:
        read = list(dict.fromkeys([*self.fields.texts, *self.fields.values]))
        columns = {name: [field_of(document, name, "text_field", _NAME, self.id_field) for document in documents]
                   for name in read}
        if self.id_field is not None and self.id_field not in columns:  # for a failing filter's error to name
            columns[self.id_field] = [_get(document, self.id_field) for document in documents]
        task = DocumentBatch(task_id=uuid.uuid4().hex, dataset_name=_NAME,
                             data=pa.table({**columns, _ROW: list(range(len(documents)))}))
        dropped = []
        for stage in self.stages:
            if isinstance(stage, (Filter, ScoreFilter)):
                task, gone = stage.decide(task)
                dropped += gone
            else:
                task = stage.process(task)
            report_counts(stage)
        written = self.fields.written
        for row in task.to_pyarrow().to_pylist():
            yield KEPT, _with(documents[row[_ROW]], {name: row[name] for name in written})
        for row in (row for table in dropped for row in table.to_pylist()):
            # A field that a stage after the dropping filter would have written is not there yet: an
            # input field keeps its value, a new one is None.
            document = documents[row[_ROW]]
            values = {name: row.get(name) for name in written if name in row or not _has(document, name)}
            yield DROPPED, _with(document, {**values, FILTER_NAME: row[FILTER_NAME], FILTER_SCORE: row[FILTER_SCORE]})


def _has(document: Any, name: str) -> bool:
    return name in (document if isinstance(document, dict) else document._fields)


def _get(document: Any, name: str) -> Any:
    return document.get(name) if isinstance(document, dict) else getattr(document, name, None)


def _with(document: Any, values: dict[str, Any]) -> Any:
    """``document`` with ``values`` set, of the kind it came as (dict or Row)."""
    fields = dict(document) if isinstance(document, dict) else document._asdict()
    fields.update(values)
    return fields if isinstance(document, dict) else beam.Row(**fields)


def _output_types(document_type: Any, written: list[str]) -> tuple[Any, Any]:
    """For schema'd Rows, their schema with the fields written (of the types the stages give, so
    ``Any``), and for the dropped ones also ``filter_name`` and ``filter_score``; for dicts, ``Any``."""
    if not isinstance(document_type, RowTypeConstraint):
        return Any, Any
    fields = dict(document_type._fields)
    kept = {**fields, **{name: Any for name in written if name not in fields}}
    dropped = {**kept, FILTER_NAME: str, FILTER_SCORE: Any}
    return RowTypeConstraint.from_fields(list(kept.items())), RowTypeConstraint.from_fields(list(dropped.items()))
