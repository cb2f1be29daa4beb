"""``Modify``: the stage that applies document modifiers to a batch's fields, with NeMo Curator's
parameters and rules (see ``fields`` for which fields are read and written). Beyond them, as the
filter stages: ``on_bad_record`` for texts that are missing or not strings, and a modifier that
raises is named with the document it raised on (``stages.text.documents``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beam_curator.errors import check_on_bad_record
from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.columns import column_values, put_column, with_table
from beam_curator.stages.text.documents import each_document, screen_texts
from beam_curator.stages.text.functions import as_functions, function_name
from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier
from beam_curator.stages.text.modifiers.fields import input_fields_per_modifier, output_fields_per_modifier
from beam_curator.stages.text.settings import describe
from beam_curator.tasks import DocumentBatch

ModifyFunction = Callable[..., Any]


class Modify(ProcessingStage):
    """Applies each modifier in order to every document of a batch, one loop over the batch per
    modifier; a later modifier sees what an earlier one wrote.

    Args:
        modifier_fn: a ``DocumentModifier`` (its ``modify_document`` is applied), a function, or a
            list of them.
        input_fields: the field each modifier reads: one name for all, a list of one per modifier,
            or a list of lists to give a modifier several fields as keyword arguments.
        output_fields: the field each modifier writes: None (in place), one name for all, or a list of
            one per modifier (``None`` entries in place).
        name: the stage's name; by default the modifier's name (a function's ``__name__``), or
            ``modifier_chain_of_<names>`` for a list.
        on_bad_record: a document whose text (the one field a ``DocumentModifier`` reads) is missing
            or not a string stops the run with an error naming it (``"raise"``), or is dropped and
            counted (``"skip"``), as the readers take it. Fields of plain functions are not checked.
    """

    def __init__(self, modifier_fn: DocumentModifier | ModifyFunction | list[DocumentModifier | ModifyFunction],
                 input_fields: str | list[str] | list[list[str]] = "text",
                 output_fields: str | list[str | None] | None = None, name: str | None = None,
                 on_bad_record: str = "raise") -> None:
        self.modifier_fn = as_functions(modifier_fn, "modifier_fn", DocumentModifier)
        self.input_fields = input_fields_per_modifier(input_fields, len(self.modifier_fn))
        self.output_fields = output_fields_per_modifier(output_fields, self.input_fields)
        names = [function_name(modifier) for modifier in self.modifier_fn]
        self.name = name or (names[0] if len(names) == 1 else "modifier_chain_of_" + "_".join(names))
        check_on_bad_record(on_bad_record, self.name)
        self.on_bad_record = on_bad_record

    def fingerprint(self) -> object:
        settings = dict(super().fingerprint())  # type: ignore[arg-type]
        settings["modifier_fn"] = [describe(modifier) for modifier in self.modifier_fn]
        return settings

    def process(self, task: DocumentBatch) -> DocumentBatch:
        texts = [inputs[0] for modifier, inputs in zip(self.modifier_fn, self.input_fields)
                 if isinstance(modifier, DocumentModifier) and len(inputs) == 1]
        table = screen_texts(self, task, task.to_pyarrow(), texts, self.on_bad_record)
        for modifier, inputs, output in zip(self.modifier_fn, self.input_fields, self.output_fields):
            modify = modifier.modify_document if isinstance(modifier, DocumentModifier) else modifier
            if len(inputs) == 1:
                values = each_document(modify, column_values(table, inputs[0]), function_name(modifier), task, table,
                                       [inputs[0]])
            else:
                rows = list(zip(*(column_values(table, field) for field in inputs)))
                values = each_document(lambda row: modify(**dict(zip(inputs, row))), rows, function_name(modifier),
                                       task, table, list(inputs))
            table = put_column(table, output, values)
        return with_table(task, table)
