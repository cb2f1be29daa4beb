"""A rerun whose stages or settings differ from those that made the checkpoint's marks is refused,
naming the change, unless told to keep the marks (issue: min_chars 200 -> 400 reran as "6 partitions
already complete" and kept the old output)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from beam_curator import Pipeline
from beam_curator.checkpoint import open_store
from beam_curator.pipeline import PipelineChangedError
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter
from stages_for_tests import PARTITIONS, DropShort, UpperInBatches, write_corpus, written_records


class Scaled(ProcessingStage):
    """Its settings live in a private attribute: it says what matters through ``fingerprint``."""

    def __init__(self, factor: int, cache_dir: str) -> None:
        self._factor = factor
        self.cache_dir = cache_dir  # where it would keep scratch files: not a setting of its results

    def fingerprint(self) -> object:
        return {"factor": self._factor}

    def process(self, task):
        return task


def pipeline(corpus: Path, out: Path, *middle: ProcessingStage, **reader: object) -> Pipeline:
    return Pipeline("changes", stages=[JsonlReader(str(corpus), **reader), *middle, JsonlWriter(str(out))])


def test_a_changed_setting_is_refused_naming_it_and_keep_or_reset_go_on(tmp_path: Path, caplog) -> None:
    corpus, out, ckpt = write_corpus(tmp_path / "in", PARTITIONS), tmp_path / "out", str(tmp_path / "ckpt")
    first = pipeline(corpus, out, DropShort(min_length=5)).run(ckpt)
    assert first.partitions_completed == PARTITIONS
    kept_before = len(written_records(out))
    with pytest.raises(PipelineChangedError) as caught:
        pipeline(corpus, out, DropShort(min_length=40)).run(ckpt)
    message = str(caught.value)
    assert "stage 'drop_short': min_length 5 -> 40" in message
    assert f"beam-curator checkpoint reset {ckpt}" in message and "changed_pipeline='keep'" in message
    with caplog.at_level(logging.WARNING, logger="beam_curator.transforms.refusals"):
        kept = pipeline(corpus, out, DropShort(min_length=40)).run(ckpt, changed_pipeline="keep")
    assert kept.partitions_skipped == PARTITIONS and "keeping its marks as asked" in caplog.text
    # Now recorded as the pipeline of these marks: the same pipeline reruns without a word.
    assert pipeline(corpus, out, DropShort(min_length=40)).run(ckpt).partitions_skipped == PARTITIONS
    open_store(ckpt).reset()
    for file in out.glob("*.jsonl"):
        file.unlink()
    fresh = pipeline(corpus, out, DropShort(min_length=5)).run(ckpt)
    assert fresh.partitions_completed == PARTITIONS and len(written_records(out)) == kept_before


def test_an_added_or_replaced_stage_is_named(tmp_path: Path) -> None:
    corpus, out, ckpt = write_corpus(tmp_path / "in", 3), tmp_path / "out", str(tmp_path / "ckpt")
    pipeline(corpus, out).run(ckpt)
    with pytest.raises(PipelineChangedError, match=r"stages were \['file_partitioning', 'jsonl_reader', "
                                                   r"'jsonl_writer'\], now \['file_partitioning', 'jsonl_reader', "
                                                   r"'upper_in_batches', 'jsonl_writer'\]"):
        pipeline(corpus, out, UpperInBatches()).run(ckpt)


def test_a_stages_own_fingerprint_decides_and_inputs_and_shards_are_not_settings(tmp_path: Path) -> None:
    corpus, out, ckpt = write_corpus(tmp_path / "in", 4), tmp_path / "out", str(tmp_path / "ckpt")
    pipeline(corpus, out, Scaled(2, "/tmp/a")).run(ckpt)
    assert pipeline(corpus, out, Scaled(2, "/tmp/b")).run(ckpt).partitions_skipped == 4, "not a setting"
    with pytest.raises(PipelineChangedError, match="stage 'Scaled': factor 2 -> 3"):
        pipeline(corpus, out, Scaled(3, "/tmp/a")).run(ckpt)
    # Another shard of the same input, and the same stages on a copy of the input: the same pipeline.
    assert pipeline(corpus, out, Scaled(2, "/tmp/a"), shard=(0, 2)).run(ckpt).partitions_pending == 0
    other = write_corpus(tmp_path / "more", 2)
    assert pipeline(other, out, Scaled(2, "/tmp/a")).run(ckpt).partitions_completed == 2


def test_a_checkpoint_without_marks_takes_the_new_pipeline(tmp_path: Path) -> None:
    corpus, ckpt = write_corpus(tmp_path / "in", 2), str(tmp_path / "ckpt")
    open_store(ckpt).record_pipeline([{"stage": "something else", "class": "x", "settings": {}}])
    assert pipeline(corpus, tmp_path / "out").run(ckpt).partitions_completed == 2
