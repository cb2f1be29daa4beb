"""``FuzzyDedup``: MinHash LSH deduplication as a PTransform in a user's own pipeline.

The fuzzy workflow's kernels (``beam_curator.dedup.fuzzy``) on Beam's own
shuffles: signatures per batch of documents, their band keys grouped by key
(a bucket of two or more documents joins them all to its least id), the
connected components of those joins (``StarComponents``), and of each
component the least id kept, as the workflow keeps it. A removed document
carries the id it duplicates and the similarity of their signatures (the
share of equal MinHash values, an estimate of the Jaccard similarity of their
n-grams), which takes two more shuffles: one bringing the kept document's
signature to each member of its component, one bringing that to the member.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Iterator

import apache_beam as beam
import numpy as np

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.fuzzy.lsh import band_keys
from beam_curator.dedup.fuzzy.minhash import permutation_seeds, signatures
from beam_curator.transforms.batch_rows import RowsOfBatches, takes_tasks
from beam_curator.transforms.dedup_documents import (
    KEPT,
    REMOVED,
    DedupOutputs,
    check_field_names,
    check_input,
    field_of,
    kept_and_removed,
    removed_form,
    removed_type,
    split_by_tag,
    text_of,
)
from beam_curator.transforms.star_components import StarComponents

_NAME = "FuzzyDedup"
_SIGNED, _BANDS = "signed", "bands"


class FuzzyDedup(beam.PTransform):
    """Near-duplicate documents (MinHash of character n-grams, LSH, connected
    components), all but the least id of each group removed.

    Takes a bounded PCollection of dicts, schema'd ``beam.Row``s or
    ``DocumentBatch`` tasks (by row, see ``batch_rows``) with a unique
    ``id_field`` and a string ``text_field``. ``seed``, ``char_ngrams``,
    ``num_bands``, ``minhashes_per_band`` and ``use_64_bit_hash`` are NeMo
    Curator's (and the workflow's) settings, with their defaults;
    ``star_rounds`` is how many rounds connected components may take (each
    two shuffles of the joins). Gives ``.kept`` and ``.removed`` as
    ``ExactDedup`` does, ``similarity`` being the signatures' share of equal values.
    """

    def __init__(self, id_field: str = GENERATED_ID, text_field: str = "text", seed: int = 42,
                 char_ngrams: int = 24, num_bands: int = 20, minhashes_per_band: int = 13,
                 use_64_bit_hash: bool = False, star_rounds: int = 10) -> None:
        super().__init__()
        check_field_names(_NAME, id_field=id_field, text_field=text_field)
        for parameter, value in (("char_ngrams", char_ngrams), ("num_bands", num_bands),
                                 ("minhashes_per_band", minhashes_per_band)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{_NAME}: {parameter} must be a positive integer, not {value!r}")
        self.id_field = id_field
        self.text_field = text_field
        self.seeds = permutation_seeds(num_bands * minhashes_per_band, seed, 64 if use_64_bit_hash else 32)
        self.char_ngrams = char_ngrams
        self.num_bands = num_bands
        self.minhashes_per_band = minhashes_per_band
        self.components = StarComponents(star_rounds, _NAME)

    def expand(self, documents: beam.PCollection) -> DedupOutputs:
        check_input(documents, _NAME)
        if takes_tasks(documents):
            columns = {"id_field": self.id_field, "text_field": self.text_field}
            return documents | "ByRow" >> RowsOfBatches(copy.copy(self), columns, _NAME)
        signed = split_by_tag(documents
                              | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=1024)
                              | "Sign" >> beam.FlatMap(self._signed), [_SIGNED, _BANDS], "Take")
        joins = (signed[_BANDS]
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "JoinToLeast" >> beam.FlatMap(_joins_to_least))
        later = (joins
                 | "Components" >> self.components
                 | "LaterMembers" >> beam.Filter(lambda label: label[0] != label[1]))
        kept_signatures = (
            {"signed": signed[_SIGNED] | "SignaturesAlone" >> beam.MapTuple(lambda key, signed: (key, signed[1])),
             "members": later | "ByLeast" >> beam.Map(lambda label: (label[1], label[0]))}
            | "MeetKept" >> beam.CoGroupByKey()
            | "KeptSignatures" >> beam.FlatMap(_kept_signature_to_members)
        )
        tagged = (
            {"signed": signed[_SIGNED], "kept": kept_signatures}
            | "MeetDocuments" >> beam.CoGroupByKey()
            | "Split" >> beam.FlatMap(_split, self.id_field)
        )
        return kept_and_removed(tagged, documents.element_type, removed_type(documents.element_type, self.id_field))

    def _signed(self, batch: list[Any]) -> Iterator[Any]:
        """Each document keyed by its id with its signature, tagged ``signed``; each band key with the id, ``bands``."""
        texts, ids = [], []
        for document in batch:
            texts.append(text_of(document, self.text_field, _NAME))
            ids.append(field_of(document, self.id_field, "id_field", _NAME))
        values = signatures(texts, self.seeds, self.char_ngrams)
        keys, _ = band_keys(values, range(self.num_bands), self.minhashes_per_band)
        for row, (document, document_id) in enumerate(zip(batch, ids)):
            yield _SIGNED, (document_id, (document, values[row]))
            for band in range(self.num_bands):
                yield _BANDS, (keys[band * len(batch) + row].tobytes(), document_id)


def _joins_to_least(bucket: tuple[bytes, Iterable[Any]]) -> Iterator[tuple[Any, Any]]:
    """A bucket's documents joined to its least id: a star, which joins them
    as the workflow's path of sorted ids does."""
    _, ids = bucket
    least = min(ids)
    return ((least, other) for other in ids if other != least)


def _kept_signature_to_members(group: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[tuple[Any, Any]]:
    """A kept document's signature, keyed by each later member of its group."""
    least, sides = group
    for kept_signature in sides["signed"]:
        for member in sides["members"]:
            yield member, (least, kept_signature)


def _split(joined: tuple[Any, dict[str, Iterable[Any]]], id_field: str) -> Iterator[Any]:
    """A document, kept, or removed with its group's least id and their signatures' similarity."""
    document_id, sides = joined
    signed = list(sides["signed"])
    if len(signed) > 1:
        raise ValueError(f"{_NAME}: id_field {id_field!r} repeats the id {document_id!r}; ids must be unique")
    ((document, signature),) = signed
    kept = list(sides["kept"])  # one (least id, signature) for a later member of a group, none otherwise
    if not kept:
        yield KEPT, document
        return
    ((least, kept_signature),) = kept
    similarity = float(np.mean(np.asarray(signature) == np.asarray(kept_signature)))
    yield REMOVED, removed_form(document, least, similarity)
