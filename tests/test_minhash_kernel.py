"""The compiled (numba) MinHash kernel gives the numpy kernel's signatures bit
for bit: on random unicode texts, on real descriptions in 18 languages, and
where numba cannot be imported (the numpy fallback, in a process of its own)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from itertools import islice

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_curator.dedup.fuzzy.minhash import MERSENNE_61, murmur3_64, permutation_seeds, signatures
from shared_data import DEBIAN, MULTILINGUAL, shared_data

# Any code point UTF-8 encodes (not surrogates, which str.encode refuses), weighted towards ASCII and the
# 2-, 3- and 4-byte characters (é, 水, 🙂), with emoji of several code points (each code point a character).
pieces = st.characters(codec="utf-8") | st.sampled_from(["a", "b", " ", "é", "水", "🙂", "👍🏽", "🏳️‍🌈"])
texts = st.lists(st.lists(pieces, max_size=40).map("".join) | st.sampled_from(["", "x", "水", "🙂"]), max_size=8)


def assert_kernels_agree(batch: list[str], seeds: np.ndarray, width: int, hash_seed: int | None = None) -> None:
    compiled = signatures(batch, seeds, width, hash_seed, compiled=True)
    reference = signatures(batch, seeds, width, hash_seed, compiled=False)
    assert compiled.dtype == reference.dtype and compiled.shape == reference.shape
    differing = [text for text, mine, theirs in zip(batch, compiled, reference) if (mine != theirs).any()]
    assert not differing, differing


@settings(max_examples=300, deadline=None)
@given(batch=texts, width=st.integers(1, 30), permutations=st.integers(1, 40), bits=st.sampled_from([32, 64]),
       seed=st.integers(0, 2**32 - 1), hash_seed=st.none() | st.integers(0, 2**31 - 2))
def test_compiled_kernel_equals_numpy_on_random_texts(batch: list[str], width: int, permutations: int, bits: int,
                                                      seed: int, hash_seed: int | None) -> None:
    """Empty, one-character and shorter-than-the-window texts, every UTF-8 length, both hash widths."""
    assert_kernels_agree(batch, permutation_seeds(permutations, seed, bits), width, hash_seed)


def test_reduction_modulo_the_mersenne_prime_at_its_edges() -> None:
    """``h * a + b`` landing on 2^61 - 1 itself or on 2^64 - 1 (reduced to p + 7, over p): the
    subtraction random hashes almost never reach (64-bit ``a``, ``b`` make them exact)."""
    text = "short"  # shorter than the window: its one n-gram is the whole text
    h = int(murmur3_64(np.frombuffer(text.encode() + bytes(16), np.uint8), np.array([0]), len(text), 1)[0])
    p, wrap = int(MERSENNE_61), 1 << 64
    seeds = np.array([[1, (p - h) % wrap], [1, (wrap - 1 - h) % wrap], [1, (p - 1 - h) % wrap]], np.uint64)
    assert signatures([text], seeds, 8, compiled=True).tolist() == [[0, 7, p - 1]]
    assert_kernels_agree([text], seeds, 8)


def corpus(name: str, n: int, every: int = 1) -> list[str]:
    path = shared_data(name)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in islice(lines, 0, n * every, every)]


@pytest.mark.parametrize("bits", [32, 64])
def test_compiled_kernel_equals_numpy_on_real_texts(bits: int) -> None:
    """NeMo's defaults (260 permutations of 24-grams) on English Debian descriptions and on
    their translations (CJK, Cyrillic, accented Latin: one in 17 lines, so every language)."""
    english = corpus(DEBIAN, 300)
    translated = corpus(MULTILINGUAL, 300, every=17)
    assert_kernels_agree(english + translated, permutation_seeds(260, 42, bits), 24)
    assert_kernels_agree(translated, permutation_seeds(20, 3, bits), 5)


FALLBACK = """
import json, logging, sys
sys.modules["numba"] = None  # numba's import fails, as where it is not installed
logging.basicConfig(format="%(levelname)s %(name)s %(message)s")
from beam_curator.dedup.fuzzy.minhash import permutation_seeds, signatures
texts = json.loads(sys.argv[1])
found = [signatures(texts, permutation_seeds(16, 5, bits), 6).tolist() for bits in (32, 64)]
try:
    signatures(texts, permutation_seeds(16, 5), 6, compiled=True)
except ImportError:
    found.append("refused")
print(json.dumps(found))
"""


def test_without_numba_the_numpy_fallback_gives_the_same_signatures() -> None:
    """In a process where numba does not import: the same values, the slow path logged once."""
    batch = ["", "x", "short", "plain ascii text, long enough for several windows", "naïve café 水水水 🙂👍🏽 done"]
    done = subprocess.run([sys.executable, "-c", FALLBACK, json.dumps(batch)], capture_output=True, text=True,
                          timeout=60, check=True)
    expected = [signatures(batch, permutation_seeds(16, 5, bits), 6, compiled=True).tolist() for bits in (32, 64)]
    assert json.loads(done.stdout) == [*expected, "refused"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "numpy kernel" in warnings[0], done.stderr
