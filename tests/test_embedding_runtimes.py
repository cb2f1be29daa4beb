"""The CPU runtimes of sentence-transformers models (ONNX Runtime, OpenVINO):
their vectors against torch's on the bundled corpus, the export cache, the
workflow and CLI settings.

Exports go to a temporary ``XDG_CACHE_HOME`` shared by the module, so each
precision is exported once here and never into the user's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import copy_corpus, duplicate_ids, file_times, jsonl_rows  # noqa: E402

from beam_curator.cli.main import main  # noqa: E402
from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.models import (  # noqa: E402
    DEFAULT_MODEL,
    RUNTIMES,
    SentenceTransformerEmbeddingHandler,
    resolve_model,
)
from beam_curator.models.model_cache import RECORD_FILE  # noqa: E402
from beam_curator.models.onnx_export import exported_model  # noqa: E402
from beam_curator.stages.io.fingerprint import file_digest  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402

MAX_CHARS = 300
FILES = ("part-00000.jsonl", "part-00004.jsonl")  # share four texts, and hold near-duplicate pairs


def installed(package: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(package) is not None


needs_onnxruntime = pytest.mark.skipif(not installed("onnxruntime"), reason="the onnx extra is not installed")


@pytest.fixture(scope="module")
def export_cache(tmp_path_factory) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
        yield Path(os.environ["XDG_CACHE_HOME"]) / "beam_curator" / "onnx"


@pytest.fixture(scope="module")
def sample_texts() -> list[str]:
    return [row["text"][:MAX_CHARS] for name in FILES for row in jsonl_rows(Path(sample_corpus_path()) / name)]


@pytest.fixture(scope="module")
def torch_vectors(export_cache, sample_texts) -> np.ndarray:
    return unit(SentenceTransformerEmbeddingHandler(device="cpu").load_model().embed(sample_texts))


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize(("runtime", "least_cosine"), [
    pytest.param("onnx", 0.999, marks=needs_onnxruntime),
    pytest.param("onnx-int8", 0.98, marks=needs_onnxruntime),
    pytest.param("openvino", 0.999, marks=pytest.mark.skipif(not installed("openvino"), reason="no openvino")),
    pytest.param("openvino-bf16", 0.999, marks=pytest.mark.skipif(not installed("openvino"), reason="no openvino")),
])
def test_every_document_gets_nearly_torchs_vector(runtime, least_cosine, sample_texts, torch_vectors) -> None:
    embedder = SentenceTransformerEmbeddingHandler(runtime=runtime).load_model()
    # In shuffled order, so that the length sorting inside each call must be undone correctly.
    order = np.random.default_rng(0).permutation(len(sample_texts))
    vectors = np.empty_like(torch_vectors)
    vectors[order] = unit(embedder.embed([sample_texts[i] for i in order]))
    cosine = (vectors * torch_vectors).sum(axis=1)
    assert cosine.min() > least_cosine, f"{runtime}: document {cosine.argmin()} at cosine {cosine.min():.5f}"
    if runtime == "onnx-int8":  # quantised: close, but not torch's vectors
        assert cosine.mean() < 0.9995
        # Yet a text's vector does not depend on the texts embedded beside it, so copies stay identical.
        assert np.array_equal(unit(embedder.embed([sample_texts[order[0]]]))[0], vectors[order[0]])


@needs_onnxruntime
@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8"])
def test_passes_run_at_once_give_each_text_the_vector_it_gets_alone(runtime, sample_texts) -> None:
    """ONNX Runtime's passes run on several threads at once (runtimes._session):
    every text still gets exactly its own vector, in its own place."""
    import torch

    assert torch.get_num_threads() > 1 or os.cpu_count() == 1, "the passes would not run at once"
    embedder = SentenceTransformerEmbeddingHandler(runtime=runtime).load_model()
    together = embedder.embed(sample_texts)
    alone = np.concatenate([embedder.embed([text]) for text in sample_texts])
    assert np.array_equal(together, alone)


@needs_onnxruntime
def test_the_export_is_reused_and_a_damaged_one_is_exported_again(tmp_path, export_cache) -> None:
    model_dir = resolve_model(DEFAULT_MODEL)
    onnx = exported_model(model_dir, "fp32", tmp_path)
    record = json.loads((onnx.parent / RECORD_FILE).read_text())
    assert record["files"] == {onnx.name: file_digest(onnx)} and record["precision"] == "fp32"
    written = file_times(tmp_path)

    assert exported_model(model_dir, "fp32", tmp_path) == onnx
    assert file_times(tmp_path) == written, "a verified export must be reused, not written again"

    with onnx.open("r+b") as damaged:  # same size, other bytes: only the digest tells
        damaged.seek(1000)
        damaged.write(b"\0" * 64)
    assert exported_model(model_dir, "fp32", tmp_path) == onnx
    assert file_digest(onnx) == record["files"][onnx.name] and file_times(tmp_path) != written

    (onnx.parent / RECORD_FILE).write_text(json.dumps({**record, "key": "an older export"}))
    exported_model(model_dir, "fp32", tmp_path)
    assert json.loads((onnx.parent / RECORD_FILE).read_text())["key"] == record["key"]
    assert [path.name for path in tmp_path.iterdir()] == [onnx.parent.name], "no temporary folder is left"


def test_a_bad_runtime_is_refused_naming_the_valid_ones(tmp_path) -> None:
    for build in (lambda: SentenceTransformerEmbeddingHandler(runtime="onnx16"),
                  lambda: TextSemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"),
                                                            embedding_runtime="onnx16")):
        with pytest.raises(ValueError, match="unknown embedding runtime 'onnx16'") as error:
            build()
        assert all(repr(name) in str(error.value) for name in RUNTIMES)
    with pytest.raises(ValueError, match="embedding_backend='sentence-transformers'"):
        TextSemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), embedding_backend="vllm",
                                          embedding_runtime="onnx")


def test_a_missing_package_is_named_with_the_pip_command() -> None:
    # sys.modules[name] = None is how Python marks a module as not importable.
    code = textwrap.dedent("""
        import sys
        sys.modules["onnxruntime"] = None
        from beam_curator.models import SentenceTransformerEmbeddingHandler
        try:
            SentenceTransformerEmbeddingHandler(runtime="onnx-int8")
        except ImportError as error:
            print(error)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "needs the 'onnxruntime' package" in done.stdout, done.stderr
    assert "pip install 'beam-curator[onnx]'" in done.stdout


