"""The dedup PTransforms in a user's own pipeline: types kept, removed
documents tagged with the id they duplicate, the workflows' answers
whatever the element order, bundles or runner, and refusals of bad input."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pandas as pd
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_curator import unwrap_errors
from beam_curator.data import sample_corpus_path
from beam_curator.stages.io import CuratorInputError
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import ExactDedup, FuzzyDedup, SemanticDedup, SurvivingRepresentatives
from beam_curator.transforms.star_components import StarComponents
from beam_curator.workflows import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

DOCS = [{"doc_id": 3, "text": "same"}, {"doc_id": 1, "text": "same"}, {"doc_id": 2, "text": "other"},
        {"doc_id": 7, "text": "same"}]

# What a removed copy of document 1's text carries: the kept copy is the one it matched.
COPY_OF_1 = {"duplicate_of": 1, "similarity": 1.0, "matched_id": 1, "matched_similarity": 1.0}

RUNNERS = {
    "local": {},
    "local-multiprocess": {"direct_num_workers": 2, "direct_running_mode": "multi_processing"},
}


def sample_records() -> list[dict]:
    return [json.loads(line) for path in sorted(Path(sample_corpus_path()).glob("*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def workflow_removed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The ids the exact workflow removes from the bundled sample."""
    output = tmp_path_factory.mktemp("exact")
    ExactDeduplicationWorkflow(str(output), sample_corpus_path(), input_filetype="jsonl", assign_id=False,
                               id_field="doc_id", verbose=False).run()
    return sorted(pd.read_parquet(output / "ExactDuplicateIds")["doc_id"])


def test_dicts_keep_their_type_and_removed_ones_say_which_id_they_duplicate() -> None:
    with beam.Pipeline() as pipeline:
        documents = pipeline | beam.Create(DOCS)
        result = documents | ExactDedup(id_field="doc_id")
        assert result.kept.element_type == documents.element_type
        assert_that(result.kept, equal_to([DOCS[1], DOCS[2]]), label="kept")
        assert_that(result.removed, equal_to([{**DOCS[0], **COPY_OF_1}, {**DOCS[3], **COPY_OF_1}]), label="removed")


def test_schema_rows_keep_their_schema_and_removed_ones_add_four_fields() -> None:
    with beam.Pipeline() as pipeline:
        documents = pipeline | beam.Create([beam.Row(doc_id=d["doc_id"], text=d["text"]) for d in DOCS])
        result = documents | ExactDedup(id_field="doc_id")
        assert result.kept.element_type == documents.element_type
        assert [name for name, _ in result.removed.element_type._fields] == [
            "doc_id", "text", "duplicate_of", "similarity", "matched_id", "matched_similarity"]
        assert_that(result.kept | beam.Map(lambda row: (row.doc_id, row.text)), equal_to([(1, "same"), (2, "other")]),
                    label="kept")
        removed = result.removed | beam.Select("doc_id", "duplicate_of", "similarity", "matched_id", "matched_similarity")
        assert_that(removed | beam.Map(tuple), equal_to([(3, 1, 1.0, 1, 1.0), (7, 1, 1.0, 1, 1.0)]), label="removed")


@pytest.mark.parametrize("runner", RUNNERS)
def test_removed_ids_are_the_workflows_whatever_the_order_bundles_or_runner(runner: str,
                                                                            workflow_removed: list[str]) -> None:
    records = sample_records()
    random.Random(len(runner)).shuffle(records)
    kept_ids = sorted({r["doc_id"] for r in records} - set(workflow_removed))
    with beam.Pipeline(options=PipelineOptions(flags=[], **RUNNERS[runner])) as pipeline:
        result = pipeline | beam.Create(records, reshuffle=False) | beam.Reshuffle() | ExactDedup(id_field="doc_id")
        assert_that(result.removed | beam.Map(lambda d: d["doc_id"]), equal_to(workflow_removed), label="removed")
        assert_that(result.kept | beam.Map(lambda d: d["doc_id"]), equal_to(kept_ids), label="kept")
    assert len(workflow_removed) == 26  # 25 texts have copies (20 planted dup-* records), one of them two


