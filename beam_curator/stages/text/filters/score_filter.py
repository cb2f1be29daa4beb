"""The stages that run document filters over batches: ``Score`` (add scores), ``Filter`` (drop rows
on stored scores) and ``ScoreFilter`` (both at once), with NeMo Curator's parameters and rules.

Each takes one filter or a list applied in order; with a list, the field settings may be lists of
one per filter (see ``fields.per_function``). Each call scores a whole batch's column in one loop per
filter, so a batch costs one Python call per document and filter, and no Beam step per document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.columns import column_values, keep_rows, put_column, with_table
from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.stages.text.filters.fields import per_function, stage_name
from beam_curator.stages.text.functions import as_functions
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


class Score(_FilterStage):
    """Adds each filter's score as a column and keeps every document.

    Args:
        score_fn: a ``DocumentFilter`` (its ``score_document`` scores), a function of one text, or a
            list of them, applied in order.
        score_field: the column each score goes to; one per filter when several are given.
        text_field: the column scored, or a list of one per filter.
        name: the stage's name; by default the filter's name, ``score_fn`` for a function, or
            ``score_chain_of_<names>`` for a list.
    """

    functions_setting = "score_fn"

    def __init__(self, score_fn: DocumentFilter | ScoreFunction | list[DocumentFilter | ScoreFunction],
                 score_field: str | list[str], text_field: str | list[str] = "text", name: str | None = None) -> None:
        self.score_fn = as_functions(score_fn, "score_fn", DocumentFilter)
        count = len(self.score_fn)
        self.text_field = per_function(text_field, count, "text_field", str)
        self.score_field = per_function(score_field, count, "score_field", str, shared=False)
        self.name = name or stage_name(self.score_fn, "score")

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        for function, text_field, score_field in zip(self.score_fn, self.text_field, self.score_field):
            score = function.score_document if isinstance(function, DocumentFilter) else function
            table = put_column(table, score_field, [score(text) for text in column_values(table, text_field)])
        return with_table(task, table)


class Filter(_FilterStage):
    """Keeps the documents whose stored value passes each filter; computes no score.

    Args:
        filter_fn: a ``DocumentFilter`` (its ``keep_document`` decides), a function of one value
            returning whether to keep, or a list of them, applied in order.
        filter_field: the column passed to the filter; with several filters, a list of one per filter.
        invert: keep the documents the filter would drop instead; a bool, or a list of one per filter.
        name: the stage's name; by default the filter's name, ``filter_fn`` for a function, or
            ``filter_chain_of_<names>`` for a list.
    """

    functions_setting = "filter_fn"

    def __init__(self, filter_fn: DocumentFilter | ScoreFunction | list[DocumentFilter | ScoreFunction],
                 filter_field: str | list[str], invert: bool | list[bool] = False, name: str | None = None) -> None:
        self.filter_fn = as_functions(filter_fn, "filter_fn", DocumentFilter)
        count = len(self.filter_fn)
        self.filter_field = per_function(filter_field, count, "filter_field", str, shared=False)
        self.invert = per_function(invert, count, "invert", bool)
        self.name = name or stage_name(self.filter_fn, "filter")

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        for function, field, invert in zip(self.filter_fn, self.filter_field, self.invert):
            keep = function.keep_document if isinstance(function, DocumentFilter) else function
            table = keep_rows(table, [bool(keep(value)) != invert for value in column_values(table, field)])
        return with_table(task, table)


class ScoreFilter(_FilterStage):
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
    """

    functions_setting = "filter_obj"

    def __init__(self, filter_obj: DocumentFilter | list[DocumentFilter], text_field: str | list[str] = "text",
                 score_field: str | list[str | None] | None = None, invert: bool | list[bool] = False,
                 name: str | None = None) -> None:
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

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        for document_filter, text_field, score_field, invert in zip(
                self.filter_obj, self.text_field, self.score_field, self.invert):
            scores = [document_filter.score_document(text) for text in column_values(table, text_field)]
            if score_field is not None:
                table = put_column(table, score_field, scores)
            table = keep_rows(table, [bool(document_filter.keep_document(score)) != invert for score in scores])
        return with_table(task, table)
