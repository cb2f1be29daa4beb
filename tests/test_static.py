"""The static embedding backend (model2vec): distillation and its cache, the
handler, the semantic workflow and the command line with ``static``.

The bundled MiniLM is distilled once for the module, into a temporary cache
(about 35 s on a quiet 2-core machine); the cache's rules (reuse, rebuild of
a damaged folder, a new key for a changed source) are checked on the cache
mechanism itself with a build of a few bytes, and everything else reuses the
one distilled model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import copy_corpus, duplicate_ids, file_times, jsonl_rows, write_jsonl  # noqa: E402

from beam_curator.cli.main import main  # noqa: E402
from beam_curator.models import DEFAULT_MODEL, make_embedding_handler, resolve_model  # noqa: E402
from beam_curator.models.distill import distill_static_model, is_static_model, static_model_key  # noqa: E402
from beam_curator.models.model_cache import RECORD_FILE, build_key, cached_build  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402

TEXT_FILE = "part-00000.jsonl"


@pytest.fixture(scope="module")
def static_cache(tmp_path_factory) -> Path:
    """The bundled model distilled at the default settings, cached under a temporary ``XDG_CACHE_HOME``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        xdg = tmp_path_factory.mktemp("xdg")
        patch.setenv("XDG_CACHE_HOME", str(xdg))
        distill_static_model()
        yield xdg / "beam_curator" / "static"


@pytest.fixture(scope="module")
def distilled(static_cache) -> Path:
    (folder,) = static_cache.iterdir()
    return folder


def test_distillation_is_cached_and_reused_at_once(static_cache, distilled) -> None:
    assert is_static_model(distilled) and not is_static_model(resolve_model(DEFAULT_MODEL))
    record = json.loads((distilled / RECORD_FILE).read_text())
    assert record["pca_dims"] == 256 and record["source"] == resolve_model(DEFAULT_MODEL)
    written = file_times(static_cache)
    assert distill_static_model() == distilled
    assert file_times(static_cache) == written, "a verified distilled model must be reused, not distilled again"


def test_the_static_handler_gives_unit_vectors_equal_for_equal_texts(distilled) -> None:
    handler = make_embedding_handler("static", str(distilled), max_chars=200)
    texts = ["a text editor for the terminal", "a text editor for the console", "a text editor for the terminal",
             "bindings of a compression library for Python"]
    vectors = np.stack([result.inference for result in handler.run_inference(texts, handler.load_model())])
    assert vectors.shape == (4, 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-3)
    similarity = vectors @ vectors.T
    assert similarity[0, 2] == pytest.approx(1.0, abs=1e-3)
    assert similarity[0, 1] > 0.8 > similarity[0, 3]
    assert not handler.share_model_across_processes(), "a static model is small: one per worker process"


def test_loading_a_static_model_leaves_transformers_unimported(distilled) -> None:
    """model2vec reads a local folder without transformers; importing it (to hush its progress bars, as the
    transformer engines' loads do) cost a second of every static run."""
    code = ("import sys; from beam_curator.models.static import StaticEmbeddingHandler; "
            f"StaticEmbeddingHandler({str(distilled)!r}).load_model().embed(['a text']); "
            "print('transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_static_vectors_are_the_float32_mean_of_the_float16_token_vectors(distilled) -> None:
    """model2vec stores the distilled table as float16; the handler pools it in float32: each vector is the
    normalised mean of its tokens' rows computed here in float64, to float32 precision, and within float16's
    rounding of what model2vec gives when it pools in float16."""
    from model2vec import StaticModel

    texts = ["a text editor for the terminal", "bindings of a compression library for Python",
             "Tiny. ", "utilities " * 40]
    handler = make_embedding_handler("static", str(distilled))
    vectors = np.stack([result.inference for result in handler.run_inference(texts, handler.load_model())])
    stored = StaticModel.from_pretrained(str(distilled))
    assert stored.embedding.dtype == np.float16
    for text, vector in zip(texts, vectors):
        (tokens,) = stored.tokenize([text])
        mean = stored.embedding[tokens].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=2e-6)
    half = stored.encode(texts, normalize=True).astype(np.float32)
    assert 0 < np.abs(half - vectors).max() < 2e-3


def test_vectors_pooled_in_another_precision_are_known_apart(distilled, monkeypatch) -> None:
    """The pooling precision is part of what names static vectors: the workflow's embedding key and the
    transforms' cache key change with it, so that vectors pooled before this change are not reused."""
    import beam_curator.models.distill as distill

    handler = make_embedding_handler("static", str(distilled))
    identity, key = handler.vector_identity(), static_model_key(distilled)
    monkeypatch.setattr(distill, "TABLE_DTYPE", "float16")
    assert static_model_key(distilled) != key
    handler.table_dtype = "float16"
    assert handler.vector_identity() != identity


