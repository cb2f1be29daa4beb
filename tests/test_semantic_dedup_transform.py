"""``SemanticDedup`` in a user's own pipeline: the semantic workflow's
removed documents (and what each duplicates) for the same vectors and
settings, whatever the element order, bundles or runner; a real model
through RunInference; refusals of bad input before or as it is met."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_curator.dedup.survivors import surviving_representatives
from beam_curator.dedup.semantic.ranking import RankingStrategy
from beam_curator.runners import pipeline_options
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms import SemanticDedup
from beam_curator.transforms.dedup_documents import REMOVAL_FIELDS
from beam_curator.transforms.kept_representatives import KeptRepresentatives, Link
from beam_curator.workflows import SemanticDeduplicationWorkflow

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import NOTES, captured_logs, duplicate_ids, straddling_vectors  # noqa: E402

SETTINGS = {"n_clusters": 6, "eps": 0.02}


def vectors_with_near_copies(documents: int = 480, dims: int = 24, seed: int = 5) -> list[dict]:
    """Documents around 12 topics: most a topic's direction plus wide noise,
    a quarter near copies (tiny noise) of an earlier document."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(12, dims))
    rows: list[np.ndarray] = []
    for number in range(documents):
        if number >= 40 and number % 4 == 0:
            rows.append(rows[int(rng.integers(0, number))] + rng.normal(scale=0.003, size=dims))
        else:
            rows.append(topics[number % 12] + rng.normal(scale=0.6, size=dims))
    ids = rng.permutation(10 * documents)[:documents]
    return [{"id": int(i), "embeddings": row.astype(np.float32).tolist()} for i, row in zip(ids, rows)]


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return vectors_with_near_copies()


def workflow_pairs(documents: list[dict], folder: Path, **settings: object) -> dict[Any, tuple[Any, float]]:
    """Each document the semantic workflow removes: the one it duplicates and their score."""
    (folder / "input").mkdir(parents=True)
    pd.DataFrame(documents).to_parquet(folder / "input" / "part.parquet")
    SemanticDeduplicationWorkflow(str(folder / "input"), str(folder / "output"), str(folder / "cache"),
                                  id_field="id", embedding_field="embeddings", verbose=False, **settings).run()
    pairs = duplicate_ids(folder / "output")
    return {key: (max_id, score) for key, max_id, score in zip(
        pairs["id"].tolist(), pairs["max_id"].tolist(), pairs["cosine_sim_score"].tolist())}


@pytest.fixture(scope="module")
def workflow_removed(documents: list[dict], tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[int, float]]:
    return workflow_pairs(documents, tmp_path_factory.mktemp("semantic"), **SETTINGS)


def transform_pairs(documents: list[dict], folder: Path, runner: dict,
                    **settings: object) -> dict[int, tuple[int, float]]:
    """What ``SemanticDedup`` removes from ``documents``: each removed one's
    ``duplicate_of`` and ``similarity``. Every document must come out once,
    kept or removed, its fields unchanged. Each output element is written to
    a file of its own, from whichever worker holds it."""
    with beam.Pipeline(options=pipeline_options(**runner)) as pipeline:
        result = (pipeline | beam.Create(documents, reshuffle=False) | beam.Reshuffle()
                  | SemanticDedup(id_field="id", embedding_field="embeddings", **settings))
        for name, output in (("kept", result.kept), ("removed", result.removed)):
            output | f"Write{name.title()}" >> beam.Map(write_element, folder / name)
    written = {name: [json.loads(path.read_text()) for path in (folder / name).glob("*.json")]
               for name in ("kept", "removed")}
    given = [{k: v for k, v in d.items() if k not in REMOVAL_FIELDS} for d in written["removed"]]
    assert sorted(written["kept"] + given, key=lambda d: d["id"]) == sorted(documents, key=lambda d: d["id"])
    assert all(set(d) == {*documents[0], *REMOVAL_FIELDS} for d in written["removed"])
    assert_kept_representatives(documents, written["removed"])
    return {d["id"]: (d["matched_id"], d["matched_similarity"]) for d in written["removed"]}


