"""The MinHash signatures of :mod:`beam_curator.dedup.fuzzy.minhash`, compiled by numba.

The numpy kernel there builds arrays per n-gram and per (n-gram,
permutation) pair, so it runs at the speed of memory. Here one pass per
document walks its n-gram byte ranges, hashes each n-gram once, and folds
the hashes, eight at a time, into the running minimum of every permutation:
nothing is written but the signature row, and each permutation's ``(a, b)``
and minimum are loaded once per eight n-grams. The permutation loop is
what the CPU's vector units run (a 32-bit hash times a 31-bit ``a`` is one
32 x 32-bit multiply per lane); it takes about two thirds of the time at
260 permutations, hashing the rest. Values are bit for
bit the numpy kernel's (``tests/test_minhash_kernel.py``).

Numba types an operation mixing ``uint64`` with a signed integer as a
float, so every constant and shift count here is a ``uint64``. ``nogil``
lets the threads of a Beam worker hash at once; ``cache`` keeps the
machine code next to this file (or in numba's user cache where that is
not writable), so the many processes of a run (Beam workers, tests) load
it in about 0.3 s instead of compiling it again (2.5 s for both widths).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_U = np.uint64
MASK_32 = _U(0xFFFFFFFF)
MERSENNE_61 = _U((1 << 61) - 1)
_0, _8, _16 = _U(0), _U(8), _U(16)
HASHES_PER_FOLD = 8  # n-gram hashes per pass over the permutations: 4 and 16 measured no faster


@njit
def _le_word(buffer: np.ndarray, start: int, width: int) -> np.uint64:
    """The little-endian integer of the ``width`` (at most 8) bytes at ``start``."""
    word = _0
    for byte in range(width):
        word |= _U(buffer[start + byte]) << (_8 * _U(byte))
    return word


@njit
def _rotl(x: np.uint64, r: np.uint64, bits: np.uint64, mask: np.uint64) -> np.uint64:
    return ((x << r) | (x >> (bits - r))) & mask


@njit
def _murmur3_32(buffer: np.ndarray, start: int, end: int, seed: np.uint64) -> np.uint32:
    """MurmurHash3_x86_32 of ``buffer[start:end]``, in 64-bit registers cut to 32 bits."""
    c1, c2, bits = _U(0xCC9E2D51), _U(0x1B873593), _U(32)
    h = seed & MASK_32
    tail = start + (end - start) // 4 * 4
    for at in range(start, tail, 4):
        k = _rotl(_le_word(buffer, at, 4) * c1 & MASK_32, _U(15), bits, MASK_32) * c2 & MASK_32
        h = (_rotl(h ^ k, _U(13), bits, MASK_32) * _U(5) + _U(0xE6546B64)) & MASK_32
    if end > tail:
        h ^= _rotl(_le_word(buffer, tail, end - tail) * c1 & MASK_32, _U(15), bits, MASK_32) * c2 & MASK_32
    h ^= _U(end - start)
    h = (h ^ (h >> _16)) * _U(0x85EBCA6B) & MASK_32
    h = (h ^ (h >> _U(13))) * _U(0xC2B2AE35) & MASK_32
    return np.uint32(h ^ (h >> _16))


@njit
def _fmix64(k: np.uint64) -> np.uint64:
    k = (k ^ (k >> _U(33))) * _U(0xFF51AFD7ED558CCD)
    k = (k ^ (k >> _U(33))) * _U(0xC4CEB9FE1A85EC53)
    return k ^ (k >> _U(33))


@njit
def _murmur3_64(buffer: np.ndarray, start: int, end: int, seed: np.uint64) -> np.uint64:
    """The first 64 bits of MurmurHash3_x64_128 of ``buffer[start:end]`` (both halves seeded with ``seed``)."""
    c1, c2, bits, full = _U(0x87C37B91114253D5), _U(0x4CF5AD432745937F), _U(64), ~_0
    h1 = h2 = seed
    tail = start + (end - start) // 16 * 16
    for at in range(start, tail, 16):
        h1 ^= _rotl(_le_word(buffer, at, 8) * c1, _U(31), bits, full) * c2
        h1 = (_rotl(h1, _U(27), bits, full) + h2) * _U(5) + _U(0x52DCE729)
        h2 ^= _rotl(_le_word(buffer, at + 8, 8) * c2, _U(33), bits, full) * c1
        h2 = (_rotl(h2, _U(31), bits, full) + h1) * _U(5) + _U(0x38495AB5)
    rest = end - tail
    if rest > 8:
        h2 ^= _rotl(_le_word(buffer, tail + 8, rest - 8) * c2, _U(33), bits, full) * c1
    if rest:
        h1 ^= _rotl(_le_word(buffer, tail, min(rest, 8)) * c1, _U(31), bits, full) * c2
    h1 ^= _U(end - start)
    h2 ^= _U(end - start)
    h1 += h2
    h2 += h1
    return _fmix64(h1) + _fmix64(h2)


@njit
def _permuted(h: np.uint64, a: np.uint64, b: np.uint64) -> np.uint64:
    """``(h * a + b) mod (2^61 - 1)``, the product and sum wrapping modulo 2^64 as in
    the C++ (with a 32-bit ``h`` and 31-bit ``a``, ``b`` they never do)."""
    x = h * a + b
    x = (x & MERSENNE_61) + (x >> _U(61))
    return x - MERSENNE_61 if x >= MERSENNE_61 else x


@njit
def _fold(hashes: np.ndarray, a: np.ndarray, b: np.ndarray, row: np.ndarray) -> None:
    """Lower each permutation's minimum in ``row`` to the least permuted ``hashes``,
    cut to ``row``'s width (the cast keeps the low bits, as cuDF's cut to 32 bits)."""
    for j in range(row.size):
        aj, bj = _U(a[j]), _U(b[j])
        least = row[j]
        for i in range(HASHES_PER_FOLD):
            least = min(least, row.dtype.type(_permuted(_U(hashes[i]), aj, bj)))
        row[j] = least


@njit
def _next_char(buffer: np.ndarray, at: int, end: int) -> int:
    """The byte offset of the UTF-8 character after the one at ``at`` (``end`` if none)."""
    at += 1
    while at < end and (buffer[at] & 0xC0) == 0x80:  # a continuation byte
        at += 1
    return at


@njit(cache=True, nogil=True)
def signatures_into(buffer: np.ndarray, text_ends: np.ndarray, width: int, hash_seed: np.uint64,
                    a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Write into ``out[d]`` the signature of the UTF-8 text ``buffer[text_ends[d-1]:text_ends[d]]``:
    32-bit hashes where ``out`` is ``uint32``, 64-bit where it is ``uint64``.

    The n-gram window is two byte offsets moved one character at a time; a
    text no longer than ``width`` characters is one n-gram, an empty one
    gets zeros."""
    wide = out.itemsize == 8
    hashes = np.empty(HASHES_PER_FOLD, out.dtype)
    start = 0
    for document in range(len(text_ends)):
        end_of_text = text_ends[document]
        row = out[document]
        if start == end_of_text:
            row[:] = 0
            continue
        row[:] = row.dtype.type(-1)  # all ones: above any value
        end = start
        for _ in range(width):
            end = _next_char(buffer, end, end_of_text)
            if end == end_of_text:
                break
        held = 0
        while True:
            if wide:
                hashes[held] = _murmur3_64(buffer, start, end, hash_seed)
            else:
                hashes[held] = _murmur3_32(buffer, start, end, hash_seed)
            held += 1
            if end == end_of_text:
                hashes[held:] = hashes[0]  # repeats change no minimum
                _fold(hashes, a, b, row)
                break
            if held == HASHES_PER_FOLD:
                _fold(hashes, a, b, row)
                held = 0
            start = _next_char(buffer, start, end_of_text)
            end = _next_char(buffer, end, end_of_text)
        start = end_of_text
