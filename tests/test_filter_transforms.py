"""The filter and modifier stages outside NeMo Curator's own runner (issue 47, items 3, 6 and 7):
``FilterDocuments`` in a user's Beam pipeline over dicts and Rows, the stages in ``CuratorStages``
and in a resumable ``Pipeline`` with counts per filter and exclusion files, and what a document
without a usable text, or a filter that raises, stops a run with.

Every expectation is computed by running the same stages directly on one batch of the sample corpus.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from beam_curator import Pipeline
from beam_curator.data import sample_corpus_path
from beam_curator.runners import pipeline_options
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.text.documents import DocumentFailedError
from beam_curator.stages.text.filters import DocumentFilter, Filter, ScoreFilter
from beam_curator.stages.text.filters.heuristic import MeanWordLengthFilter, WordCountFilter
from beam_curator.stages.text.modifiers import Modify, UnicodeReformatter
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import CuratorStages, FilterDocuments

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import killed_and_rerun  # noqa: E402

CORPUS = Path(sample_corpus_path())


def corpus() -> list[dict]:
    return [json.loads(line) for path in sorted(CORPUS.glob("*.jsonl")) for line in path.read_text().splitlines()]


def stages(exclusion_path: str | None = None) -> list:
    """A modifier, a chain of two scoring filters, and a filter on a stored score: every kind."""
    return [Modify(UnicodeReformatter()),
            ScoreFilter([WordCountFilter(min_words=30), MeanWordLengthFilter(max_mean_word_length=7)],
                        score_field=["words", "mean_length"], exclusion_path=exclusion_path),
            Filter(WordCountFilter(min_words=40), filter_field="words", name="long_texts")]


def applied_directly(documents: list[dict]) -> tuple[list[dict], list[dict]]:
    """The kept and dropped documents of the stages' own ``process``/``decide`` on one batch."""
    task = DocumentBatch(task_id="direct", data=pa.Table.from_pylist(documents))
    dropped = []
    for stage in stages():
        if isinstance(stage, (ScoreFilter, Filter)):
            task, gone = stage.decide(task)
            dropped += [row for table in gone for row in table.to_pylist()]
        else:
            task = stage.process(task)
    return task.to_pyarrow().to_pylist(), dropped


def by_id(documents: list[dict]) -> list[dict]:
    return sorted(documents, key=lambda document: document["doc_id"])


def plain(element: Any) -> tuple[str, str]:
    """An output element as comparable text, with the kind it came as."""
    fields = element if isinstance(element, dict) else element._asdict()
    return ("dict" if isinstance(element, dict) else "row"), json.dumps(fields, sort_keys=True)


@pytest.mark.parametrize("runner", ["DirectRunner", "local-multiprocess"])
def test_the_transform_keeps_what_the_stages_keep_and_says_which_filter_dropped_the_rest(
        runner: str, worker_pythonpath: None) -> None:
    documents = corpus()
    kept, dropped = applied_directly(documents)
    assert len(kept) > 100 and {row["filter_name"] for row in dropped} == {
        "word_count", "mean_word_length", "long_texts"}, "the corpus must meet every filter"
    keys = ["doc_id", "package", "text", "words", "mean_length"]

    def expected(rows: list[dict], kind: str, extra: list[str]) -> list[tuple[str, str]]:
        return [(kind, json.dumps({key: row.get(key) for key in keys + extra}, sort_keys=True)) for row in rows]

    options = pipeline_options(runner, num_workers=2) if runner != "DirectRunner" else None
    with beam.Pipeline(runner=runner if options is None else None, options=options) as p:
        dicts = p | "Dicts" >> beam.Create(documents) | "FilterDicts" >> FilterDocuments(stages(), max_batch_size=64)
        rows = (p | "Rows" >> beam.Create([beam.Row(doc_id=d["doc_id"], package=d["package"], text=d["text"])
                                           for d in documents])
                | "FilterRows" >> FilterDocuments(stages(), max_batch_size=64))
        assert [name for name, _ in rows.kept.element_type._fields] == keys
        assert [name for name, _ in rows.dropped.element_type._fields] == keys + ["filter_name", "filter_score"]
        for kind, outputs in (("dict", dicts), ("row", rows)):
            assert_that(outputs.kept | f"{kind}Kept" >> beam.Map(plain), equal_to(expected(kept, kind, [])),
                        label=f"{kind}KeptAsDirectly")
            assert_that(outputs.dropped | f"{kind}Dropped" >> beam.Map(plain),
                        equal_to(expected(dropped, kind, ["filter_name", "filter_score"])),
                        label=f"{kind}DroppedAsDirectly")


