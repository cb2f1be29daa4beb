"""The MinHash and LSH kernels: NeMo Curator's (cuDF's) hashing, the plain
definition, and detection against brute-force Jaccard (precision, recall, S-curve)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from scipy import sparse

from beam_curator.dedup.fuzzy import minhash
from beam_curator.dedup.fuzzy.lsh import band_keys, buckets, component_groups, detection_probability, path_edges
from beam_curator.dedup.fuzzy.minhash import (
    NGRAMS_PER_BLOCK,
    murmur3_32,
    murmur3_64,
    permutation_seeds,
    signature_loop,
    signatures,
)


def test_cudf_documented_minhash_values_are_reproduced() -> None:
    """cuDF's ``str.minhash(0, a=[1, 2, 3], b=[4, 5, 6], width=5)`` docstring example."""
    seeds = np.array([[1, 4], [2, 5], [3, 6]], np.uint32)
    assert signatures(["this is my", "favorite book"], seeds, 5, hash_seed=0).tolist() == [
        [1305480171, 462824409, 74608232], [32665388, 65330773, 97996158]]


def test_murmur3_matches_the_reference_values() -> None:
    """MurmurHash3 x86_32 and x64_128's first half (values of the reference C++, as mmh3 prints them)."""
    buffer = np.frombuffer(b"foohello" + bytes(24), np.uint8)
    assert murmur3_32(buffer, np.array([0]), 3, 0)[0] == 2**32 - 156908512
    assert murmur3_32(buffer, np.array([3]), 5, 0)[0] == 613153351
    assert murmur3_64(buffer, np.array([0]), 3, 0)[0] == 2**64 - 2129773440516405919
    assert murmur3_64(buffer, np.array([3]), 5, 0)[0] == 2**64 - 3758069500696749310


def test_seeds_are_nemo_curators_draws() -> None:
    seeds = permutation_seeds(260, 42)
    draws = np.random.RandomState(42)
    assert seeds.shape == (260, 2) and seeds.dtype == np.uint32
    assert seeds[0, 0] == draws.randint(1, (1 << 31) - 1, dtype=np.uint32)
    assert seeds[0, 1] == draws.randint(0, (1 << 31) - 1, dtype=np.uint32)
    assert permutation_seeds(4, 42, 64).dtype == np.uint64 and seeds[:, 0].min() >= 1
    with pytest.raises(ValueError, match="Unsupported bit width"):
        permutation_seeds(4, 42, 16)


def test_vectorised_signatures_equal_the_plain_loop() -> None:
    """Characters, not bytes (multi-byte UTF-8), texts shorter than the window,
    empty texts, and a text whose n-grams span several blocks."""
    rng = np.random.default_rng(0)
    alphabet = list("abcdefgh éß水🙂")
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 60))) for _ in range(40)]
    texts += ["", "short", "x" * 3, "".join(rng.choice(alphabet, NGRAMS_PER_BLOCK + 50))]
    seeds = permutation_seeds(16, 7)
    assert signatures(texts, seeds, 6).tolist() == [signature_loop(text, seeds, 6) for text in texts]
    assert signatures([], seeds, 6).shape == (0, 16)
    wide = signatures(texts, permutation_seeds(16, 7, 64), 6)
    assert wide.dtype == np.uint64 and (wide[texts.index("")] == 0).all()
    assert (wide[0] == signatures([texts[0]], permutation_seeds(16, 7, 64), 6)[0]).all()
    ending_empty = ["some text here", "", ""]  # the empty ones start where the buffer ends
    assert signatures(ending_empty, seeds, 6).tolist() == [signature_loop(text, seeds, 6) for text in ending_empty]


def test_signatures_hash_in_runs_of_bounded_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call holding many texts hashes them a run of about CHARS_PER_RUN
    characters at a time (a longer text alone), with the values of one run."""
    rng = np.random.default_rng(1)
    texts = ["".join(rng.choice(list("abcdefgh ij"), rng.integers(0, 40))) for _ in range(60)]
    texts[7] = "y" * 150  # longer than a run
    seeds = permutation_seeds(8, 3)
    whole = signatures(texts, seeds, 5)
    runs: list[int] = []
    original = minhash._run_signatures

    def counted(batch, *args):
        runs.append(sum(map(len, batch)))
        assert len(batch) == 1 or runs[-1] <= 100
        return original(batch, *args)

    monkeypatch.setattr(minhash, "CHARS_PER_RUN", 100)
    monkeypatch.setattr(minhash, "_run_signatures", counted)
    assert signatures(texts, seeds, 5).tolist() == whole.tolist()
    assert len(runs) > 5 and sum(runs) == sum(map(len, texts))


def test_buckets_edges_and_components() -> None:
    values = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7, 3, 4], [5, 5, 5, 5]], np.uint32)
    keys, _ = band_keys(values, range(2), 2)
    found, ids, offsets = buckets(keys, pa.array([13, 11, 12, 10] * 2))
    assert len(found) == 2 and ids.to_pylist() == [11, 13, 12, 13] and offsets.tolist() == [0, 2, 4]
    x, y = path_edges(pa.array([1, 2, 3, 7, 8]), np.array([0, 3, 5]))
    assert list(zip(x.to_pylist(), y.to_pylist())) == [(1, 2), (2, 3), (7, 8)]
    vertices, groups = component_groups(pa.array(["b", "d", "e"]), pa.array(["a", "c", "d"]))
    assert vertices.to_pylist() == ["a", "b", "c", "d", "e"] and groups.to_pylist() == ["a", "a", "c", "c", "c"]


def test_buckets_match_a_plain_grouping() -> None:
    """Every key shared by two or more records, in key order, its ids sorted
    (repeats kept); keys held by one record, and empty input, give nothing."""
    rng = np.random.default_rng(4)
    for rows in (0, 1, 7, 3000):
        values = rng.integers(0, 2, (rows, 26)).astype(np.uint32)  # 2^13 values per band: many shared
        keys, _ = band_keys(values, range(2), 13)
        ids = rng.integers(0, rows // 2 + 1, len(keys))
        found, grouped, offsets = buckets(keys, pa.array(ids))
        plain: dict[bytes, list[int]] = {}
        for key, doc in zip(keys.tolist(), ids.tolist()):
            plain.setdefault(key, []).append(doc)
        expected = sorted((key, sorted(docs)) for key, docs in plain.items() if len(docs) > 1)
        grouped = grouped.to_pylist()
        assert [(key, grouped[low:high]) for key, low, high in zip(found.tolist(), offsets[:-1], offsets[1:])] == expected
        assert offsets[-1] == len(grouped) and found.dtype == keys.dtype


def planted_pairs(count: int, length: int, max_edits: int, seed: int) -> tuple[list[str], list[str]]:
    """Random texts and copies with up to ``max_edits`` characters changed:
    Jaccard similarities spread from 1 down."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    originals, copies = [], []
    for _ in range(count):
        text = rng.choice(letters, length)
        changed = text.copy()
        edits = rng.integers(0, max_edits + 1)
        changed[rng.choice(length, edits, replace=False)] = rng.choice(letters, edits)
        originals.append("".join(text))
        copies.append("".join(changed))
    return originals, copies


