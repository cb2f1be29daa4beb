"""MinHash signatures of character n-grams, as NeMo Curator computes them on GPU.

NeMo Curator calls cuDF's ``str.minhash`` (``minhash64`` with
``use_64_bit_hash``): every window of ``char_ngrams`` characters (UTF-8
characters, not bytes; a text shorter than the window is one n-gram) is
hashed with MurmurHash3 (x86_32, or the first half of x64_128) seeded with
the first permutation's ``a``, and permutation ``i`` maps a hash ``h`` to
``((h * a_i + b_i) mod (2^61 - 1))`` cut to the hash width; a document's
signature holds, per permutation, the least value over its n-grams. The
``a_i, b_i`` are NeMo's draws from ``numpy.random.RandomState(seed)``.
Empty texts get an all-zero signature, as cuDF gives them.

Texts are hashed in runs of about ``CHARS_PER_RUN`` characters, their UTF-8
bytes laid end to end, so a call's memory stays bounded however many texts
it gets (the fuzzy workflow passes a whole input file). Two kernels hash a
run, with equal values:

- the compiled one (:mod:`.minhash_compiled`, numba), some 9 times faster,
  whenever numba imports;
- the numpy one here, the fallback and the reference the compiled one is
  tested against: n-grams are byte ranges into the run's buffer,
  MurmurHash runs as numpy operations over all n-grams of one byte length
  together, and the permutations over blocks of n-grams, so Python does
  work per block, never per document or n-gram; its arrays take about 70
  bytes per character of the run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np

logger = logging.getLogger(__name__)

MERSENNE_61 = np.uint64((1 << 61) - 1)
_SEED_PRIMES = {32: (1 << 31) - 1, 64: (1 << 61) - 1}
NGRAMS_PER_BLOCK = 512  # rows of the (n-grams x permutations) block: small enough to stay in cache
CHARS_PER_RUN = 1 << 20  # characters hashed at once (a text longer than this is a run of its own)


def permutation_seeds(num_hashes: int, seed: int, bit_width: int = 32) -> np.ndarray:
    """NeMo Curator's ``(a, b)`` per permutation: ``a`` drawn from ``[1, p)``,
    then ``b`` from ``[0, p)``, alternately, ``p`` = 2^31 - 1 (32-bit) or 2^61 - 1."""
    if bit_width not in _SEED_PRIMES:
        raise ValueError("Unsupported bit width. Use either 32 or 64.")
    dtype = np.uint32 if bit_width == 32 else np.uint64
    prime = _SEED_PRIMES[bit_width]
    draws = np.random.RandomState(seed)
    pairs = [(draws.randint(1, prime, dtype=dtype), draws.randint(0, prime, dtype=dtype)) for _ in range(num_hashes)]
    return np.array(pairs, dtype=dtype).reshape(num_hashes, 2)


def _rotl(x: np.ndarray, r: int, bits: int) -> np.ndarray:
    return (x << x.dtype.type(r)) | (x >> x.dtype.type(bits - r))


def _le_words(buffer: np.ndarray, starts: np.ndarray, width: int, dtype: type) -> np.ndarray:
    """The little-endian integers of ``width`` bytes at each start."""
    word = np.zeros(len(starts), dtype)
    for byte in range(width):
        word |= buffer[starts + byte].astype(dtype) << dtype(8 * byte)
    return word


def murmur3_32(buffer: np.ndarray, starts: np.ndarray, length: int, seed: int) -> np.ndarray:
    """MurmurHash3_x86_32 of the ``length`` bytes at each start of ``buffer``."""
    u = np.uint32
    c1, c2 = u(0xCC9E2D51), u(0x1B873593)
    h = np.full(len(starts), seed, u)
    blocks = length // 4
    for block in range(blocks):
        k = _le_words(buffer, starts + 4 * block, 4, u) * c1
        h ^= _rotl(k, 15, 32) * c2
        h = _rotl(h, 13, 32) * u(5) + u(0xE6546B64)
    if length % 4:
        k = _le_words(buffer, starts + 4 * blocks, length % 4, u) * c1
        h ^= _rotl(k, 15, 32) * c2
    h ^= u(length)
    h ^= h >> u(16)
    h *= u(0x85EBCA6B)
    h ^= h >> u(13)
    h *= u(0xC2B2AE35)
    return h ^ (h >> u(16))


def _fmix64(k: np.ndarray) -> np.ndarray:
    u = np.uint64
    k ^= k >> u(33)
    k *= u(0xFF51AFD7ED558CCD)
    k ^= k >> u(33)
    k *= u(0xC4CEB9FE1A85EC53)
    return k ^ (k >> u(33))


def murmur3_64(buffer: np.ndarray, starts: np.ndarray, length: int, seed: int) -> np.ndarray:
    """The first 64 bits of MurmurHash3_x64_128 (both halves seeded with ``seed``)."""
    u = np.uint64
    c1, c2 = u(0x87C37B91114253D5), u(0x4CF5AD432745937F)
    h1 = np.full(len(starts), seed, u)
    h2 = h1.copy()
    blocks = length // 16
    for block in range(blocks):
        k1 = _le_words(buffer, starts + 16 * block, 8, u)
        k2 = _le_words(buffer, starts + 16 * block + 8, 8, u)
        h1 ^= _rotl(k1 * c1, 31, 64) * c2
        h1 = (_rotl(h1, 27, 64) + h2) * u(5) + u(0x52DCE729)
        h2 ^= _rotl(k2 * c2, 33, 64) * c1
        h2 = (_rotl(h2, 31, 64) + h1) * u(5) + u(0x38495AB5)
    tail, rest = starts + 16 * blocks, length % 16
    if rest > 8:
        h2 ^= _rotl(_le_words(buffer, tail + 8, rest - 8, u) * c2, 33, 64) * c1
    if rest:
        h1 ^= _rotl(_le_words(buffer, tail, min(rest, 8), u) * c1, 31, 64) * c2
    h1 ^= u(length)
    h2 ^= u(length)
    h1 += h2
    h2 += h1
    h1, h2 = _fmix64(h1), _fmix64(h2)
    return h1 + h2


def ngram_ranges(texts: list[str], width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 buffer of all texts and each n-gram's ``(start, end, document)``:
    one n-gram per character position that has ``width`` characters from it
    to its text's end, or the whole text when it is shorter."""
    encoded = [text.encode("utf-8") for text in texts]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    buffer = np.frombuffer(b"".join(encoded) + b"\0" * 16, np.uint8)  # padding: reads past a word stay inside
    ends_of_texts = np.cumsum(lengths)
    starts_of_texts = ends_of_texts - lengths
    total = int(ends_of_texts[-1]) if len(texts) else 0
    is_char = (buffer[:total] & 0xC0) != 0x80  # not a UTF-8 continuation byte
    char_at = np.flatnonzero(is_char)  # byte offset of every character, texts end to end
    padded = np.append(is_char, False)  # an empty last text starts one past the end (masked below, as all empty ones)
    chars_per_text = np.add.reduceat(padded, starts_of_texts) if total else np.zeros(len(texts), np.int64)
    chars_per_text = np.where(lengths > 0, chars_per_text, 0)
    first_char = np.cumsum(chars_per_text) - chars_per_text
    grams = np.where(chars_per_text > 0, np.maximum(chars_per_text - width + 1, 1), 0)
    document = np.repeat(np.arange(len(texts)), grams)
    position = np.arange(len(document)) - np.repeat(np.cumsum(grams) - grams, grams) + first_char[document]
    starts = char_at[position]
    last = position + width  # the character after the n-gram, if still in its text
    in_text = last < (first_char + chars_per_text)[document]
    ends = np.where(in_text, char_at[np.minimum(last, len(char_at) - 1)], ends_of_texts[document])
    return buffer, starts, ends, document