def test_document_batches_lose_the_workflows_rows_and_keep_their_task(workflow_removed: list[str]) -> None:
    records = sample_records()
    random.Random(7).shuffle(records)
    slices = [records[start:start + 150] for start in range(0, len(records), 150)]
    batches = [DocumentBatch(task_id=f"t{number}", dataset_name="sample", data=pa.Table.from_pylist(rows),
                             _metadata={"rows": len(rows)}) for number, rows in enumerate(slices)]
    kept_ids = sorted({r["doc_id"] for r in records} - set(workflow_removed))
    smallest = {}
    for record in records:
        smallest[record["text"]] = min(smallest.get(record["text"], record["doc_id"]), record["doc_id"])
    pairs = sorted((r["doc_id"], smallest[r["text"]]) for r in records if r["doc_id"] in workflow_removed)
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.Create(batches) | ExactDedup(id_field="doc_id")
        removed = result.removed | "RemovedRows" >> beam.FlatMap(lambda batch: batch.data.to_pylist())
        assert_that(removed | beam.Map(lambda row: (row["doc_id"], row["duplicate_of"])), equal_to(pairs),
                    label="removed")
        similarities = removed | beam.Map(lambda row: (row["similarity"], row["matched_similarity"],
                                                        row["matched_id"] == row["duplicate_of"]))
        assert_that(similarities, equal_to([(1.0, 1.0, True)] * 26), label="similarity")
        kept_rows = result.kept | "KeptRows" >> beam.FlatMap(lambda batch: batch.data.column("doc_id").to_pylist())
        assert_that(kept_rows, equal_to(kept_ids), label="kept")
        tasks = result.kept | beam.Map(lambda batch: (batch.task_id, batch.dataset_name, batch._metadata["rows"]))
        assert_that(tasks, equal_to([(b.task_id, "sample", b.num_items) for b in batches]), label="tasks")


def test_parquet_read_and_written_with_beam_io_round_trips(tmp_path: Path) -> None:
    """Parquet rows come from ``beam.io`` as dicts; kept and removed ones go
    back to Parquet, the removed with their four more columns."""
    pd.DataFrame(DOCS).to_parquet(tmp_path / "in.parquet")
    schema = pa.schema([("doc_id", pa.int64()), ("text", pa.string())])
    removed_schema = pa.schema([*schema, ("duplicate_of", pa.int64()), ("similarity", pa.float64()),
                                ("matched_id", pa.int64()), ("matched_similarity", pa.float64())])
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.io.ReadFromParquet(str(tmp_path / "in.parquet")) | ExactDedup(id_field="doc_id")
        _ = result.kept | "WriteKept" >> beam.io.WriteToParquet(str(tmp_path / "kept" / "part"), schema)
        _ = result.removed | "WriteRemoved" >> beam.io.WriteToParquet(str(tmp_path / "removed" / "part"),
                                                                       removed_schema)
    assert pd.read_parquet(tmp_path / "kept").sort_values("doc_id").to_dict("records") == [DOCS[1], DOCS[2]]
    assert pd.read_parquet(tmp_path / "removed").sort_values("doc_id").to_dict("records") == [
        {**DOCS[0], **COPY_OF_1}, {**DOCS[3], **COPY_OF_1}]


@pytest.mark.parametrize("transform", [ExactDedup, FuzzyDedup])
def test_unbounded_input_is_refused_when_the_pipeline_is_built(transform: type) -> None:
    pipeline = beam.Pipeline()
    ticks = pipeline | PeriodicImpulse(0, 10, 1) | beam.Map(lambda t: {"doc_id": int(t), "text": "tick"})
    with pytest.raises(ValueError, match=f"{transform.__name__} takes a bounded PCollection.*unbounded"):
        ticks | transform(id_field="doc_id")
    with pytest.raises(ValueError, match="text_field must name a field"):
        transform(text_field="")


