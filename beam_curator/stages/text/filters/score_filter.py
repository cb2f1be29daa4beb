"""The stages that run document filters over batches: ``Score`` (add scores), ``Filter`` (drop rows
on stored scores) and ``ScoreFilter`` (both at once), with NeMo Curator's parameters and rules.

Each takes one filter or a list applied in order; with a list, the field settings may be lists of
one per filter (see ``fields.per_function``). Each call scores a whole batch's column in one loop per
filter, so a batch costs one Python call per document and filter, and no Beam step per document.

Beyond NeMo's parameters: ``Filter`` and ``ScoreFilter`` count each filter's documents in, kept and
dropped, and write the dropped ones to ``exclusion_path`` when given (``dropped``); ``Score`` and
``ScoreFilter`` take ``on_bad_record`` for texts that are missing or not strings, and a filter that
raises is named with the document it raised on (``stages.text.documents``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from beam_curator.errors import check_on_bad_record
from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.columns import column_values, put_column, with_table
from beam_curator.stages.text.documents import each_document, screen_texts
from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.dropped import split_rows, write_exclusions
from beam_curator.stages.text.filters.fields import per_function, stage_name
from beam_curator.stages.text.functions import as_functions, function_name
from beam_curator.stages.text.settings import describe
from beam_curator.tasks import DocumentBatch

ScoreFunction = Callable[[Any], Any]


class _FilterStage(ProcessingStage):
    """What the three stages share: model loading per worker, and a fingerprint that holds the
    filters' settings (so a rerun with another threshold is a changed pipeline)."""

    functions_setting = ""  # the attribute holding the list of filters

    def _functions(self) -> list[Any]:
        return getattr(self, self.functions_setting)

    def setup(self) -> None:
        """Load each filter's model or tokenizer once per worker, as NeMo Curator's stages do for a
        filter with ``load_model`` or ``load_tokenizer``."""
        for function in self._functions():
            for loader in ("load_model", "load_tokenizer"):
                if isinstance(function, DocumentFilter) and hasattr(function, loader):
                    getattr(function, loader)()

    def fingerprint(self) -> object:
        settings = dict(super().fingerprint())  # type: ignore[arg-type]
        settings[self.functions_setting] = [describe(function) for function in self._functions()]
        return settings


class _DroppingStage(_FilterStage):
    """What ``Filter`` and ``ScoreFilter`` share: the documents they drop, with the filter and score
    that dropped each, written to ``exclusion_path`` where it is given."""

    exclusion_path: str | None = None

    def decide(self, task: DocumentBatch) -> tuple[DocumentBatch, list[pa.Table]]:
        """The batch of the documents kept, and those dropped with ``filter_name`` and
        ``filter_score``, a table per filter that dropped any (each keeps its scores' type): what
        ``process`` keeps, and what ``FilterDocuments`` gives as ``.dropped``."""
        dropped: list[pa.Table] = []
        kept = self._kept(task, dropped)
        if self.exclusion_path is not None:
            write_exclusions(self.exclusion_path, task, dropped)
        return kept, dropped

    @abstractmethod
    def _kept(self, task: DocumentBatch, dropped: list[pa.Table]) -> DocumentBatch:
        """The kept documents; the dropped ones added to ``dropped`` (``dropped.split_rows``)."""

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return self.decide(task)[0]


class Score(_FilterStage):
    """Adds each filter's score as a column and keeps every document.

    Args:
        score_fn: a ``DocumentFilter`` (its ``score_document`` scores), a function of one text, or a
            list of them, applied in order.
        score_field: the column each score goes to; one per filter when several are given.
        text_field: the column scored, or a list of one per filter.
        name: the stage's name; by default the filter's name, ``score_fn`` for a function, or
            ``score_chain_of_<names>`` for a list.
        on_bad_record: a document whose text is missing or not a string stops the run with an error
            naming it (``"raise"``), or is dropped and counted (``"skip"``), as the readers take it.
    """

    functions_setting = "score_fn"

    def __init__(self, score_fn: DocumentFilter | ScoreFunction | list[DocumentFilter | ScoreFunction],
                 score_field: str | list[str], text_field: str | list[str] = "text", name: str | None = None,
                 on_bad_record: str = "raise") -> None:
        self.score_fn = as_functions(score_fn, "score_fn", DocumentFilter)
        count = len(self.score_fn)
        self.text_field = per_function(text_field, count, "text_field", str)
        self.score_field = per_function(score_field, count, "score_field", str, shared=False)
        self.name = name or stage_name(self.score_fn, "score")
        check_on_bad_record(on_bad_record, self.name)
        self.on_bad_record = on_bad_record

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = screen_texts(self, task, task.to_pyarrow(), self.text_field, self.on_bad_record)
        for function, text_field, score_field in zip(self.score_fn, self.text_field, self.score_field):
            score = function.score_document if isinstance(function, DocumentFilter) else function
            scores = each_document(score, column_values(table, text_field), function_name(function), task, table,
                                   self.text_field)
            table = put_column(table, score_field, scores)
        return with_table(task, table)


