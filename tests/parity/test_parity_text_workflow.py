"""NeMo Curator's text semantic-dedup workflow test: seven short texts in
seven parquet files, 3 clusters, eps 0.1, ``hard``; of the four "quick
brown ..." sentences three are kept, of the three others two. With the
user's ids and with generated ones (``use_id_generator=True``), the cache
and output folders and their schemas are NeMo's. NeMo embeds with
``google/embeddinggemma-300m``; we use the bundled MiniLM (no hub access
here), and the same counts hold."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from beam_curator.workflows import TextSemanticDeduplicationWorkflow

TEXTS = {
    1: "The quick brown fox jumps over the lazy dog",
    2: "The quick brown foxes jumps over the lazy dog",
    3: "The quick brown wolf jumps over the lazy dog",
    4: "The quick black cat jumps over the lazy dog",
    100: "A test string",
    200: "Another test string",
    300: "A different object",
}


@pytest.fixture(scope="module", params=[False, True], ids=["user-ids", "generated-ids"])
def run(request, tmp_path_factory) -> tuple[Path, Path, dict, bool]:
    base = tmp_path_factory.mktemp("text")
    (base / "input").mkdir()
    for number, (doc_id, text) in enumerate(TEXTS.items()):
        pd.DataFrame({"id": [doc_id], "text": [text]}).to_parquet(base / "input" / f"test_file_{number}.parquet")
    generated = request.param
    result = TextSemanticDeduplicationWorkflow(
        input_path=str(base / "input"), output_path=str(base / "output"), cache_path=str(base / "cache"),
        perform_removal=True, n_clusters=3, eps=0.1, which_to_keep="hard", use_id_generator=generated,
        id_field="_curator_dedup_id" if generated else "id", input_filetype="parquet", output_filetype="parquet",
        embedding_backend="sentence-transformers", verbose=True, clear_output=True,
    ).run()
    return base / "cache", base / "output", result.metadata, generated


def test_three_of_the_first_group_and_two_of_the_second_are_kept(run):
    _, _, metadata, _ = run
    kept = set(pd.read_parquet(metadata["final_output_path"])["id"])
    assert len(kept & {1, 2, 3, 4}) == 3 and len(kept & {100, 200, 300}) == 2
    assert metadata["num_duplicates"] == 2 and metadata["num_duplicates_removed"] == 2
    for key in ("total_time", "embedding_time", "identification_time", "removal_time"):
        assert metadata[key] > 0


def test_folders_and_schemas(run):
    cache, output, _, generated = run
    id_column = "_curator_dedup_id" if generated else "id"
    for folder in ("embeddings", "semantic_dedup/kmeans_results", "semantic_dedup/pairwise_results",
                   "semantic_dedup/kmeans_sample", "semantic_dedup/id_check"):
        assert (cache / folder).is_dir()
    # Not directly in the cache, where SemanticDeduplicationWorkflow used on its own puts them.
    for folder in ("kmeans_results", "pairwise_results", "kmeans_sample", "id_check"):
        assert not (cache / folder).exists(), folder
    embeddings = pd.read_parquet(cache / "embeddings")
    assert {id_column, "embeddings"} <= set(embeddings.columns) and len(embeddings) == 7
    kmeans = pd.read_parquet(cache / "semantic_dedup" / "kmeans_results" / "embs_by_nearest_center")
    assert {id_column, "embeddings", "nearest_cent"} <= set(kmeans.columns) and len(kmeans) == 7
    pairwise = pd.read_parquet(cache / "semantic_dedup" / "pairwise_results")
    assert set(pairwise.columns) == {"id", "max_id", "cosine_sim_score"} and len(pairwise) == 7
    duplicates = pd.read_parquet(output / "duplicates")
    assert list(duplicates.columns) == ["id"] and len(duplicates) == 2
    clean = pd.read_parquet(output / "deduplicated")
    # The input's own columns: generated ids are dropped, as NeMo drops them.
    assert set(clean.columns) == {"id", "text"} and len(clean) == 5
