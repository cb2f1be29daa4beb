"""``FuzzyDedup``: MinHash LSH deduplication as a PTransform in a user's own pipeline.

The fuzzy workflow's kernels (``beam_curator.dedup.fuzzy``) on Beam's own
shuffles: signatures per batch of documents, their band keys grouped by key
(a bucket of two or more documents joins them all to its least id), the
connected components of those joins (``StarComponents``), and of each
component the least id kept, as the workflow keeps it. A removed document
carries the id it duplicates and the similarity of their signatures (the
share of equal MinHash values, an estimate of the Jaccard similarity of their
n-grams), and, since components chain (``a ~ b ~ c`` keeps ``a`` and removes
``c`` however little ``c`` shares with ``a``), the member it matched: the
one whose signature is most like its own (``dedup.fuzzy.closest``). That
takes three more shuffles: the signatures meet their component labels, each
component's signatures are grouped on one worker, and each member's removal
meets its document. The signatures are carried from the first step rather
than the texts hashed again (a signature is ``num_bands * minhashes_per_band``
numbers, a few hundred bytes, where a text may be many kilobytes); a worker
holds one component's signatures and compares each pair of its members, so
a component of ``k`` members costs ``k * k`` signature comparisons.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Iterator

import apache_beam as beam
import numpy as np

from beam_curator.dedup import GENERATED_ID
from beam_curator.dedup.fuzzy.closest import closest_members
from beam_curator.dedup.fuzzy.lsh import band_keys
from beam_curator.dedup.fuzzy.minhash import permutation_seeds, signatures
from beam_curator.errors import check_on_bad_record
from beam_curator.transforms.batch_rows import RowsOfBatches, takes_tasks
from beam_curator.transforms.dedup_documents import (
    KEPT,
    REMOVED,
    DedupOutputs,
    ScreenDocuments,
    check_field_names,
    check_id_and_text,
    check_input,
    field_of,
    kept_and_removed,
    removed_form,
    removed_type,
    split_by_tag,
    text_of,
)
from beam_curator.transforms.dedup_progress import progress_settings, unwatched, watched
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
    ``ExactDedup`` does, ``similarity`` being the signatures' share of equal
    values, ``matched_id`` the member of its group whose signature is most
    like its own (kept or not), and ``matched_similarity`` their share.
    ``on_bad_record`` screens documents, and ``progress`` and
    ``progress_folder`` show its counts, as ``ExactDedup``'s do.
    """

    def __init__(self, id_field: str = GENERATED_ID, text_field: str = "text", seed: int = 42,
                 char_ngrams: int = 24, num_bands: int = 20, minhashes_per_band: int = 13,
                 use_64_bit_hash: bool = False, star_rounds: int = 10, on_bad_record: str = "raise",
                 progress: bool | None = None, progress_folder: str | None = None) -> None:
        super().__init__()
        self.progress, self.progress_folder = progress_settings(_NAME, progress, progress_folder)
        check_field_names(_NAME, id_field=id_field, text_field=text_field)
        check_on_bad_record(on_bad_record, _NAME)
        self.on_bad_record = on_bad_record
        self._check = functools.partial(check_id_and_text, id_field=id_field, text_field=text_field, transform=_NAME)
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
            return watched(self, documents, documents | "ByRow" >> RowsOfBatches(unwatched(self), columns, _NAME))
        signed = split_by_tag(documents
                              | "ScreenDocuments" >> beam.ParDo(ScreenDocuments(_NAME, self.on_bad_record, self._check))
                              | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=1024)
                              | "Sign" >> beam.FlatMap(self._signed), [_SIGNED, _BANDS], "Take")
        joins = (signed[_BANDS]
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "JoinToLeast" >> beam.FlatMap(_joins_to_least))
        removals = (
            {"signed": signed[_SIGNED] | "SignaturesAlone" >> beam.MapTuple(lambda key, signed: (key, signed[1])),
             "label": joins | "Components" >> self.components}
            | "MeetLabels" >> beam.CoGroupByKey()
            | "ByComponent" >> beam.FlatMap(_signature_by_component)
            | "GroupComponents" >> beam.GroupByKey()
            | "Removals" >> beam.FlatMap(_removals_of_component)
        )
        tagged = (
            {"signed": signed[_SIGNED], "removal": removals}
            | "MeetDocuments" >> beam.CoGroupByKey()
            | "Split" >> beam.FlatMap(_split, self.id_field)
        )
        return watched(self, documents, kept_and_removed(tagged, documents.element_type,
                                                         removed_type(documents.element_type, self.id_field)))

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


def _signature_by_component(joined: tuple[Any, dict[str, Iterable[Any]]]) -> Iterator[tuple[Any, Any]]:
    """A grouped document's ``(id, signature)``, keyed by its component's least id."""
    document_id, sides = joined
    for least in sides["label"]:
        for signature in sides["signed"]:
            yield least, (document_id, signature)


def _removals_of_component(component: tuple[Any, Iterable[tuple[Any, np.ndarray]]]) -> Iterator[tuple[Any, tuple]]:
    """``(id, removal)`` of each member of a component but its least id: the
    least id and their signatures' share of equal values, and the member its
    signature is most like and theirs (ties to the lesser id)."""
    least, members = component
    members = sorted(members, key=lambda member: member[0])
    ids = [member_id for member_id, _ in members]
    stacked = np.stack([np.asarray(signature) for _, signature in members])
    closest, shares = closest_members(stacked)
    kept = stacked[ids.index(least)]
    for row, member_id in enumerate(ids):
        if member_id != least:
            similarity = float(np.mean(stacked[row] == kept))
            yield member_id, (least, similarity, ids[closest[row]], float(shares[row]))


def _split(joined: tuple[Any, dict[str, Iterable[Any]]], id_field: str) -> Iterator[Any]:
    """A document, kept, or removed with its removal (``dedup_documents.REMOVAL_FIELDS``)."""
    document_id, sides = joined
    signed = list(sides["signed"])
    if len(signed) > 1:
        raise ValueError(f"{_NAME}: id_field {id_field!r} repeats the id {document_id!r}; ids must be unique")
    ((document, _),) = signed
    removal = list(sides["removal"])  # one for a later member of a group, none otherwise
    if not removal:
        yield KEPT, document
        return
    yield REMOVED, removed_form(document, removal[0])
