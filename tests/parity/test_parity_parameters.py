"""NeMo Curator users' parameter habits: its names are accepted (and mean
the same as ours), a setting given under both names is refused, unknown
names and misplaced runner settings fail at construction with the closest
valid names, ``eps=None`` with removal raises as in NeMo, and
``storage_options`` reach fsspec."""

from __future__ import annotations

import json
import logging
import os

import fsspec
import pandas as pd
import pytest

from beam_curator.workflows import (
    RankingStrategy,
    SemanticDeduplicationWorkflow,
    TextDuplicatesRemovalWorkflow,
    TextSemanticDeduplicationWorkflow,
)


def text_workflow(tmp_path, **settings: object) -> TextSemanticDeduplicationWorkflow:
    return TextSemanticDeduplicationWorkflow(str(tmp_path / "in"), str(tmp_path / "out"),
                                             embedding_backend="sentence-transformers", **settings)


def test_nemo_names_set_the_same_settings(tmp_path):
    ours = text_workflow(tmp_path, seed=7, files_per_partition=3, kmeans_max_iter=20).semantic
    nemo = text_workflow(tmp_path, kmeans_random_state=7, input_files_per_partition=3, kmeans_max_iter=20,
                         kmeans_n_init=2, kmeans_init="k-means++", kmeans_oversampling_factor=3.0,
                         kmeans_max_samples_per_batch=1024, vllm_init_kwargs=None,
                         embedding_model_cache_dir=str(tmp_path)).semantic
    assert (nemo.kmeans.seed, nemo.kmeans.max_iter) == (ours.kmeans.seed, ours.kmeans.max_iter) == (7, 20)
    assert (nemo.kmeans.n_init, nemo.kmeans.init, nemo.kmeans.oversampling_factor,
            nemo.kmeans.max_samples_per_batch) == (2, "k-means++", 3.0, 1024)
    semantic = SemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), max_iter=5, tol=0.1, random_state=3)
    assert (semantic.kmeans.max_iter, semantic.kmeans.tol, semantic.kmeans.seed) == (5, 0.1, 3)


def test_cache_path_defaults_under_output_path(tmp_path):
    workflow = text_workflow(tmp_path)
    assert workflow.cache_path == str(tmp_path / "out")
    assert workflow.semantic.layout.kmeans_results.startswith(str(tmp_path / "out"))


def test_one_setting_under_two_names_is_refused(tmp_path):
    with pytest.raises(TypeError, match="kmeans_random_state and seed"):
        text_workflow(tmp_path, kmeans_random_state=1, seed=2)


@pytest.mark.parametrize(("make", "typo", "hint"), [
    (lambda tmp, **kw: text_workflow(tmp, **kw), "kmeans_n_inits", "kmeans_n_init"),
    (lambda tmp, **kw: SemanticDeduplicationWorkflow(str(tmp), str(tmp), **kw), "which_to_kept", "which_to_keep"),
    (lambda tmp, **kw: TextDuplicatesRemovalWorkflow(str(tmp), str(tmp), str(tmp), id_field="id", **kw),
     "num_worker", "num_workers"),
])
def test_unknown_names_fail_at_construction_with_the_closest(tmp_path, make, typo, hint):
    with pytest.raises(TypeError, match=f"'{typo}'.*did you mean '{hint}'"):
        make(tmp_path, **{typo: 1})


def test_runner_settings_are_checked_at_construction(tmp_path):
    with pytest.raises(ValueError, match="do(es)? not apply to runner 'local'"):
        text_workflow(tmp_path, flink_master="localhost:8081")
    assert text_workflow(tmp_path, runner="flink", flink_master="localhost:8081")


def test_eps_none_with_removal_raises_as_in_nemo(tmp_path):
    with pytest.raises(ValueError, match="perform_removal=True but eps=None"):
        text_workflow(tmp_path, eps=None)
    assert text_workflow(tmp_path, eps=None, perform_removal=False)


def test_storage_options_become_fsspec_defaults(tmp_path, monkeypatch):
    monkeypatch.setitem(fsspec.config.conf, "memory", {})
    monkeypatch.setenv("FSSPEC_MEMORY", "{}")  # restored (removed) after the test
    SemanticDeduplicationWorkflow("memory://emb", "memory://out", read_kwargs={"storage_options": {"skip_instance_cache": True}})
    assert fsspec.config.conf["memory"] == {"skip_instance_cache": True}
    assert json.loads(os.environ["FSSPEC_MEMORY"]) == {"skip_instance_cache": True}
    with pytest.raises(TypeError, match="'columns'"):
        SemanticDeduplicationWorkflow("memory://emb", "memory://out", read_kwargs={"columns": ["id"]})


def test_ranking_strategy_decides_which_copy_is_kept(tmp_path):
    (tmp_path / "emb").mkdir()
    vectors = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    pd.DataFrame({"id": [1, 2, 3, 4], "embeddings": vectors, "quality": [0.2, 0.9, 0.7, 0.1]}).to_parquet(
        tmp_path / "emb" / "part.parquet", index=False)
    ranking = RankingStrategy.metadata_based(["quality"], ascending=False)
    with pytest.raises(ValueError, match="metadata_fields"):
        SemanticDeduplicationWorkflow(str(tmp_path / "emb"), str(tmp_path / "out"), ranking_strategy=ranking)
    result = SemanticDeduplicationWorkflow(str(tmp_path / "emb"), str(tmp_path / "out"), n_clusters=2, eps=0.01,
                                           metadata_fields=["quality"], ranking_strategy=ranking).run()
    assert result.metadata["num_duplicates"] == 2
    assert pd.read_parquet(tmp_path / "out" / "duplicates")["id"].tolist() == [1, 4]  # the lower quality copies


def test_nemo_positional_arguments_get_a_hint(tmp_path):
    with pytest.raises(TypeError, match="pass n_clusters= by name"):
        SemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), 5)
    with pytest.raises(TypeError, match="pass input_filetype= by name"):
        TextDuplicatesRemovalWorkflow(str(tmp_path), str(tmp_path), str(tmp_path / "out"), "parquet", id_field="id")


def test_verbose_false_silences_progress_messages(tmp_path):
    workflows = logging.getLogger("beam_curator.workflows.semantic.workflow")
    SemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), verbose=False)
    assert not workflows.isEnabledFor(logging.INFO)
    SemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), verbose=True)
    assert workflows.getEffectiveLevel() == logging.getLogger("beam_curator").getEffectiveLevel()