def test_a_rows_text_that_is_not_a_string_follows_on_bad_record() -> None:
    documents = [{"doc_id": "a", "text": "one two three"}, {"doc_id": "b", "text": 5}, {"doc_id": "c"}]
    only = [ScoreFilter(WordCountFilter(min_words=2))]
    with pytest.raises(Exception, match=r"the document with doc_id 'b': text_field 'text' holds a int"):
        with beam.Pipeline(runner="DirectRunner") as p:
            _ = p | beam.Create(documents) | FilterDocuments(only, id_field="doc_id")

    with beam.Pipeline(runner="DirectRunner") as p:
        outputs = p | beam.Create(documents) | FilterDocuments(only, on_bad_record="skip")
        assert_that(outputs.kept | beam.Map(lambda document: document["doc_id"]), equal_to(["a"]))
        assert_that(outputs.dropped, equal_to([]), label="NothingDropped")
    result = p.result
    counters = {counter.key.metric.name: counter.committed for counter in result.metrics().query(
        MetricsFilter().with_namespace("FilterDocuments"))["counters"]}
    assert counters == {"bad_records_skipped": 2}


class FailsOn(DocumentFilter):
    """Raises on a text that holds ``word``, as a filter with a bug would."""

    def __init__(self, word: str) -> None:
        super().__init__()
        self.word = word

    def score_document(self, text: str) -> int:
        if self.word in text:
            raise ZeroDivisionError("division by zero")
        return len(text)

    def keep_document(self, score: int) -> bool:
        return True


def test_a_filter_that_raises_is_named_with_the_document_in_the_transform() -> None:
    documents = [{"doc_id": "a", "text": "fine"}, {"doc_id": "b", "text": "a bug here"}]
    with pytest.raises(Exception, match=r'FailsOn raised ZeroDivisionError \(division by zero\) on row \d+ '
                                        r'\(\{"doc_id": "b", '):
        with beam.Pipeline(runner="DirectRunner") as p:
            _ = p | beam.Create(documents) | FilterDocuments([ScoreFilter(FailsOn("bug"))], id_field="doc_id")


def resumable(tmp_path: Path, stage: ScoreFilter, files: str = str(CORPUS)) -> Pipeline:
    return Pipeline("filters", stages=[JsonlReader(files, files_per_partition=2), stage,
                                       JsonlWriter(str(tmp_path / "out"))])


def exclusions(folder: Path) -> dict[str, list[dict]]:
    return {path.name: [json.loads(line) for line in path.read_text().splitlines()]
            for path in sorted(folder.glob("*.jsonl"))}


@pytest.mark.parametrize("runner", ["local", "in-process"])
def test_a_resumable_run_counts_each_filter_and_writes_what_it_dropped_once(tmp_path: Path, runner: str) -> None:
    _, dropped = applied_directly(corpus())
    chain = stages(str(tmp_path / "excluded"))[1]  # the two scoring filters
    checkpoint = str(tmp_path / "checkpoint")
    summary = resumable(tmp_path, chain).run(checkpoint_path=checkpoint, runner=runner)

    task = DocumentBatch(task_id="direct", data=pa.Table.from_pylist(corpus()))
    chain_alone = ScoreFilter([WordCountFilter(min_words=30), MeanWordLengthFilter(max_mean_word_length=7)],
                              score_field=["words", "mean_length"])
    chain_alone.decide(task)
    expected = chain_alone.take_counts()
    named = chain.stage_name
    assert summary.filters == {
        f"{named}.{name}": {what: expected[f"{named}.{name}.documents_{what}"] for what in ("in", "kept", "dropped")}
        for name in ("word_count", "mean_word_length")}
    words = summary.filters[f"{named}.word_count"]
    assert words["in"] == 614 and words["dropped"] > 0
    assert f"{named}.word_count: 614 documents in, {words['kept']} kept, {words['dropped']} dropped" in str(summary)

    written = exclusions(tmp_path / "excluded")
    assert len(written) == 3 and all(name.startswith("part-0000") for name in written), "one file per batch"
    rows = [row for file in written.values() for row in file]
    assert sorted((row["doc_id"], row["filter_name"], row["filter_score"]) for row in rows) == sorted(
        (row["doc_id"], row["filter_name"], row["filter_score"]) for row in dropped
        if row["filter_name"] != "long_texts")  # the third filter is not in this pipeline

    again = resumable(tmp_path, chain).run(checkpoint_path=checkpoint, runner=runner)
    assert (again.partitions_skipped, again.filters) == (3, {})
    (tmp_path / "out").rename(tmp_path / "first-out")
    (tmp_path / "checkpoint").rename(tmp_path / "first-checkpoint")
    resumable(tmp_path, chain).run(checkpoint_path=checkpoint, runner=runner)
    assert exclusions(tmp_path / "excluded") == written, "a rerun overwrites its files: no duplicates"