def signatures(texts: list[str], seeds: np.ndarray, width: int, hash_seed: int | None = None, *,
               compiled: bool | None = None) -> np.ndarray:
    """``(len(texts), len(seeds))`` MinHash signatures (uint32 or uint64 as ``seeds``);
    n-grams are hashed with ``hash_seed``, by default the first ``a`` (NeMo's choice).

    ``compiled``: the numba kernel (True; ImportError without numba), the
    numpy one (False), or numba's where it imports (None: the fallback is
    logged once, as it is some 9 times slower)."""
    kernel = None if compiled is False else _compiled_kernel()
    if kernel is None and compiled:
        raise ImportError("the compiled MinHash kernel needs numba")
    result = np.empty((len(texts), len(seeds)), np.uint64 if seeds.dtype == np.uint64 else np.uint32)
    ends = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)))
    low = 0
    while low < len(texts):
        before = int(ends[low - 1]) if low else 0
        high = max(low + 1, int(np.searchsorted(ends, before + CHARS_PER_RUN, "right")))
        result[low:high] = _run_signatures(texts[low:high], seeds, width, hash_seed, kernel)
        low = high
    return result


@functools.cache
def _compiled_kernel() -> Callable[..., None] | None:
    """numba's kernel, or None where numba does not import (logged once per process)."""
    try:
        from beam_curator.dedup.fuzzy.minhash_compiled import signatures_into
    except ImportError as error:
        logger.warning("MinHash signatures use the numpy kernel, some 9 times slower than the compiled one: %s", error)
        return None
    return signatures_into