@needs_onnxruntime
def test_the_workflow_finds_the_same_duplicates_with_onnx_and_reembeds_for_torch(tmp_path, export_cache) -> None:
    """One cache folder: the onnx run, then a torch run, which must embed again (the runtime is
    part of the embedding phase's fingerprint) and find the same duplicate pairs. Of two exact
    copies either may be the one removed: their distances to the centroid tie up to rounding."""
    input_dir = copy_corpus(tmp_path / "input", FILES)

    def run(runtime: str, output: str) -> set[frozenset[str]]:
        TextSemanticDeduplicationWorkflow(
            str(input_dir), str(tmp_path / output), str(tmp_path / "cache"), input_filetype="jsonl",
            output_filetype="jsonl", id_field="doc_id", embedding_backend="sentence-transformers",
            embedding_runtime=runtime, embedding_max_chars=MAX_CHARS, n_clusters=4, eps=0.05, runner="local",
        ).run()
        pairs = duplicate_ids(tmp_path / output)
        return {frozenset(pair) for pair in zip(pairs["id"], pairs["max_id"])}

    onnx_pairs = run("onnx", "onnx")
    embedded = file_times(tmp_path / "cache" / "embeddings")
    torch_pairs = run("torch", "torch")
    assert file_times(tmp_path / "cache" / "embeddings") != embedded, "the torch run reused the onnx vectors"
    assert len(torch_pairs) >= 4
    assert onnx_pairs == torch_pairs


@needs_onnxruntime
def test_the_cli_runs_with_a_runtime(tmp_path, export_cache, capsys, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    input_dir = copy_corpus(tmp_path / "input", FILES[:1])
    rows = jsonl_rows(input_dir / FILES[0])[:30]
    rows.append({**rows[3], "doc_id": "copy-of-3"})
    (input_dir / FILES[0]).write_text("".join(json.dumps(row) + "\n" for row in rows))
    common = ["semdedup", "--input", str(input_dir), "--output", str(tmp_path / "out"), "--id-field", "doc_id",
              "--n-clusters", "2", "--eps", "0.01", "--no-removal", "--runner", "local"]
    assert main([*common, "--embedding-runtime", "onnx-int8"]) == 0
    assert "copy-of-3" in set(duplicate_ids(tmp_path / "out")["id"]) | set(duplicate_ids(tmp_path / "out")["max_id"])
    exports = tmp_path / "xdg" / "beam_curator" / "onnx"
    assert [path.name.split("-")[0] for path in exports.iterdir()] == ["int8"], "the run used the int8 export"
    with pytest.raises(SystemExit) as exit_info:
        main([*common, "--embedding-runtime", "onnx16"])
    assert exit_info.value.code == 2 and "invalid choice: 'onnx16'" in capsys.readouterr().err
