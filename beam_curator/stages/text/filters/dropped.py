"""What the filter stages keep of the documents they drop: which filter dropped each and its score,
counts per filter, and the exclusion files a user reads to see what a rule removed.

NeMo Curator's stages drop documents without a trace; datatrove's filters can write them out
(``exclusion_writer``). Here a filter stage given ``exclusion_path`` writes the documents it
dropped from a batch to one JSON Lines file, named as a writer names its outputs
(``stages.io.writer.output_name``: the batch's input file and a hash of its lineage id), so that a
replayed partition overwrites its file instead of adding another.
"""

from __future__ import annotations

from typing import Any

import fsspec
import pyarrow as pa

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.io.jsonl import JsonlWriter
from beam_curator.stages.text.columns import keep_rows, put_column
from beam_curator.tasks import DocumentBatch

FILTER_NAME, FILTER_SCORE = "filter_name", "filter_score"  # the fields a dropped document gains
# What a filter stage counts per filter (``ProcessingStage.count``), as ``<filter>.<what>``.
DOCUMENTS_IN, DOCUMENTS_KEPT, DOCUMENTS_DROPPED = "documents_in", "documents_kept", "documents_dropped"


def split_rows(stage: ProcessingStage, table: pa.Table, keep: list[bool], scores: list[Any], filter_name: str,
               chained: int, dropped: list[pa.Table]) -> pa.Table:
    """The rows of ``table`` to keep; those to drop are added to ``dropped`` with the filter's name
    and their scores, and the filter's documents in, kept and dropped are counted.

    A stage that holds one filter (``chained`` is 1) names it by its own name, the filter's unless
    the user named the stage; in a chain of several, the dropped documents name the filter, and its
    counts are ``<stage>.<filter>``, so that two stages' filters of one kind are told apart."""
    counted = stage.stage_name if chained == 1 else f"{stage.stage_name}.{filter_name}"
    filter_name = stage.stage_name if chained == 1 else filter_name
    kept = sum(keep)
    stage.count(f"{counted}.{DOCUMENTS_IN}", len(keep))
    stage.count(f"{counted}.{DOCUMENTS_KEPT}", kept)
    stage.count(f"{counted}.{DOCUMENTS_DROPPED}", len(keep) - kept)
    if kept < len(keep):
        drop = [not flag for flag in keep]
        gone = keep_rows(table, drop)
        gone = put_column(gone, FILTER_NAME, [filter_name] * gone.num_rows)
        dropped.append(put_column(gone, FILTER_SCORE, [score for score, flag in zip(scores, drop) if flag]))
    return keep_rows(table, keep)


def write_exclusions(exclusion_path: str, task: DocumentBatch, dropped: list[pa.Table]) -> None:
    """Write the documents dropped from ``task`` (a table per filter, of ``split_rows``) to
    ``exclusion_path`` as JSON Lines, atomically, under the name a writer would give the batch (the
    same on every replay); where none were dropped, remove a file of that name that an earlier run
    with other settings left. A later filter's rows hold the score columns an earlier one added,
    the others hold nulls there."""
    writer = JsonlWriter(exclusion_path)
    if dropped:
        writer.process(DocumentBatch(task_id=task.task_id, dataset_name=task.dataset_name,
                                     data=pa.concat_tables(dropped, promote_options="permissive"),
                                     _metadata=task._metadata))
        return
    fs, path = fsspec.core.url_to_fs(f"{writer.path}/{writer.file_stem(task)}.{writer.extension}")
    if fs.exists(path):
        fs.rm(path)
