"""CPU runtimes for sentence-transformers models: torch, ONNX Runtime, OpenVINO.

On a CPU the forward pass is nearly all of embedding's cost, and torch is
not the fastest engine for it. The other runtimes run the model's ONNX
export (see :mod:`beam_curator.models.onnx_export`), tokenised exactly as
sentence-transformers tokenises, in length-sorted slices as ``encode`` does:

* ``torch``: sentence-transformers as is (the default);
* ``onnx``: ONNX Runtime, float32: the same vectors up to rounding;
* ``onnx-int8``: ONNX Runtime with int8 weights: faster, vectors close
  but not equal (cosine about 0.99 to torch's);
* ``openvino``: OpenVINO, float32 precision;
* ``openvino-bf16``: OpenVINO computing in bfloat16 where the CPU supports
  it (AVX512_BF16 or AMX); cosine about 0.9999 to torch's.

BENCHMARKS.md (``bench_embedding_backends.py``) has their speeds and how
often their duplicate sets agree with torch's.
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Runtime:
    """What a runtime needs: the package that runs it, the precision of the
    export it runs, the extra that installs it, and its texts per forward
    pass when none is given.

    ONNX Runtime embeds one text per pass: nothing is padded, and int8's
    dynamic quantisation scales each pass's activations by their own range,
    so in a shared pass a text's vector would depend on its neighbours and
    two copies of one text could get different vectors (measured: half the
    duplicate pairs changed at eps 0.01). One text per pass is also the
    fastest on ONNX Runtime; OpenVINO is fastest with 8.
    """

    name: str
    package: str | None
    precision: str = "fp32"
    extra: str = ""
    openvino_precision: str | None = None
    encode_batch_size: int = 8


RUNTIMES = {
    runtime.name: runtime
    for runtime in (
        Runtime("torch", None),
        Runtime("onnx", "onnxruntime", extra="onnx", encode_batch_size=1),
        Runtime("onnx-int8", "onnxruntime", "int8", extra="onnx", encode_batch_size=1),
        Runtime("openvino", "openvino", extra="openvino", openvino_precision="f32"),
        Runtime("openvino-bf16", "openvino", extra="openvino", openvino_precision="bf16"),
    )
}


def check_runtime(name: str) -> Runtime:
    """The runtime called ``name``, once its package is known to be installed.

    Raises:
        ValueError: an unknown name, listing the valid ones.
        ImportError: its package is missing, with the pip command that installs it.
    """
    runtime = RUNTIMES.get(name)
    if runtime is None:
        raise ValueError(f"unknown embedding runtime {name!r}; use one of {', '.join(map(repr, RUNTIMES))}")
    for package in filter(None, (runtime.package, "onnx" if runtime.package else None)):
        if importlib.util.find_spec(package) is None:
            raise ImportError(
                f"embedding runtime {name!r} needs the {package!r} package, which is not installed; "
                f"run `pip install 'beam-curator[{runtime.extra}]'`"
            )
    return runtime


class ExportedModelEmbedder:
    """A sentence-transformers model run by ONNX Runtime or OpenVINO.

    The ``SentenceTransformer`` is loaded too, for its tokenizer and
    settings (maximum length, truncation), so texts become the same tokens
    as under torch; its own weights are not used.
    """

    def __init__(self, model_dir: str, runtime: Runtime, encode_batch_size: int, export_cache_dir: str | None) -> None:
        from sentence_transformers import SentenceTransformer

        from beam_curator.models.onnx_export import exported_model

        self._model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
        self._forward, at_once = _session(exported_model(model_dir, runtime.precision, export_cache_dir), runtime)
        self._passes = ThreadPoolExecutor(at_once, thread_name_prefix="onnx-pass") if at_once > 1 else None
        self._encode_batch_size = encode_batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        longest_first = sorted(range(len(texts)), key=lambda position: -len(texts[position]))
        # Tokenised here, in one thread: a fast tokenizer's settings are changed by each call.
        feeds = []
        for start in range(0, len(texts), self._encode_batch_size):
            features = self._model.preprocess([texts[i] for i in longest_first[start : start + self._encode_batch_size]])
            feeds.append({name: features[name].numpy() for name in _INPUTS})
        passes = self._passes.map(self._forward, feeds) if self._passes and len(feeds) > 1 else map(self._forward, feeds)
        sorted_vectors = np.concatenate(list(passes)).astype(np.float32, copy=False)
        vectors = np.empty_like(sorted_vectors)
        vectors[longest_first] = sorted_vectors
        return vectors


def _session(path, runtime: Runtime) -> tuple[Callable[[dict[str, np.ndarray]], np.ndarray], int]:
    """One forward pass of the exported model (token arrays in, sentence vectors
    out), and how many passes to run at once.

    Either way it computes on as many threads as torch would
    (``torch.set_num_threads``, ``OMP_NUM_THREADS``), so that one setting bounds
    every runtime. OpenVINO spreads each pass over them. ONNX Runtime's passes
    of one text are too small to split well: passes on one thread each, as
    many at once as there are threads, made the verify cascade's embedding of
    a one-file corpus 1.41x as fast as passes on all threads one after another
    (BENCHMARKS.md, bench_cascade 12-06; a session is safe to share between threads).
    """
    import torch

    threads = torch.get_num_threads()
    if runtime.openvino_precision is not None:
        import openvino

        compiled = openvino.Core().compile_model(
            str(path), "CPU", {"INFERENCE_PRECISION_HINT": runtime.openvino_precision, "INFERENCE_NUM_THREADS": threads}
        )
        # A request per call: RunInference may call from several threads, and a request is not shareable.
        return (lambda feed: compiled.create_infer_request().infer(feed)[0].copy()), 1
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return (lambda feed: session.run(None, feed)[0]), threads
