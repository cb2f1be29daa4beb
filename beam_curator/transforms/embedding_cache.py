"""The embedding cache of ``SemanticDedup``: a rerun embeds only the texts it
has not embedded before.

Each vector is kept by the SHA-256 of its text, under a key that names what
made it (``vector_identity`` of the package's handlers: the model's files and
the handler's settings; or the user's ``cache_key``). The cache is a folder
``<cache_path>/<key prefix>/`` of parquet files (``text_digest``,
``embedding``), each written whole or not at all, every few hundred vectors
or few seconds, so that a killed pipeline keeps what it embedded before the kill. Each file
holds the whole key in its metadata and is read only if it says the same: a
file of another key, or one that does not read, is skipped with a warning, and
its texts are embedded again. Texts that are equal are embedded once.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam
import fsspec
import numpy as np
import pyarrow as pa

from beam_curator.stages.io.parquet import read_parquet, write_table
from beam_curator.transforms.dedup_documents import split_by_tag
from beam_curator.writing import write_atomically

logger = logging.getLogger(__name__)

KEY_METADATA = b"beam_curator.vector_identity"
DIGEST, VECTOR = "text_digest", "embedding"
# What a kill can lose: at most this many vectors, or this many seconds of a bundle's embedding (a bundle
# of fewer vectors, as when the local runner splits a small input between its threads, is otherwise
# written only at its end).
FLUSH_ROWS = 256
FLUSH_SECONDS = 5.0
_HIT, _MISS = "hit", "miss"


def cache_folder(cache_path: str, key: str) -> str:
    return f"{cache_path.rstrip('/')}/{key[:32]}"


class EmbedWithCache(beam.PTransform):
    """``(id, text)`` pairs in, ``(id, vector)`` out: vectors the cache folder
    holds for a text's digest, the others made by ``handler`` through
    RunInference and added to the cache."""

    def __init__(self, handler: Any, folder: str, key: str) -> None:
        super().__init__()
        self.handler, self.folder, self.key = handler, folder, key

    def expand(self, texts: beam.PCollection) -> beam.PCollection:
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference  # imports torch

        cached = (
            texts.pipeline
            | "CacheFolder" >> beam.Create([self.folder])
            | "CacheFiles" >> beam.FlatMap(_cache_files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadCache" >> beam.FlatMap(_cached_vectors, self.key)
        )
        digested = texts | "Digest" >> beam.MapTuple(lambda key, text: (_digest(text), (key, text)))
        met = split_by_tag({"texts": digested, "cached": cached} | "MeetCache" >> beam.CoGroupByKey()
                           | "HitOrMiss" >> beam.FlatMap(_hit_or_miss), [_HIT, _MISS], "Cache")
        embedded = (
            met[_MISS]
            | "Embed" >> RunInference(KeyedModelHandler(self.handler))
            | "AddToCache" >> beam.ParDo(_AddToCache(self.folder, self.key))
        )
        return (met[_HIT], embedded) | "Vectors" >> beam.Flatten()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cache_files(folder: str) -> list[str]:
    """The folder's finished cache files (a write in progress is a dotfile)."""
    fs, path = fsspec.core.url_to_fs(folder)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    prefix = "" if protocol in ("file", "local") else f"{protocol}://"
    return sorted(prefix + name for name in fs.glob(f"{path}/part-*.parquet"))


def _cached_vectors(url: str, key: str) -> Iterator[tuple[str, np.ndarray]]:
    """``(digest, vector)`` of each row of one cache file made under ``key``."""
    try:
        table = read_parquet(url)
        recorded = (table.schema.metadata or {}).get(KEY_METADATA)
        if recorded != key.encode():
            raise ValueError("it was made by another model or other settings")
        vectors = np.asarray(table.column(VECTOR).combine_chunks().flatten(), dtype=np.float32)
        digests = table.column(DIGEST).to_pylist()
        vectors = vectors.reshape(len(digests), -1) if digests else vectors
    except Exception as error:  # noqa: BLE001 - any unreadable file only costs its texts' embedding again
        logger.warning("embedding cache file %s skipped (%s): its texts are embedded again", url, error)
        return
    yield from zip(digests, vectors)


def _hit_or_miss(group: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[tuple[str, Any]]:
    """The documents of one text: each with the cached vector (``hit``), or
    the text once with every id that holds it (``miss``)."""
    digest, sides = group
    documents, vectors = list(sides["texts"]), list(sides["cached"])
    if vectors:
        for key, _ in documents:
            yield _HIT, (key, vectors[0])
    elif documents:
        yield _MISS, ((digest, tuple(key for key, _ in documents)), documents[0][1])


class _AddToCache(beam.DoFn):
    """Each new vector to every id of its text, and, every ``FLUSH_ROWS``
    vectors or ``FLUSH_SECONDS`` and at the end of a bundle, to a new cache file."""

    def __init__(self, folder: str, key: str) -> None:
        self.folder, self.key = folder, key

    def start_bundle(self) -> None:
        self.rows: list[tuple[str, np.ndarray]] = []
        self.flushed = time.monotonic()

    def process(self, embedded: tuple[tuple[str, tuple], Any]) -> Iterator[tuple[Any, np.ndarray]]:
        (digest, keys), result = embedded
        vector = np.asarray(getattr(result, "inference", result), dtype=np.float32)
        self.rows.append((digest, vector))
        if len(self.rows) >= FLUSH_ROWS or time.monotonic() - self.flushed >= FLUSH_SECONDS:
            self._flush()
        for key in keys:
            yield key, vector

    def finish_bundle(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        digests, vectors = zip(*self.rows)
        self.rows, self.flushed = [], time.monotonic()
        if len({vector.shape for vector in vectors}) > 1 or vectors[0].ndim != 1:
            return  # not one vector of one length per text: the transform's own check names the document
        matrix = np.stack(vectors)
        table = pa.table({
            DIGEST: pa.array(digests, pa.string()),
            VECTOR: pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), matrix.shape[1]),
        }).replace_schema_metadata({KEY_METADATA: self.key.encode()})
        write_atomically(f"{self.folder}/part-{uuid.uuid4().hex}.parquet", lambda handle: write_table(table, handle))