class Filter(_DroppingStage):
    """Keeps the documents whose stored value passes each filter; computes no score.

    Args:
        filter_fn: a ``DocumentFilter`` (its ``keep_document`` decides), a function of one value
            returning whether to keep, or a list of them, applied in order.
        filter_field: the column passed to the filter; with several filters, a list of one per filter.
        invert: keep the documents the filter would drop instead; a bool, or a list of one per filter.
        name: the stage's name; by default the filter's name, ``filter_fn`` for a function, or
            ``filter_chain_of_<names>`` for a list.
        exclusion_path: a folder to write the dropped documents to (JSON Lines, one file per batch,
            each document with ``filter_name`` and ``filter_score``, the value it was dropped on);
            None writes nothing.
    """

    functions_setting = "filter_fn"

    def __init__(self, filter_fn: DocumentFilter | ScoreFunction | list[DocumentFilter | ScoreFunction],
                 filter_field: str | list[str], invert: bool | list[bool] = False, name: str | None = None,
                 exclusion_path: str | None = None) -> None:
        self.filter_fn = as_functions(filter_fn, "filter_fn", DocumentFilter)
        count = len(self.filter_fn)
        self.filter_field = per_function(filter_field, count, "filter_field", str, shared=False)
        self.invert = per_function(invert, count, "invert", bool)
        self.name = name or stage_name(self.filter_fn, "filter")
        self.exclusion_path = exclusion_path

    def _kept(self, task: DocumentBatch, dropped: list[pa.Table]) -> DocumentBatch:
        table = task.to_pyarrow()
        for function, field, invert in zip(self.filter_fn, self.filter_field, self.invert):
            keep = function.keep_document if isinstance(function, DocumentFilter) else function
            values = column_values(table, field)
            name = function_name(function)
            decisions = each_document(lambda value: bool(keep(value)) != invert, values, name, task, table, [])
            table = split_rows(self, table, decisions, values, name, len(self.filter_fn), dropped)
        return with_table(task, table)


class ScoreFilter(_DroppingStage):
    """Scores each document and keeps those the filter keeps; the scores are kept as a column only
    where ``score_field`` names one.

    With a list of filters, each scores only the documents the filters before it kept.

    Args:
        filter_obj: a ``DocumentFilter`` or a list of them, applied in order.
        text_field: the column scored, or a list of one per filter.
        score_field: the column each score is written to (before the filter drops rows), or None to
            discard the scores; with several filters, None or a list of one per filter (None entries
            discard that filter's score).
        invert: keep the documents the filter would drop instead; a bool, or a list of one per filter.
        name: the stage's name; by default the filter's name, or ``score_filter_chain_of_<names>``.
        exclusion_path: a folder to write the dropped documents to (JSON Lines, one file per batch,
            each document with ``filter_name`` and ``filter_score``); None writes nothing.
        on_bad_record: a document whose text is missing or not a string stops the run with an error
            naming it (``"raise"``), or is dropped and counted (``"skip"``), as the readers take it.
    """

    functions_setting = "filter_obj"

    def __init__(self, filter_obj: DocumentFilter | list[DocumentFilter], text_field: str | list[str] = "text",
                 score_field: str | list[str | None] | None = None, invert: bool | list[bool] = False,
                 name: str | None = None, exclusion_path: str | None = None, on_bad_record: str = "raise") -> None:
        self.filter_obj = as_functions(filter_obj, "filter_obj", DocumentFilter)
        for function in self.filter_obj:
            if not isinstance(function, DocumentFilter):
                raise TypeError(f"ScoreFilter needs DocumentFilters (a score and a decision), not {function!r}; "
                                "use Score and Filter for separate functions")
        count = len(self.filter_obj)
        self.text_field = per_function(text_field, count, "text_field", str)
        self.score_field = (
            [None] * count if score_field is None
            else per_function(score_field, count, "score_field", str, shared=False, optional=True))
        self.invert = per_function(invert, count, "invert", bool)
        self.name = name or stage_name(self.filter_obj, "score_filter")
        self.exclusion_path = exclusion_path
        check_on_bad_record(on_bad_record, self.name)
        self.on_bad_record = on_bad_record

    def _kept(self, task: DocumentBatch, dropped: list[pa.Table]) -> DocumentBatch:
        table = screen_texts(self, task, task.to_pyarrow(), self.text_field, self.on_bad_record)
        for document_filter, text_field, score_field, invert in zip(
                self.filter_obj, self.text_field, self.score_field, self.invert):
            name = document_filter.name
            scores = each_document(document_filter.score_document, column_values(table, text_field), name, task,
                                   table, self.text_field)
            if score_field is not None:
                table = put_column(table, score_field, scores)
            decisions = each_document(lambda score: bool(document_filter.keep_document(score)) != invert, scores,
                                      name, task, table, self.text_field)
            table = split_rows(self, table, decisions, scores, name, len(self.filter_obj), dropped)
        return with_table(task, table)