def jaccard_matrix(texts: list[str], width: int) -> sparse.csr_matrix:
    """Brute force: every pair's Jaccard similarity of n-gram sets (sparse, non-zero pairs only)."""
    vocabulary: dict[str, int] = {}
    rows, columns = [], []
    for row, text in enumerate(texts):
        grams = {text[i:i + width] for i in range(max(len(text) - width + 1, 1))}
        columns += [vocabulary.setdefault(gram, len(vocabulary)) for gram in grams]
        rows += [row] * len(grams)
    shingles = sparse.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(len(texts), len(vocabulary)))
    common = (shingles @ shingles.T).tocoo()
    sizes = np.asarray(shingles.sum(axis=1)).ravel()
    values = common.data / (sizes[common.row] + sizes[common.col] - common.data)
    return sparse.triu(sparse.coo_matrix((values, (common.row, common.col)), shape=common.shape), k=1).tocsr()


def candidate_pairs(values: np.ndarray, bands: int, rows: int) -> set[tuple[int, int]]:
    keys, _ = band_keys(values, range(bands), rows)
    _, ids, offsets = buckets(keys, pa.array(np.tile(np.arange(len(values)), bands)))
    ids = ids.to_numpy()
    return {(int(a), int(b)) for low, high in zip(offsets[:-1], offsets[1:])
            for i, a in enumerate(ids[low:high]) for b in ids[low + i + 1:high] if a != b}


def test_precision_and_recall_against_brute_force_jaccard() -> None:
    """NeMo Curator's defaults (24-grams, 20 bands of 13) on 2,000 documents:
    candidate pairs against every pair's exact Jaccard similarity."""
    originals, copies = planted_pairs(1000, 1000, 8, seed=1)
    texts = originals + copies
    exact = jaccard_matrix(texts, 24)
    candidates = candidate_pairs(signatures(texts, permutation_seeds(260, 42), 24), 20, 13)
    similar = {pair for pair, value in exact.todok().items() if value >= 0.9}
    loose = {pair for pair, value in exact.todok().items() if value >= 0.7}
    assert len(similar) > 200
    recall = len(similar & candidates) / len(similar)
    precision = len(candidates & loose) / len(candidates)
    at = {pair for pair, value in exact.todok().items() if value >= 0.8}
    print(f"pairs J>=0.9: {len(similar)}, candidates: {len(candidates)}, recall(J>=0.9) {recall:.4f}, "
          f"precision(J>=0.7) {precision:.4f}, at 0.8: recall {len(at & candidates) / len(at):.4f} "
          f"precision {len(at & candidates) / len(candidates):.4f}")
    assert recall >= 0.99 and precision >= 0.98, (recall, precision)


def test_detection_rate_follows_the_s_curve() -> None:
    """Per Jaccard bin, the share of pairs sharing a bucket is within 0.07 of
    1 - (1 - s^r)^b (r = 3, b = 4 here, so that every bin is far from 0 and 1)."""
    originals, copies = planted_pairs(3000, 200, 40, seed=2)
    bands, rows = 4, 3
    seeds = permutation_seeds(bands * rows, 42)
    first, second = signatures(originals, seeds, 5), signatures(copies, seeds, 5)
    met = ((first == second).reshape(len(first), bands, rows).all(axis=2)).any(axis=1)
    similarity = np.array([jaccard_matrix([a, b], 5)[0, 1] for a, b in zip(originals, copies)])
    edges = np.linspace(0, 1, 11)
    checked = 0
    for low, high in zip(edges[:-1], edges[1:]):
        chosen = (similarity >= low) & (similarity < high)
        if chosen.sum() >= 100:
            expected = detection_probability(similarity[chosen], rows, bands).mean()
            print(f"J in [{low:.1f}, {high:.1f}): {chosen.sum()} pairs, detected {met[chosen].mean():.3f}, "
                  f"theory {expected:.3f}")
            assert abs(met[chosen].mean() - expected) < 0.07, (low, met[chosen].mean(), expected)
            checked += 1
    assert checked >= 5
