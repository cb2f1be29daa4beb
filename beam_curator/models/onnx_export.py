"""A sentence-transformers model exported to ONNX once, then reused from a cache.

The export is the whole sentence-transformers forward pass (transformer,
pooling, normalisation) traced into one graph, so an ONNX session returns
the same sentence vectors ``SentenceTransformer.encode`` does, with no
pooling rewritten here. ``int8`` quantises its weights dynamically with
ONNX Runtime's quantiser.

sentence-transformers' own ``export_optimized_onnx_model`` and
``export_dynamic_quantized_onnx_model`` need ``optimum-onnx``, whose
releases all require transformers < 4.58, while vLLM's CPU build needs
transformers 5; hence torch's exporter and ONNX Runtime's quantiser here.

Exports are cached by :mod:`beam_curator.models.model_cache` under
``~/.cache/beam_curator/onnx``, each in a folder named by the digest of the
model's files and of the export settings (precision, opset, torch and
onnxruntime versions), reused only once verified.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

import torch

from beam_curator.models.model_cache import build_key, cached_build, default_cache

Precision = Literal["fp32", "int8"]

EXPORT_FORMAT = 1  # bump when the export itself changes, so old caches are not reused
OPSET = 17
MODEL_FILE = "model.onnx"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def exported_model(model_dir: str, precision: Precision, cache_dir: str | Path | None = None) -> Path:
    """The path of ``model_dir``'s ONNX export at ``precision``, exporting it
    first unless a verified export with the same key is cached."""
    key = export_key(model_dir, precision)
    folder = Path(cache_dir or default_cache("onnx")).expanduser() / f"{precision}-{key[:24]}"

    def export(target: Path) -> dict[str, str]:
        _export(model_dir, precision, target / MODEL_FILE)
        return {"precision": precision, "model_dir": str(model_dir)}

    return cached_build(folder, key, export) / MODEL_FILE


def export_key(model_dir: str, precision: Precision) -> str:
    """Digest of every file of the model and of what shapes the export."""
    settings: dict[str, object] = {"format": EXPORT_FORMAT, "precision": precision, "opset": OPSET,
                                   "torch": torch.__version__}
    if precision == "int8":
        import onnxruntime

        settings.update(onnxruntime=onnxruntime.__version__, reduce_range=not _has_vnni())
    return build_key(model_dir, settings)


def _export(model_dir: str, precision: Precision, target: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True).eval()
    features = model.preprocess(["an example sentence to trace", "another"])
    missing = [name for name in _INPUTS if name not in features]
    if missing:
        raise ValueError(
            f"{model_dir}: its tokenizer gives no {missing}; the ONNX runtimes here export BERT-style "
            "models (input_ids, attention_mask, token_type_ids). Use runtime='torch' for this model"
        )
    fp32 = target if precision == "fp32" else target.with_name("fp32.onnx")
    dynamic = {name: {0: "batch", 1: "tokens"} for name in _INPUTS} | {"sentence_embedding": {0: "batch"}}
    # The TorchScript exporter: the dynamo one would need onnxscript, one more package, for the same graph.
    # It warns about Python conditions on shapes and about indexing with negative indices; neither
    # changes this graph's vectors for any batch, as the tests check against torch's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index operator")
        torch.onnx.export(
            _SentenceEmbedding(model), tuple(features[name] for name in _INPUTS), str(fp32),
            input_names=list(_INPUTS), output_names=["sentence_embedding"], dynamic_axes=dynamic,
            opset_version=OPSET, dynamo=False,
        )
    if precision == "int8":
        _quantize(fp32, target)
        fp32.unlink()


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation, per output channel; 7-bit weights
    (``reduce_range``) on CPUs without VNNI, whose int8 products can
    otherwise saturate."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=not _has_vnni())


def _has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


class _SentenceEmbedding(torch.nn.Module):
    """The model's whole forward pass, from token tensors to sentence vectors."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids,
                    "modality": "text"}
        return self.model(features)["sentence_embedding"]