@pytest.mark.parametrize("transform", [ExactDedup(id_field="doc_id"), FuzzyDedup(id_field="doc_id"),
                                       SemanticDedup(id_field="doc_id", embedding_field="embeddings")])
def test_beams_dask_runner_is_refused_when_the_pipeline_is_built(transform: beam.PTransform) -> None:
    """It would compute only the last branch of the transform's steps: documents lost without an error."""
    dask_runner = pytest.importorskip("apache_beam.runners.dask.dask_runner", reason="the dask extra is not installed")
    pipeline = beam.Pipeline(runner=dask_runner.DaskRunner())
    with pytest.raises(ValueError, match="cannot run on Beam's DaskRunner.*run the dedup workflows"):
        pipeline | beam.Create([{"doc_id": 1, "text": "a", "embeddings": [1.0]}]) | transform


@pytest.mark.parametrize(("documents", "message"), [
    ([{"doc_id": 1, "body": "a"}], r"no field 'text' \(text_field\); its fields are \['doc_id', 'body'\]"),
    ([{"doc_id": 1, "text": 5}], "text_field 'text' holds a int"),
    ([{"doc_id": 1, "text": "a"}, {"doc_id": 1, "text": "a"}], r"repeats the ids \['1'\]"),
    ([{"doc_id": 1, "text": "a"}, {"doc_id": "x", "text": "a"}], "all integers or all strings"),
    ([{"text": "a"}], r"no field 'doc_id' \(id_field\)"),
])
def test_bad_documents_fail_naming_the_parameter(documents: list, message: str) -> None:
    with pytest.raises(Exception, match=message):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create(documents) | ExactDedup(id_field="doc_id")


BAD_DOCUMENTS = [{"doc_id": 1000, "package": "x", "description": "y"}, {"doc_id": 1001, "text": 5},
                 {"text": "no id"}, {"doc_id": None, "text": "a None id"}]


@pytest.mark.parametrize("transform", [ExactDedup, FuzzyDedup])
def test_one_document_lacking_the_text_is_named_by_its_id_once_with_advice_for_some_or_all(transform: type) -> None:
    """Among 1,000 documents that have a text, the one without is a bad record: the error names its id and its
    fields, says what to do if only some lack the field, and comes out of unwrap_errors once, without Beam's notes."""
    documents = [{"doc_id": number, "text": f"text {number % 10}"} for number in range(1000)] + BAD_DOCUMENTS[:1]
    with pytest.raises(CuratorInputError) as caught:
        with unwrap_errors(), beam.Pipeline(runner="DirectRunner") as pipeline:
            _ = pipeline | beam.Create(documents) | transform(id_field="doc_id")
    message = str(caught.value)
    assert message.startswith("the document with doc_id 1000 has no field 'text' (text_field); its fields are "
                              "['doc_id', 'package', 'description']: if no document has it, set text_field to the "
                              "field that holds it; if only some lack it, fix those or pass on_bad_record='skip'",
                              len(f"{transform.__name__}: "))
    assert message.count("has no field") == 1 and "[while running" not in message