def test_the_stages_run_in_curator_stages_and_count_there(tmp_path: Path) -> None:
    kept, _ = applied_directly(corpus())
    with beam.Pipeline(runner="DirectRunner") as p:
        _ = p | "Filters" >> CuratorStages([JsonlReader(str(CORPUS)), *stages(), JsonlWriter(str(tmp_path / "out"))])
    written = [json.loads(line) for path in (tmp_path / "out").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert by_id(written) == by_id(kept)
    counters = {counter.key.metric.name: counter.committed for counter in p.result.metrics().query(
        MetricsFilter().with_namespace("beam_curator"))["counters"]}
    assert counters["long_texts.documents_kept"] == len(kept)


def one_file(tmp_path: Path, texts: list[str | None]) -> str:
    """A folder with one JSONL file of documents "a", "b"... with these texts."""
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / "part.jsonl").write_text("".join(
        json.dumps({"doc_id": chr(ord("a") + number), "text": text}) + "\n" for number, text in enumerate(texts)))
    return str(tmp_path / "in")


class Upper:
    """A modifier function with a bug: it raises on a text holding "bug"."""

    __name__ = "upper"

    def __call__(self, text: str) -> str:
        if "bug" in text:
            raise ValueError("division by zero")
        return text.upper()


@pytest.mark.parametrize("stage", [lambda **bad: ScoreFilter(WordCountFilter(min_words=1), **bad),
                                   lambda **bad: Modify(UnicodeReformatter(), **bad)], ids=["ScoreFilter", "Modify"])
def test_a_batch_without_a_text_follows_on_bad_record_naming_the_file_and_the_document(tmp_path: Path, stage) -> None:
    files = one_file(tmp_path, ["caf\u00c3\u00a9 ok", None])
    name = stage().name
    with pytest.raises(CuratorInputError, match=rf"{name}: text_field 'text' of row 1 of the batch read from "
                                                rf"{tmp_path}/in/part.jsonl \(\{{\"doc_id\": \"b\"\}}\): it is missing"):
        resumable(tmp_path, stage(), files).run(runner="in-process")

    summary = resumable(tmp_path, stage(on_bad_record="skip"), files).run(runner="in-process")
    assert summary.counters[f"{name}.bad_records_skipped"] == 1
    assert summary.filters == ({"word_count": {"in": 1, "kept": 1, "dropped": 0}} if name == "word_count" else {})
    assert [row["doc_id"] for row in map(json.loads, "".join(
        path.read_text() for path in (tmp_path / "out").glob("*.jsonl")).splitlines())] == ["a"]


@pytest.mark.parametrize("stage", [ScoreFilter(FailsOn("bug")), Modify(Upper())], ids=["ScoreFilter", "Modify"])
def test_a_filter_or_modifier_that_raises_is_named_with_the_file_and_the_document(tmp_path: Path, stage) -> None:
    files = one_file(tmp_path, ["fine", "a bug here"])
    name = "FailsOn" if isinstance(stage, ScoreFilter) else "upper"
    with pytest.raises(DocumentFailedError, match=rf"{name} raised \w+Error \(division by zero\) on row 1 "
                                                  rf"of the batch read from {tmp_path}/in/part.jsonl "
                                                  r'\(\{"doc_id": "b"\}\)'):
        resumable(tmp_path, stage, files).run(runner="in-process")


def test_a_killed_filter_run_reruns_to_the_output_of_an_uninterrupted_one(tmp_path: Path) -> None:
    """The FineWeb preset's filters (C4's rewriting what it keeps) on the bundled sample, SIGKILLed
    once a partition is marked: the rerun redoes only the unmarked partitions, and what it writes is
    what a run that was never stopped writes."""
    (tmp_path / "in").mkdir()
    for path in sorted(CORPUS.glob("*.jsonl")):
        (tmp_path / "in" / path.name).write_text(path.read_text())
    files = len(list((tmp_path / "in").iterdir()))
    killed_and_rerun(tmp_path, tmp_path / "in", files=files, middle="fineweb")
