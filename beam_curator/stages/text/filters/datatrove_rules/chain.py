"""``DatatroveRules``: a chain of datatrove rules in one stage, cutting each text once for all of
them (see ``apply``)."""

from __future__ import annotations

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.filters.datatrove_rules.apply import run_rules
from beam_curator.stages.text.filters.datatrove_rules.rule import DatatroveRule
from beam_curator.tasks import DocumentBatch


class DatatroveRules(ProcessingStage):
    """Several datatrove rules in one stage, in order: a document goes on to the next rule only if the
    ones before kept it, as through datatrove's steps, and each rule sees the text as the ones before
    left it. Each rule's ``text_field`` and ``reason_field`` give way to the chain's own.

    Args:
        rules: the rules, e.g. ``[GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(),
            FineWebQualityFilter()]`` for FineWeb's chain.
        text_field: the column holding the text.
        reason_field: None to drop the documents a rule drops; a column name to keep every document
            and write there the reason of the rule that dropped it (null for those all rules keep).
        name: the stage's name; by default ``datatrove_rules_<rule names>``.
    """

    def __init__(self, rules: list[DatatroveRule], text_field: str = "text", reason_field: str | None = None,
                 name: str | None = None) -> None:
        if not rules or not all(isinstance(rule, DatatroveRule) for rule in rules):
            raise TypeError(f"rules must be a non-empty list of datatrove rules (GopherQualityFilter, ...): {rules!r}")
        self.rules = list(rules)
        self.text_field = text_field
        self.reason_field = reason_field
        self.name = name or "datatrove_rules_" + "_".join(rule.name for rule in self.rules)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return run_rules(self.rules, task, self.text_field, self.reason_field)

