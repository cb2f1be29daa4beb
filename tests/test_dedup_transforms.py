"""The dedup PTransforms in a user's own pipeline: types kept, removed
documents tagged with the id they duplicate, the workflows' answers
whatever the element order, bundles or runner, and refusals of bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import apache_beam as beam
import pandas as pd
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_curator.data import sample_corpus_path
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import ExactDedup, FuzzyDedup, SemanticDedup
from beam_curator.transforms.star_components import StarComponents
from beam_curator.workflows import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

DOCS = [{"doc_id": 3, "text": "same"}, {"doc_id": 1, "text": "same"}, {"doc_id": 2, "text": "other"},
        {"doc_id": 7, "text": "same"}]

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
        assert_that(result.removed, equal_to([{**DOCS[0], "duplicate_of": 1, "similarity": 1.0},
                                              {**DOCS[3], "duplicate_of": 1, "similarity": 1.0}]), label="removed")


def test_schema_rows_keep_their_schema_and_removed_ones_add_two_fields() -> None:
    with beam.Pipeline() as pipeline:
        documents = pipeline | beam.Create([beam.Row(doc_id=d["doc_id"], text=d["text"]) for d in DOCS])
        result = documents | ExactDedup(id_field="doc_id")
        assert result.kept.element_type == documents.element_type
        assert [name for name, _ in result.removed.element_type._fields] == [
            "doc_id", "text", "duplicate_of", "similarity"]
        assert_that(result.kept | beam.Map(lambda row: (row.doc_id, row.text)), equal_to([(1, "same"), (2, "other")]),
                    label="kept")
        removed = result.removed | beam.Select("doc_id", "duplicate_of", "similarity")
        assert_that(removed | beam.Map(tuple), equal_to([(3, 1, 1.0), (7, 1, 1.0)]), label="removed")


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
        assert_that(removed | beam.Map(lambda row: row["similarity"]), equal_to([1.0] * 26), label="similarity")
        kept_rows = result.kept | "KeptRows" >> beam.FlatMap(lambda batch: batch.data.column("doc_id").to_pylist())
        assert_that(kept_rows, equal_to(kept_ids), label="kept")
        tasks = result.kept | beam.Map(lambda batch: (batch.task_id, batch.dataset_name, batch._metadata["rows"]))
        assert_that(tasks, equal_to([(b.task_id, "sample", b.num_items) for b in batches]), label="tasks")


def test_parquet_read_and_written_with_beam_io_round_trips(tmp_path: Path) -> None:
    """Parquet rows come from ``beam.io`` as dicts; kept and removed ones go
    back to Parquet, the removed with their two more columns."""
    pd.DataFrame(DOCS).to_parquet(tmp_path / "in.parquet")
    schema = pa.schema([("doc_id", pa.int64()), ("text", pa.string())])
    removed_schema = schema.append(pa.field("duplicate_of", pa.int64())).append(pa.field("similarity", pa.float64()))
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.io.ReadFromParquet(str(tmp_path / "in.parquet")) | ExactDedup(id_field="doc_id")
        _ = result.kept | "WriteKept" >> beam.io.WriteToParquet(str(tmp_path / "kept" / "part"), schema)
        _ = result.removed | "WriteRemoved" >> beam.io.WriteToParquet(str(tmp_path / "removed" / "part"),
                                                                       removed_schema)
    assert pd.read_parquet(tmp_path / "kept").sort_values("doc_id").to_dict("records") == [DOCS[1], DOCS[2]]
    assert pd.read_parquet(tmp_path / "removed").sort_values("doc_id").to_dict("records") == [
        {**DOCS[0], "duplicate_of": 1, "similarity": 1.0}, {**DOCS[3], "duplicate_of": 1, "similarity": 1.0}]


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
