"""The member of a fuzzy group each member is most similar to, by its MinHash signature.

Connected components chain: ``a ~ b ~ c`` puts ``a`` and ``c`` in one group
though they may share few n-grams, so the group's kept document is not
always the one a removed document matched. This kernel names, for each
member, the other member whose signature has the largest share of equal
values (an estimate of their n-gram Jaccard similarity), ties going to the
earlier row. It compares every pair of a group, ``k * (k - 1)`` signature
comparisons for ``k`` members, ``ROWS_PER_BLOCK`` rows against the whole
group at a time, so it holds ``ROWS_PER_BLOCK * k * hashes`` booleans at most.
"""

from __future__ import annotations

import numpy as np

ROWS_PER_BLOCK = 64


def closest_members(signatures: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``signatures`` (one per member, ``k >= 2`` rows), the
    index of the other row with the most equal values, and that share."""
    signatures = np.asarray(signatures)
    count = len(signatures)
    if count < 2:
        raise ValueError(f"closest_members needs a group of two or more signatures, not {count}")
    closest = np.empty(count, np.int64)
    shares = np.empty(count, np.float64)
    for start in range(0, count, ROWS_PER_BLOCK):
        block = signatures[start:start + ROWS_PER_BLOCK]
        agreement = (block[:, None, :] == signatures[None, :, :]).mean(axis=2)
        rows = np.arange(len(block))
        agreement[rows, start + rows] = -1.0  # never a member's own signature
        closest[start:start + len(block)] = agreement.argmax(axis=1)  # the first of equal shares
        shares[start:start + len(block)] = agreement[rows, closest[start:start + len(block)]]
    return closest, shares
