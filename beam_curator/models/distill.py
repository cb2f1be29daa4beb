"""Static models (model2vec): a sentence-transformers model distilled into one vector per token.

On a CPU a transformer embeds tens of documents a second (all-MiniLM-L6-v2:
about 63 on the 2-core machine of BENCHMARKS.md), so semantic dedup of a
real corpus is bound by embedding. A static model embeds a text as the mean
of precomputed token vectors: tens of thousands of documents a second, at a
recall against the full model that BENCHMARKS.md (``bench_static.py``)
reports. Distillation runs the full model once over its vocabulary and
reduces the vectors with PCA (``pca_dims``, 256 by default).

A static model is a folder model2vec wrote (its ``config.json`` says
``"model_type": "model2vec"``). Any other model is distilled on first use
into ``~/.cache/beam_curator/static``, in a folder keyed by the digest of
the source model's files and of the settings, verified before each reuse
(see :mod:`beam_curator.models.model_cache`): a changed source model is
distilled again, a damaged folder rebuilt. ``beam-curator distill`` does
the same ahead of time.

This module imports neither Beam nor torch (model2vec loads torch only to
distil), so a workflow can find its static model in the driver at once.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from beam_curator.logs import model_loading
from beam_curator.models.model_cache import build_key, cached_build, default_cache
from beam_curator.models.resolve import DEFAULT_MODEL, resolve_model

DEFAULT_PCA_DIMS = 256
DISTILL_FORMAT = 1  # bump when distillation here changes, so that old cached models are not reused


def is_static_model(folder: str | Path) -> bool:
    """True for a folder holding a model2vec static model."""
    try:
        return json.loads((Path(folder) / "config.json").read_text()).get("model_type") == "model2vec"
    except (OSError, ValueError, AttributeError):
        return False


def distill_static_model(
    model_identifier: str = DEFAULT_MODEL,
    output: str | Path | None = None,
    pca_dims: int | None = DEFAULT_PCA_DIMS,
    *,
    model_cache_dir: str | None = None,
    cache_dir: str | Path | None = None,
) -> Path:
    """The folder of ``model_identifier`` distilled into a static model, offline.

    Args:
        model_identifier: a sentence-transformers model name or folder,
            found locally (:func:`~beam_curator.models.resolve.resolve_model`).
        output: the folder to write it to; by default a folder in
            ``cache_dir`` named by the source model and settings. Either way
            a verified folder from an earlier call with the same source and
            settings is returned at once.
        pca_dims: dimensions kept by PCA; ``None`` keeps the model's own.
        model_cache_dir: extra place to find the source model.
        cache_dir: where distilled models are cached (default
            ``~/.cache/beam_curator/static``).

    Raises:
        ValueError: ``pca_dims`` is not a positive integer, or the source is
            already a static model.
    """
    if pca_dims is not None and (isinstance(pca_dims, bool) or not isinstance(pca_dims, int) or pca_dims < 1):
        raise ValueError(f"pca_dims must be a positive integer (or None: the model's own dimensions), got {pca_dims!r}")
    source = resolve_model(model_identifier, model_cache_dir)
    if is_static_model(source):
        raise ValueError(f"{source} is already a static model; use it as it is, there is nothing to distil")
    settings = {"format": DISTILL_FORMAT, "pca_dims": pca_dims, "model2vec": version("model2vec")}
    key = build_key(source, settings)
    folder = Path(output) if output is not None else \
        Path(cache_dir or default_cache("static")).expanduser() / f"{Path(model_identifier).name}-{pca_dims}-{key[:24]}"

    def distill(target: Path) -> dict[str, object]:
        from model2vec.distill import distill as model2vec_distill

        with model_loading():
            model2vec_distill(source, pca_dims=pca_dims).save_pretrained(target)
        return {"source": source, **settings}

    return cached_build(folder.expanduser(), key, distill)


def static_model_folder(model_identifier: str, model_cache_dir: str | None = None,
                        cache_dir: str | Path | None = None) -> Path:
    """``model_identifier``'s folder when it is a static model, else its
    distillation at the default settings (cached, see :func:`distill_static_model`)."""
    source = resolve_model(model_identifier, model_cache_dir)
    if is_static_model(source):
        return Path(source)
    return distill_static_model(model_identifier, model_cache_dir=model_cache_dir, cache_dir=cache_dir)


# The precision a static model's token vectors are pooled in, whatever its files store: model2vec keeps
# distilled tables as float16, and pooling float16 costs a third of the time of encoding the Debian corpus
# (11.6 against 8.1-8.9 s for 63,905 texts); pooled in float32 each vector is also closer to the exact mean
# (cosine >= 0.9998 to the float16 one).
TABLE_DTYPE = "float32"


def static_model_key(folder: str | Path) -> str:
    """Digest of a static model's files and of how they are pooled: what its vectors depend on, for checkpoints."""
    return build_key(folder, {"table_dtype": TABLE_DTYPE})
