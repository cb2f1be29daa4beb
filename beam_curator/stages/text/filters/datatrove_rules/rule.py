"""``DatatroveRule``: what datatrove's rule sets share here. Each is a pipeline stage of its own (a
datatrove pipeline's filter ports as one stage) and a ``DocumentFilter`` (so ``ScoreFilter`` can run
it too), and decides through ``check``, which returns datatrove's reason for dropping a document."""

from __future__ import annotations

from abc import abstractmethod

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.text.filters.datatrove_rules.apply import run_rules
from beam_curator.stages.text.filters.datatrove_rules.document import Document
from beam_curator.stages.text.filters.doc_filter import DocumentFilter
from beam_curator.tasks import DocumentBatch


class DatatroveRule(ProcessingStage, DocumentFilter):
    """A datatrove filter as a stage.

    As a stage it drops the documents datatrove drops; with ``reason_field`` it keeps every document
    and writes datatrove's reason (its ``filter_reason``: ``"gopher_short_doc"``, ``"top_2_gram"``...)
    to that column, null for the documents it keeps. A rule that rewrites the text (C4's line
    removals) writes the kept documents' new text to ``text_field``, as datatrove changes
    ``doc.text``. As a ``DocumentFilter`` its score is the reason (None when kept), and it rewrites
    nothing: run it as a stage to have the text rewritten.

    Subclasses implement ``check`` and take ``text_field`` and ``reason_field`` after datatrove's
    own parameters; ``exclusion_writer`` is refused (keep a reason column and write the dropped
    documents with a writer instead).
    """

    language_field: str | None = None  # the column ``check`` reads ``doc.language`` from, if any

    def __init__(self, text_field: str = "text", reason_field: str | None = None) -> None:
        DocumentFilter.__init__(self)
        self.name = type(self).__name__
        self.text_field = text_field
        self.reason_field = reason_field

    @abstractmethod
    def check(self, doc: Document) -> str | None:
        """Why datatrove drops this document, or None when it keeps it."""

    def score_document(self, text: str) -> str | None:
        return self.check(Document(text))

    def keep_document(self, score: str | None) -> bool:
        return score is None

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return run_rules([self], task, self.text_field, self.reason_field)


def refuse_exclusion_writer(exclusion_writer: object) -> None:
    """datatrove's ``exclusion_writer`` (a writer of the dropped documents) has no place in a stage,
    which returns one batch: name the way that replaces it."""
    if exclusion_writer is not None:
        raise ValueError("exclusion_writer is not supported: give reason_field to keep the dropped documents with "
                         "datatrove's reason as a column, then split on it and write them where you want")