def assert_kept_representatives(documents: list[dict], removed: list[dict]) -> None:
    """``matched_id`` is NeMo's max_id, which may be removed too; ``duplicate_of`` is where that chain of matches
    ends, a kept document, and ``similarity`` the cosine similarity of that pair."""
    resolved = surviving_representatives((d["id"], d["matched_id"]) for d in removed)
    assert {d["id"]: d["duplicate_of"] for d in removed} == resolved
    assert not set(resolved.values()) & {d["id"] for d in removed}, "a duplicate_of that was removed"
    unit = {d["id"]: np.asarray(d["embeddings"]) / np.linalg.norm(d["embeddings"]) for d in documents}
    for d in removed:
        expected = d["matched_similarity"] if d["duplicate_of"] == d["matched_id"] else unit[d["id"]] @ unit[d["duplicate_of"]]
        assert abs(d["similarity"] - expected) < 1e-5, d["id"]


def write_element(element: dict, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{uuid.uuid4().hex}.json").write_text(json.dumps(element))


def test_removed_documents_are_the_workflows_whatever_the_order_or_bundles(
    documents: list[dict], workflow_removed: dict[int, tuple[int, float]], tmp_path: Path,
) -> None:
    assert len(workflow_removed) >= 90  # the near copies, and few others
    assert any(max_id in workflow_removed for max_id, _ in workflow_removed.values()), "no chain of matches to follow"
    shuffled = list(documents)
    random.Random(1).shuffle(shuffled)
    assert_same_removals(transform_pairs(shuffled, tmp_path, {"runner": "local"}, **SETTINGS), workflow_removed)


@pytest.mark.parametrize("worker_runner", ["local-multiprocess", "portable"], indirect=True)  # Dask: refused
def test_runners_with_workers_remove_the_workflows_documents(
    documents: list[dict], workflow_removed: dict[int, tuple[int, float]], tmp_path: Path, worker_runner: dict,
) -> None:
    """Worker processes or an EXTERNAL worker pool: the fit, the assignment and
    each cluster's scoring run away from the driver."""
    assert_same_removals(transform_pairs(documents, tmp_path, worker_runner, **SETTINGS), workflow_removed)


def assert_same_removals(found: dict[int, tuple[int, float]], expected: dict[int, tuple[int, float]]) -> None:
    """The same documents removed, each as a duplicate of the same one, at the same similarity."""
    assert sorted(found) == sorted(expected)
    assert {key: pair[0] for key, pair in found.items()} == {key: pair[0] for key, pair in expected.items()}
    assert all(abs(found[key][1] - expected[key][1]) < 1e-6 for key in found)
    assert all(similarity >= 1 - SETTINGS["eps"] for _, similarity in found.values())


def test_document_batches_lose_the_workflows_rows_and_keep_their_other_columns(
    documents: list[dict], workflow_removed: dict[int, tuple[int, float]],
) -> None:
    """Batches of the package's tasks, with a column the transform does not read: each batch comes out less the
    workflow's removed rows, and those rows as batches of their own, each with what it duplicates."""
    rows = [{**d, "source": f"s{d['id'] % 7}"} for d in documents]
    random.Random(3).shuffle(rows)
    batches = [DocumentBatch(task_id=f"t{start}", dataset_name="vectors", data=pa.Table.from_pylist(rows[start:start + 100]))
               for start in range(0, len(rows), 100)]
    source = {row["id"]: row["source"] for row in rows}
    with beam.Pipeline(options=pipeline_options("local")) as pipeline:
        result = (pipeline | beam.Create(batches)
                  | SemanticDedup(id_field="id", embedding_field="embeddings", **SETTINGS))
        removed = result.removed | "RemovedRows" >> beam.FlatMap(lambda batch: batch.data.to_pylist())
        assert_that(removed | beam.Map(lambda row: (row["id"], row["matched_id"], row["source"])),
                    equal_to([(key, pair[0], source[key]) for key, pair in workflow_removed.items()]), label="removed")
        kept = result.kept | "KeptRows" >> beam.FlatMap(lambda batch: batch.data.select(["id", "source"]).to_pylist())
        assert_that(kept | beam.Map(lambda row: (row["id"], row["source"])),
                    equal_to([(key, source[key]) for key in source if key not in workflow_removed]), label="kept")
        tasks = result.kept | beam.Map(lambda batch: batch.task_id)
        assert_that(tasks, equal_to([batch.task_id for batch in batches]), label="tasks")


@pytest.mark.parametrize("order", [{}, {"which_to_keep": "random", "distance_metric": "l2", "random_state": 7}],
                         ids=["hard-cosine", "random-l2"])
def test_clusters_scored_in_blocks_remove_the_workflows_documents(
    documents: list[dict], workflow_removed: dict[int, tuple[int, float]], tmp_path: Path, order: dict,
) -> None:
    """Clusters of ~80 documents in blocks of at most 16: each pair of blocks on its own, each document's best
    match over the pairs; the same removals as the workflow's whole clusters, in either order of keeping."""
    settings = {**SETTINGS, **order}
    expected = workflow_pairs(documents, tmp_path / "workflow", **settings) if order else workflow_removed
    assert len(expected) >= 90
    found = transform_pairs(documents, tmp_path / "blocks", {"runner": "local"}, **settings, cluster_block_size=16)
    assert_same_removals(found, expected)


@pytest.mark.parametrize("strategy", [RankingStrategy.metadata_based(["quality", "source"], ascending=[False, True]),
                                      RankingStrategy.random(7)], ids=["by-fields", "random"])
def test_a_ranking_strategy_keeps_the_workflows_copies_in_whole_clusters_and_in_blocks(
    documents: list[dict], workflow_removed: dict[int, tuple[int, float]], tmp_path: Path, strategy: RankingStrategy,
) -> None:
    """The documents' own fields (with ties, broken by id) or a seeded shuffle decide which copy is kept, as in the
    workflow, also when a cluster is scored by pairs of blocks (each ranked as its cluster ranks it)."""
    rated = [{**d, "quality": d["id"] % 3, "source": f"s{d['id'] % 4}"} for d in documents]
    expected = workflow_pairs(rated, tmp_path / "workflow", **SETTINGS, ranking_strategy=strategy,
                              metadata_fields=["quality", "source"])
    assert len(expected) >= 90 and set(expected) != set(workflow_removed)  # another copy kept than by distance
    for blocks in (1 << 16, 16):
        found = transform_pairs(rated, tmp_path / f"blocks-{blocks}", {"runner": "local"}, **SETTINGS,
                                ranking_strategy=strategy, cluster_block_size=blocks)
        assert_same_removals(found, expected)


@pytest.mark.parametrize(("margin", "blocks"), [(None, 1 << 16), (None, 16), (0.3, 16), (0.0, 16)])
def test_the_cross_cluster_pass_finds_the_workflows_pairs_across_cluster_boundaries(
    tmp_path: Path, margin: float | None, blocks: int,
) -> None:
    """Near-duplicate pairs straddling the boundary of two clusters: the cross-cluster pass removes what the
    workflow's removes, in whole clusters and in blocks of 16 (each cluster's ~300 visitors then in chunks of
    16 too); without it, or with a margin no document is within, neither removes them."""
    ids, vectors = straddling_vectors()
    straddling = [{"id": key, "embeddings": vector.astype(np.float32).tolist()} for key, vector in zip(ids, vectors)]
    settings = {"n_clusters": 2, "eps": 0.01, "cross_cluster": True, "cross_cluster_margin": margin}
    expected = workflow_pairs(straddling, tmp_path / "workflow", **settings)
    found = transform_pairs(straddling, tmp_path / "transform", {"runner": "local"}, **settings,
                            cluster_block_size=blocks)
    assert_same_removals(found, expected)
    pairs = [{f"L{i}", f"R{i}"} for i in range(6)]
    assert [len(pair & set(found)) for pair in pairs] == [0 if margin == 0 else 1] * 6
    assert set(found) <= set().union(*pairs)
    if margin is None and blocks == 16:
        plain = transform_pairs(straddling, tmp_path / "plain", {"runner": "local"}, n_clusters=2, eps=0.01,
                                cluster_block_size=blocks)
        assert plain == {}


def test_a_real_model_through_run_inference_keeps_one_document_of_each_text(tmp_path: Path) -> None:
    """The bundled sentence-transformers model embeds each document's text;
    of a text's three copies one is kept, and the others name a copy of it."""
    from beam_curator.models import make_embedding_handler

    documents = [{"doc_id": f"n{number}-{copy}", "text": note, "lang": "en"}
                 for copy in range(3) for number, note in enumerate(NOTES)]
    random.Random(3).shuffle(documents)
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.Create(documents) | SemanticDedup(
            make_embedding_handler("sentence-transformers"), id_field="doc_id", n_clusters=2, eps=0.01)
        _ = result.kept | "Kept" >> beam.Map(json.dumps) | "WriteKept" >> beam.io.WriteToText(str(tmp_path / "kept"))
        _ = result.removed | "Removed" >> beam.Map(json.dumps) | "WriteRemoved" >> beam.io.WriteToText(
            str(tmp_path / "removed"))

    def read(stem: str) -> list[dict]:
        return [json.loads(line) for path in tmp_path.glob(f"{stem}*") for line in path.read_text().splitlines()]

    kept, removed = read("kept"), read("removed")
    assert sorted(d["text"] for d in kept) == sorted(NOTES)
    assert all(set(d) == {"doc_id", "text", "lang"} for d in kept)
    text_of = {d["doc_id"]: d["text"] for d in documents}
    assert len(removed) == 12
    assert all(text_of[d["duplicate_of"]] == d["text"] and d["similarity"] >= 0.99 for d in removed)


def test_each_removal_of_a_forest_of_matches_resolves_to_its_root_with_their_cosine() -> None:
    """Random trees of matches (each removed id names an earlier one) and one chain 60 links long: every removal
    names its root, the kept document, with the root's similarity where it matched the root and the cosine of
    their vectors where it matched another removal."""
    rng = np.random.default_rng(11)
    parent = {node: int(rng.integers(0, node)) for node in range(8, 400)}  # roots 0..7 are kept
    parent.update({1000: 3, **{node: node - 1 for node in range(1001, 1060)}})
    unit = {node: vector / np.linalg.norm(vector) for node in [*range(400), *range(1000, 1060)]
            for vector in [rng.normal(size=8)]}

    def root(node: int) -> int:
        while node in parent:
            node = parent[node]
        return node

    links = [(node, Link(match, float(unit[node] @ unit[match]), unit[node], unit[match]))
             for node, match in parent.items()]
    with beam.Pipeline(options=pipeline_options("local")) as pipeline:
        found = (pipeline | beam.Create(links) | KeptRepresentatives(10, "test")
                 | beam.MapTuple(lambda node, removal: (node, removal.kept, round(removal.similarity, 5),
                                                        removal.match, round(removal.score, 5))))
        assert_that(found, equal_to([(node, root(node), round(float(unit[node] @ unit[root(node)]), 5), match,
                                      round(float(unit[node] @ unit[match]), 5)) for node, match in parent.items()]))


def test_the_settings_are_checked_when_the_transform_is_made() -> None:
    with pytest.raises(ValueError, match="give model_handler .* or embedding_field .*not both or neither"):
        SemanticDedup()
    with pytest.raises(ValueError, match="not both or neither"):
        SemanticDedup(object(), embedding_field="embeddings")
    with pytest.raises(ValueError, match=r"eps must be in \[0, 1\)"):
        SemanticDedup(embedding_field="embeddings", eps=1.5)
    with pytest.raises(ValueError, match="which_to_keep must be one of"):
        SemanticDedup(embedding_field="embeddings", which_to_keep="first")
    with pytest.raises(ValueError, match="cluster_block_size must be a positive integer, not 0"):
        SemanticDedup(embedding_field="embeddings", cluster_block_size=0)
    with pytest.raises(ValueError, match=r"ranking_strategy must be a RankingStrategy .*not \['quality'\]"):
        SemanticDedup(embedding_field="embeddings", ranking_strategy=["quality"])
    with pytest.raises(ValueError, match="cross_cluster_margin limits the cross-cluster pass; pass cross_cluster=True"):
        SemanticDedup(embedding_field="embeddings", cross_cluster_margin=0.1)
    with pytest.raises(ValueError, match=r"cross_cluster_margin must be a distance >= 0 .*not -0.1"):
        SemanticDedup(embedding_field="embeddings", cross_cluster=True, cross_cluster_margin=-0.1)
    with pytest.raises(ValueError, match="the cross-cluster pass needs one order over all documents"):
        SemanticDedup(embedding_field="embeddings", cross_cluster=True, ranking_strategy=RankingStrategy.random())
    pipeline = beam.Pipeline()
    ticks = pipeline | PeriodicImpulse(0, 10, 1) | beam.Map(lambda t: {"id": int(t), "embeddings": [1.0]})
    with pytest.raises(ValueError, match="SemanticDedup takes a bounded PCollection.*unbounded"):
        ticks | SemanticDedup(id_field="id", embedding_field="embeddings")


@pytest.mark.parametrize(("documents", "message"), [
    ([{"id": 1, "vector": [1.0, 0.0]}], r"no field 'embeddings' \(embedding_field\); its fields are \['id', 'vector'\]"),
    ([{"id": 1, "embeddings": [1.0, 0.0]}, {"id": 2, "embeddings": [1.0, 0.0, 0.5]}], "different lengths"),
    ([{"id": 1, "embeddings": [1.0, 0.0]}, {"id": 2, "embeddings": [0.0, 0.0]}], "zero-length or NaN"),
    ([{"id": 1, "embeddings": [1.0, 0.0]}], r"n_clusters=2 is more than the 1 documents"),
    ([{"id": None, "embeddings": [1.0, 0.0]}], "give every document a unique integer or string id"),
])
def test_bad_documents_fail_naming_what_to_fix(documents: list, message: str) -> None:
    with pytest.raises(Exception, match=message):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create(documents) | SemanticDedup(id_field="id", embedding_field="embeddings",
                                                                   n_clusters=2)


def test_on_bad_record_skip_drops_documents_without_an_id_or_a_vector() -> None:
    documents = [{"id": 1, "embeddings": [1.0, 0.0]}, {"id": 2, "embeddings": [1.0, 0.001]},
                 {"id": 3, "embeddings": [0.0, 1.0]}, {"id": 4, "vector": [1.0, 0.0]}, {"embeddings": [1.0, 0.0]}]
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        result = pipeline | beam.Create(documents) | SemanticDedup(id_field="id", embedding_field="embeddings",
                                                                   n_clusters=1, on_bad_record="skip")
        assert_that(result.kept | beam.Map(lambda document: document["id"]), equal_to([1, 3]), label="kept")
        assert_that(result.removed | beam.Map(lambda document: document["id"]), equal_to([2]), label="removed")


def test_a_ranking_field_the_documents_lack_fails_naming_it() -> None:
    documents = [{"id": 1, "embeddings": [1.0, 0.0], "rating": 3}, {"id": 2, "embeddings": [0.0, 1.0], "rating": 1}]
    with pytest.raises(Exception, match=r"no field 'quality' \(ranking_strategy's metadata_cols\); its fields are "
                                        r"\['id', 'embeddings', 'rating'\]"):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create(documents) | SemanticDedup(
                id_field="id", embedding_field="embeddings", n_clusters=1,
                ranking_strategy=RankingStrategy.metadata_based(["quality"]))


def test_no_documents_give_no_output_and_no_fit() -> None:
    with beam.Pipeline() as pipeline:
        result = pipeline | beam.Create([], reshuffle=False) | SemanticDedup(id_field="id", embedding_field="embeddings")
        assert_that((result.kept, result.removed) | beam.Flatten(), equal_to([]))


def cached_rows(cache: Path) -> list[str]:
    """The text digests of every finished cache file, once per vector written."""
    return [digest for path in sorted(cache.rglob("part-*.parquet"))
            for digest in pq.read_table(path, columns=["text_digest"]).column(0).to_pylist()]


def removed_by(output: Path) -> dict[str, str]:
    return {path.stem: json.loads(path.read_text()) for path in output.glob("*.json")}


def test_a_killed_pipelines_rerun_embeds_only_the_texts_not_cached_and_removes_what_a_fresh_run_removes(
    tmp_path: Path,
) -> None:
    """SIGKILL once the cache holds its first vectors; the rerun embeds each
    remaining text once, and an added file's texts alone; another
    ``max_chars`` makes another key: everything is embedded again."""
    from beam_curator.data import sample_corpus_path

    script = Path(__file__).parent / "scripts" / "semantic_transform_run.py"
    inputs = tmp_path / "input"
    inputs.mkdir()
    files = sorted(Path(sample_corpus_path()).glob("*.jsonl"))
    for path in files[:-1]:
        (inputs / path.name).write_text(path.read_text())
    texts = {json.loads(line)["text"] for path in files[:-1] for line in path.read_text().splitlines()}

    # Texts cut at 200 characters (about 50 tokens): each run embeds in half the time it takes whole texts.
    def run(cache: Path, output: Path, max_chars: str = "200", folder: Path = inputs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), str(folder), str(cache), str(output), max_chars],
                              capture_output=True, text=True, timeout=600)

    fresh = run(tmp_path / "fresh-cache", tmp_path / "fresh")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert sorted(cached_rows(tmp_path / "fresh-cache")) == sorted({hashlib.sha256(t.encode()).hexdigest()
                                                                    for t in texts}), "each text embedded once"

    cache = tmp_path / "cache"
    killed = subprocess.Popen([sys.executable, str(script), str(inputs), str(cache), str(tmp_path / "killed"), "200"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not cached_rows(cache) and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    before = cached_rows(cache)
    assert 0 < len(before) < len(texts), "killed while embedding"

    rerun = run(cache, tmp_path / "rerun")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = cached_rows(cache)
    assert sorted(after) == sorted(cached_rows(tmp_path / "fresh-cache")), "only the texts not cached embedded"
    # Compared by text: of exact copies at equal distance from their centroid, the vectors' last bits (from
    # other assignment batches) may pick another one to keep.
    text_of = {record["doc_id"]: record["text"] for path in files for record in map(json.loads, path.read_text().splitlines())}
    assert sorted((text_of[key], text_of[value]) for key, value in removed_by(tmp_path / "rerun").items()) == \
        sorted((text_of[key], text_of[value]) for key, value in removed_by(tmp_path / "fresh").items())
    assert removed_by(tmp_path / "fresh")

    (inputs / files[-1].name).write_text(files[-1].read_text())
    added = {json.loads(line)["text"] for line in files[-1].read_text().splitlines()} - texts
    assert run(cache, tmp_path / "added").returncode == 0
    assert len(cached_rows(cache)) == len(after) + len(added)

    one_file = tmp_path / "one-file"  # the texts of one file are enough to show another key embeds all again
    one_file.mkdir()
    (one_file / files[0].name).write_text(files[0].read_text())
    first_texts = {json.loads(line)["text"] for line in files[0].read_text().splitlines()}
    assert run(cache, tmp_path / "shorter", "150", folder=one_file).returncode == 0
    assert len(cached_rows(cache)) == len(after) + len(added) + len(first_texts), "another key: all again"


def test_a_cache_file_that_does_not_read_or_names_another_key_is_skipped_and_its_texts_embedded_again(
    tmp_path: Path,
) -> None:
    from beam_curator.models import make_embedding_handler
    from beam_curator.transforms.embedding_cache import KEY_METADATA

    documents = [{"doc_id": f"n{number}-{copy}", "text": note} for copy in range(2) for number, note in enumerate(NOTES)]
    handler = make_embedding_handler("sentence-transformers")

    def run(name: str) -> tuple[dict[str, str], list[str]]:
        with captured_logs() as logs, beam.Pipeline() as pipeline:
            result = pipeline | beam.Create(documents) | SemanticDedup(
                handler, id_field="doc_id", n_clusters=2, eps=0.01, cache_path=str(tmp_path / "cache"))
            _ = result.removed | beam.Map(write_element, tmp_path / name)
        return {d["doc_id"]: d["duplicate_of"] for d in map(json.loads, map(Path.read_text,
                                                                          (tmp_path / name).glob("*.json")))}, logs

    first, _ = run("first")
    (written,) = list((tmp_path / "cache").rglob("part-*.parquet"))
    assert len(first) == 6 and len(cached_rows(tmp_path / "cache")) == 6  # each text embedded once
    table = pq.read_table(written)
    pq.write_table(table.replace_schema_metadata({KEY_METADATA: b"another model"}), written.with_name("part-other.parquet"))
    written.write_bytes(written.read_bytes()[:100])  # damaged
    again, logs = run("again")
    # The same pairs of copies; which copy of a pair is kept may differ: texts embedded again in other batches
    # move in their last bits, enough to reorder two copies at equal distance from their centroid.
    assert {frozenset(pair) for pair in again.items()} == {frozenset(pair) for pair in first.items()}
    skipped = [message for message in logs if "embedding cache file" in message]
    assert len(skipped) == 2 and any("another model or other settings" in message for message in skipped)
    new = [path for path in (tmp_path / "cache").rglob("part-*.parquet") if path.name not in (written.name, "part-other.parquet")]
    assert sum(pq.read_metadata(path).num_rows for path in new) == 6, "the six texts embedded again, once each"
