"""Running datatrove rules over a batch: each text goes through the rules in order until one drops
it, with one ``Document`` per text, so the words and lines made for one rule serve the next ones
(datatrove's steps each split the text again)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from beam_curator.stages.text.columns import column_values, keep_rows, put_column, with_table
from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.tasks import DocumentBatch

if TYPE_CHECKING:
    from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule


def run_rules(rules: list[DatatroveRule], task: DocumentBatch, text_field: str,
              reason_field: str | None) -> DocumentBatch:
    """The batch after the rules: the dropped rows removed (or their reasons written to
    ``reason_field``), and the kept rows' text as the rules left it."""
    table = task.to_pyarrow()
    texts = column_values(table, text_field)
    languages = _languages(rules, table)
    reasons: list[str | None] = []
    outputs: list[str] = []
    for text, language in zip(texts, languages):
        doc = Document(text, language)
        reason = None
        for rule in rules:
            reason = rule.check(doc)
            if reason is not None:
                break
        reasons.append(reason)
        outputs.append(text if reason is not None else doc.text)
    if outputs != texts:
        table = put_column(table, text_field, outputs)
    if reason_field is not None:
        return with_table(task, put_column(table, reason_field, reasons))
    return with_table(task, keep_rows(table, [reason is None for reason in reasons]))


def _languages(rules: list[DatatroveRule], table: pa.Table) -> list[str | None]:
    """Each row's language, from the column the rules read it from (``C4BadWordsFilter``'s
    ``language_field``) when the batch has it, else None (the rule's default language)."""
    fields = {rule.language_field for rule in rules if rule.language_field is not None}
    if len(fields) > 1:
        raise ValueError(f"the rules read the language from different columns {sorted(fields)}; use one")
    field = next(iter(fields), None)
    if field is None or field not in table.column_names:
        return [None] * table.num_rows
    return column_values(table, field)