def test_a_users_failing_pipeline_prints_the_error_once(tmp_path: Path) -> None:
    """What a user's script prints when a dedup stage fails in a real DirectRunner pipeline: Beam logs the
    stage's error and re-raises it with its context (four tracebacks); under unwrap_errors, one message."""
    script = tmp_path / "dedup.py"
    script.write_text(
        "import apache_beam as beam\n"
        "import beam_curator\n"
        "from beam_curator.transforms import ExactDedup\n"
        "documents = [{'doc_id': n, 'text': str(n)} for n in range(20)] + [{'doc_id': 'b7', 'body': 'x'}]\n"
        "with beam_curator.unwrap_errors(), beam.Pipeline(runner='DirectRunner') as pipeline:\n"
        "    _ = pipeline | beam.Create(documents) | ExactDedup(id_field='doc_id')\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 1
    assert run.stderr.count("the document with doc_id 'b7' has no field 'text'") == 1, run.stderr
    assert run.stderr.count("Traceback") == 1 and "[while running" not in run.stderr, run.stderr


@pytest.mark.parametrize("transform", [ExactDedup, FuzzyDedup])
def test_on_bad_record_skip_drops_and_counts_the_documents_it_cannot_deduplicate(
        transform: type, caplog: pytest.LogCaptureFixture) -> None:
    pipeline = beam.Pipeline(runner="DirectRunner")
    result = pipeline | beam.Create(DOCS + BAD_DOCUMENTS) | transform(id_field="doc_id", on_bad_record="skip")
    assert_that(result.kept | beam.Map(lambda document: document["doc_id"]), equal_to([1, 2]), label="kept")
    assert_that(result.removed | beam.Map(lambda document: document["doc_id"]), equal_to([3, 7]), label="removed")
    with caplog.at_level(logging.WARNING, logger="beam_curator"):
        run = pipeline.run()
        run.wait_until_finish()
    (counter,) = run.metrics().query(MetricsFilter().with_name("bad_records_skipped"))["counters"]
    assert counter.committed == len(BAD_DOCUMENTS)
    assert counter.key.metric.namespace == transform.__name__
    skipped = [record.getMessage() for record in caplog.records if "on_bad_record='skip'" in record.getMessage()]
    assert skipped and all(message.startswith(f"{transform.__name__} skipped ") for message in skipped)


@pytest.mark.parametrize("transform", [ExactDedup, FuzzyDedup])
def test_rows_of_batches_that_are_skipped_are_in_neither_output(transform: type) -> None:
    """A batch's rows without a usable text or id, skipped, leave the batch as a skipped document leaves the
    pipeline: the kept batches hold only the rows kept, the removed ones only the rows removed."""
    rows = [*DOCS, {"doc_id": 1000, "text": None}, {"doc_id": None, "text": "a None id"}]
    batches = [DocumentBatch(task_id=f"t{start}", dataset_name="bad", data=pa.Table.from_pylist(rows[start:start + 3]))
               for start in (0, 3)]
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        result = pipeline | beam.Create(batches) | transform(id_field="doc_id", on_bad_record="skip")
        ids = {name: output | f"{name}Ids" >> beam.FlatMap(lambda batch: batch.data.column("doc_id").to_pylist())
               for name, output in (("kept", result.kept), ("removed", result.removed))}
        assert_that(ids["kept"], equal_to([1, 2]), label="kept")
        assert_that(ids["removed"], equal_to([3, 7]), label="removed")
        assert_that(result.kept | beam.Map(lambda batch: batch.task_id), equal_to(["t0", "t3"]), label="tasks")


@pytest.mark.parametrize("transform", [ExactDedup, FuzzyDedup])
def test_on_bad_record_takes_the_readers_choices(transform: type) -> None:
    with pytest.raises(ValueError, match=f"{transform.__name__}: on_bad_record must be 'raise' or 'skip', not 'drop'"):
        transform(on_bad_record="drop")


def test_a_batch_without_the_text_column_fails_naming_the_parameter() -> None:
    batch = DocumentBatch(data=pa.table({"doc_id": [1], "body": ["a"]}))
    with pytest.raises(Exception, match=r"no column 'text' \(text_field\); its columns are \['doc_id', 'body'\]"):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create([batch]) | ExactDedup(id_field="doc_id")


@pytest.fixture(scope="module")
def fuzzy_workflow_groups(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """``(id, least id of its group)`` of every id the fuzzy workflow removes from the bundled sample."""
    folder = tmp_path_factory.mktemp("fuzzy")
    FuzzyDeduplicationWorkflow(str(folder / "cache"), str(folder / "out"), sample_corpus_path(),
                               input_filetype="jsonl", id_field="doc_id", verbose=False).run()
    groups = pd.read_parquet(folder / "cache" / "ConnectedComponentsStage")
    return sorted(tuple(pair) for pair in groups[groups["doc_id"] != groups["_duplicate_group_id"]].itertuples(
        index=False))


@pytest.mark.parametrize("runner", RUNNERS)
def test_fuzzy_removes_the_workflows_ids_as_duplicates_of_their_groups_least(
        runner: str, fuzzy_workflow_groups: list[tuple[str, str]]) -> None:
    records = sample_records()
    random.Random(len(runner)).shuffle(records)
    texts = {r["doc_id"]: r["text"] for r in records}

    def similarity_fits(removed: dict) -> bool:
        """Equal texts have equal signatures; others share some of their values."""
        if texts[removed["doc_id"]] == texts[removed["duplicate_of"]]:
            return removed["similarity"] == 1.0
        return 0.0 < removed["similarity"] <= 1.0
    with beam.Pipeline(options=PipelineOptions(flags=[], **RUNNERS[runner])) as pipeline:
        documents = pipeline | beam.Create(records, reshuffle=False) | beam.Reshuffle()
        result = documents | FuzzyDedup(id_field="doc_id", star_rounds=3)  # the sample's groups are small
        assert result.kept.element_type == documents.element_type
        pairs = result.removed | beam.Map(lambda d: (d["doc_id"], d["duplicate_of"]))
        assert_that(pairs, equal_to(fuzzy_workflow_groups), label="removed")
        fits = result.removed | beam.Map(similarity_fits)
        assert_that(fits, equal_to([True] * len(fuzzy_workflow_groups)), label="similarity")
        count = result.kept | beam.combiners.Count.Globally()
        assert_that(count, equal_to([len(records) - len(fuzzy_workflow_groups)]), label="kept")
    assert len(fuzzy_workflow_groups) == 85


def test_fuzzy_on_document_batches_drops_the_workflows_rows(fuzzy_workflow_groups: list[tuple[str, str]]) -> None:
    records = sample_records()
    random.Random(5).shuffle(records)
    batches = [DocumentBatch(task_id=f"t{start}", dataset_name="sample", data=pa.Table.from_pylist(records[start:start + 150]))
               for start in range(0, len(records), 150)]
    removed_ids = {doc_id for doc_id, _ in fuzzy_workflow_groups}
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.Create(batches) | FuzzyDedup(id_field="doc_id", star_rounds=3)
        removed = result.removed | "RemovedRows" >> beam.FlatMap(lambda batch: batch.data.to_pylist())
        assert_that(removed | beam.Map(lambda row: (row["doc_id"], row["duplicate_of"])), equal_to(fuzzy_workflow_groups),
                    label="removed")
        kept = result.kept | "KeptRows" >> beam.FlatMap(lambda batch: batch.data.column("doc_id").to_pylist())
        assert_that(kept, equal_to([r["doc_id"] for r in records if r["doc_id"] not in removed_ids]), label="kept")


def chained_texts() -> dict[str, str]:
    """``a ~ b ~ c``: ``a`` shares half its text with ``b``, ``c`` is ``b``
    with a line more, so ``c`` shares little with ``a``, the group's kept one."""
    draw = random.Random(7)

    def passage() -> str:
        return " ".join("".join(draw.choices("abcdefghijklmnopqrstuvwxyz", k=draw.randint(3, 9))) for _ in range(40))
    first, middle, last = passage(), passage(), passage()
    return {"a": f"{first} {middle}", "b": f"{middle} {last}", "c": f"{middle} {last} and one more line"}


def ngram_jaccard(one: str, other: str, width: int = 5) -> float:
    grams = [{text[start:start + width] for start in range(len(text) - width + 1)} for text in (one, other)]
    return len(grams[0] & grams[1]) / len(grams[0] | grams[1])


# Five-character n-grams, and 50 bands of two MinHash values: pairs at a Jaccard of 0.3 share a bucket.
CHAIN_SETTINGS = {"id_field": "doc_id", "char_ngrams": 5, "num_bands": 50, "minhashes_per_band": 2, "star_rounds": 3}


@pytest.mark.parametrize("as_batches", [False, True])
def test_fuzzy_names_the_member_a_removed_document_matched_besides_its_groups_kept_one(as_batches: bool) -> None:
    texts = chained_texts()
    assert ngram_jaccard(texts["a"], texts["c"]) < 0.35 < 0.95 < ngram_jaccard(texts["b"], texts["c"])
    records = [{"doc_id": doc_id, "text": text} for doc_id, text in texts.items()]
    elements = [DocumentBatch(task_id="t", dataset_name="chain", data=pa.Table.from_pylist(records))] if as_batches \
        else records
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        removed = (pipeline | beam.Create(elements) | FuzzyDedup(**CHAIN_SETTINGS)).removed
        if as_batches:
            removed = removed | "RemovedRows" >> beam.FlatMap(lambda batch: batch.data.to_pylist())
        pairs = removed | beam.Map(lambda d: (d["doc_id"], d["duplicate_of"], d["matched_id"],
                                              d["similarity"] < 0.5, d["matched_similarity"] > 0.9))
        assert_that(pairs, equal_to([("b", "a", "c", True, True), ("c", "a", "b", True, True)]))


def test_every_removal_of_chained_passes_resolves_to_a_kept_document() -> None:
    """``d`` is a copy of ``b``: exact removes it as a duplicate of ``b``,
    which fuzzy then removes as a duplicate of ``a``; ``d`` resolves to ``a``."""
    texts = chained_texts()
    records = [{"doc_id": doc_id, "text": text} for doc_id, text in {**texts, "d": texts["b"]}.items()]
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        exact = pipeline | beam.Create(records) | ExactDedup(id_field="doc_id")
        fuzzy = exact.kept | FuzzyDedup(**CHAIN_SETTINGS)
        removed = (exact.removed, fuzzy.removed) | beam.Flatten()
        assert_that(removed | beam.Map(lambda d: (d["doc_id"], d["duplicate_of"])),
                    equal_to([("d", "b"), ("b", "a"), ("c", "a")]), label="duplicate_of")
        survivors = removed | SurvivingRepresentatives(id_field="doc_id")
        assert_that(survivors, equal_to([("b", "a"), ("c", "a"), ("d", "a")]), label="survivors")
        assert_that(fuzzy.kept | beam.Map(lambda d: d["doc_id"]), equal_to(["a"]), label="kept")


def test_star_components_label_a_long_chain_by_its_least_id_or_say_to_raise_the_rounds() -> None:
    """A chain of 40 ids, in shuffled order, needs several rounds to settle into one star."""
    chain = [(number, number + 1) for number in range(40)] + [(100, 101)]
    random.Random(5).shuffle(chain)
    with beam.Pipeline() as pipeline:
        labels = pipeline | beam.Create(chain) | StarComponents(rounds=8, owner="test")
        assert_that(labels, equal_to([(n, 0) for n in range(41)] + [(100, 100), (101, 100)]))
    with pytest.raises(Exception, match="did not settle in star_rounds=1 rounds.*raise star_rounds"):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create(chain) | StarComponents(rounds=1, owner="test")


def test_star_components_gather_small_keys_and_read_a_hub_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of four rows: many keys' rows share a table, and a hub of 30 neighbours is read a batch at a time;
    the labels are each component's least id, as a union-find over the same edges gives them."""
    from beam_curator.transforms import star_components

    monkeypatch.setattr(star_components, "NEIGHBORS_PER_BATCH", 4)
    draw = random.Random(11)
    edges = [(500, number) for number in range(510, 540)] + [(draw.randrange(200), draw.randrange(200)) for _ in range(150)]
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    for x, y in edges:
        low, high = sorted((root(x), root(y)))
        parent[high] = low
    expected = [(node, root(node)) for node in {node for edge in edges for node in edge if edge[0] != edge[1]}]
    with beam.Pipeline() as pipeline:
        labels = pipeline | beam.Create(edges) | StarComponents(rounds=10, owner="test")
        assert_that(labels, equal_to(expected))