def _run_signatures(texts: list[str], seeds: np.ndarray, width: int, hash_seed: int | None,
                    kernel: Callable[..., None] | None) -> np.ndarray:
    """The signatures of one run of texts, by the compiled ``kernel`` or, if None, numpy."""
    if kernel is None:
        return _vectorised_run(texts, seeds, width, hash_seed)
    out_type = np.uint64 if seeds.dtype == np.uint64 else np.uint32
    encoded = [text.encode("utf-8") for text in texts]
    buffer = np.frombuffer(b"".join(encoded), np.uint8)
    ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
    a, b = (np.ascontiguousarray(seeds[:, column], out_type) for column in (0, 1))
    result = np.empty((len(texts), len(seeds)), out_type)
    kernel(buffer, ends, width, np.uint64(seeds[0, 0] if hash_seed is None else hash_seed), a, b, result)
    return result


def _vectorised_run(texts: list[str], seeds: np.ndarray, width: int, hash_seed: int | None) -> np.ndarray:
    """The signatures of one run of texts, all at once, in numpy."""
    wide = seeds.dtype == np.uint64
    hash_function, out_type = (murmur3_64, np.uint64) if wide else (murmur3_32, np.uint32)
    buffer, starts, ends, document = ngram_ranges(texts, width)
    hashes = np.empty(len(starts), out_type)
    lengths = ends - starts
    for length in np.unique(lengths):
        chosen = lengths == length
        hashes[chosen] = hash_function(buffer, starts[chosen], int(length), int(seeds[0, 0] if hash_seed is None else hash_seed))
    a, b = seeds[:, 0].astype(np.uint64), seeds[:, 1].astype(np.uint64)
    cut = np.uint64(np.iinfo(out_type).max)
    result = np.full((len(texts), len(seeds)), np.iinfo(out_type).max, out_type)
    result[np.bincount(document, minlength=len(texts)) == 0] = 0  # empty texts
    block = np.empty((NGRAMS_PER_BLOCK, len(seeds)), np.uint64)
    carry = np.empty_like(block)
    for low in range(0, len(hashes), NGRAMS_PER_BLOCK):
        rows = slice(low, low + NGRAMS_PER_BLOCK)
        size = len(hashes[rows])
        mixed, high = block[:size], carry[:size]
        np.multiply(hashes[rows, None].astype(np.uint64), a, out=mixed)  # wraps modulo 2^64, as the C++ does for 64-bit
        mixed += b
        np.right_shift(mixed, np.uint64(61), out=high)  # x mod (2^61 - 1) = (x & p) + (x >> 61), less p once if over
        mixed &= MERSENNE_61
        mixed += high
        np.subtract(mixed, MERSENNE_61, out=mixed, where=mixed >= MERSENNE_61)
        mixed &= cut
        owners = document[rows]
        segment = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        docs = owners[segment]
        result[docs] = np.minimum(result[docs], np.minimum.reduceat(mixed, segment, axis=0).astype(out_type))
    return result


def signature_loop(text: str, seeds: np.ndarray, width: int) -> list[int]:
    """The same signature one n-gram and one permutation at a time, in plain
    Python (32-bit): the definition the kernels are checked and benchmarked
    against."""
    mask = 0xFFFFFFFF

    def murmur(data: bytes, seed: int) -> int:
        h = seed
        for start in range(0, len(data) - len(data) % 4, 4):
            k = (int.from_bytes(data[start:start + 4], "little") * 0xCC9E2D51) & mask
            k = (((k << 15) | (k >> 17)) & mask) * 0x1B873593 & mask
            h ^= k
            h = ((((h << 13) | (h >> 19)) & mask) * 5 + 0xE6546B64) & mask
        if len(data) % 4:
            k = (int.from_bytes(data[len(data) - len(data) % 4:], "little") * 0xCC9E2D51) & mask
            h ^= (((k << 15) | (k >> 17)) & mask) * 0x1B873593 & mask
        h ^= len(data)
        h = ((h ^ (h >> 16)) * 0x85EBCA6B) & mask
        h = ((h ^ (h >> 13)) * 0xC2B2AE35) & mask
        return h ^ (h >> 16)

    if not text:
        return [0] * len(seeds)
    grams = [text[i:i + width] for i in range(max(len(text) - width + 1, 1))]
    hashes = [murmur(gram.encode("utf-8"), int(seeds[0, 0])) for gram in grams]
    prime = (1 << 61) - 1
    return [min(((h * int(a) + int(b)) % prime) & mask for h in hashes) for a, b in seeds]