def test_a_damaged_or_stale_build_is_rebuilt_and_a_good_one_reused(tmp_path) -> None:
    builds: list[Path] = []

    def build(target: Path) -> dict[str, str]:
        builds.append(target)
        (target / "model.bin").write_bytes(b"vectors " * 100)
        return {"note": "a build of a few bytes"}

    folder = tmp_path / "built"
    assert cached_build(folder, "key-1", build) == folder and len(builds) == 1
    cached_build(folder, "key-1", build)
    assert len(builds) == 1, "a verified build is reused"
    with (folder / "model.bin").open("r+b") as damaged:  # same size, other bytes: only the digest tells
        damaged.write(b"\0" * 8)
    cached_build(folder, "key-1", build)
    assert len(builds) == 2 and (folder / "model.bin").read_bytes() == b"vectors " * 100
    (folder / RECORD_FILE).unlink()  # an interrupted copy, say: no record, never trusted
    cached_build(folder, "key-1", build)
    assert len(builds) == 3
    cached_build(folder, "key-2", build)  # another source or settings
    assert len(builds) == 4 and json.loads((folder / RECORD_FILE).read_text())["key"] == "key-2"
    assert [path.name for path in tmp_path.iterdir()] == ["built"], "no temporary folder is left"


def test_a_changed_source_model_gets_another_key(tmp_path) -> None:
    source = tmp_path / "model"
    shutil.copytree(resolve_model(DEFAULT_MODEL), source, ignore=shutil.ignore_patterns("*.safetensors"))
    settings = {"pca_dims": 256}
    key = build_key(source, settings)
    assert build_key(source, settings) == key
    tokenizer = source / "tokenizer_config.json"
    tokenizer.write_text(tokenizer.read_text().replace("}", ', "note": "changed"}', 1))
    assert build_key(source, settings) != key
    assert build_key(source, {"pca_dims": 128}) not in (key, build_key(source, settings))


def test_bad_distill_settings_are_refused_by_name(static_cache, distilled, capsys) -> None:
    with pytest.raises(ValueError, match="pca_dims must be a positive integer"):
        distill_static_model(pca_dims=0)
    with pytest.raises(ValueError, match="already a static model"):
        distill_static_model(str(distilled))
    assert main(["distill", "--model", "/no/such/model"]) == 2
    assert "was not found locally" in capsys.readouterr().err


def planted_corpus(folder: Path) -> tuple[Path, dict[str, str]]:
    """A file of the bundled corpus plus an exact copy and a near copy (one word changed) of two of its
    records; which planted id duplicates which."""
    rows = jsonl_rows(copy_corpus(folder / "source", (TEXT_FILE,)) / TEXT_FILE)
    exact, near = rows[3], rows[10]
    planted = [{**exact, "doc_id": "planted-exact"},
               {**near, "doc_id": "planted-near", "text": near["text"].replace(" the ", " this ", 1)}]
    assert planted[1]["text"] != near["text"]
    write_jsonl(folder / "input" / TEXT_FILE, rows + planted)
    return folder / "input", {"planted-exact": exact["doc_id"], "planted-near": near["doc_id"]}


def found_pairs(output: Path) -> set[frozenset]:
    pairs = duplicate_ids(output)
    return {frozenset(pair) for pair in zip(pairs["id"], pairs["max_id"])}


def test_the_workflow_with_the_static_backend_finds_planted_duplicates(static_cache, distilled, tmp_path) -> None:
    input_dir, planted = planted_corpus(tmp_path)
    model = tmp_path / "static-model"
    shutil.copytree(distilled, model)
    settings = {"input_filetype": "jsonl", "output_filetype": "jsonl", "id_field": "doc_id", "n_clusters": 3,
                "eps": 0.05, "embedding_backend": "static", "model_identifier": str(model), "runner": "local"}
    TextSemanticDeduplicationWorkflow(str(input_dir), str(tmp_path / "out"), **settings).run()
    assert {frozenset(pair) for pair in planted.items()} <= found_pairs(tmp_path / "out")

    # Another static model under the same name: its vectors must not be taken for the old model's.
    key = static_model_key(model)
    from safetensors.numpy import load_file, save_file

    weights = load_file(model / "model.safetensors")
    save_file({name: np.flip(array, axis=-1).copy() for name, array in weights.items()}, model / "model.safetensors")
    assert static_model_key(model) != key
    rerun = TextSemanticDeduplicationWorkflow(str(input_dir), str(tmp_path / "out"), **settings).run()
    assert "embedding" in rerun.metadata["phases_run"]


def test_the_command_line_selects_the_static_backend_and_distills_through_the_cache(
        static_cache, distilled, tmp_path, capsys) -> None:
    input_dir, planted = planted_corpus(tmp_path)
    assert main(["distill"]) == 0
    assert capsys.readouterr().out.strip() == str(distilled), "the cached model, at once"
    code = main(["semdedup", "--input", str(input_dir), "--output", str(tmp_path / "out"), "--input-filetype", "jsonl",
                 "--id-field", "doc_id", "--n-clusters", "3", "--eps", "0.05", "--embedding-backend", "static"])
    assert code == 0, capsys.readouterr().err
    assert {frozenset(pair) for pair in planted.items()} <= found_pairs(tmp_path / "out")
    assert list(static_cache.iterdir()) == [distilled], "the default model was distilled once, through the cache"
