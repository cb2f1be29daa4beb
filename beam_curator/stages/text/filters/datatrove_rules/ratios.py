"""Ratios of counts with a rule for empty totals.

Where datatrove divides by a document's number of words or lines it raises ``ZeroDivisionError`` on
a document with none (when the rule that would have dropped it first is turned off) and stops the
run; here such a document fails the check instead, and is dropped with that check's reason.
"""

from __future__ import annotations


def above(count: float, total: float, limit: float) -> bool:
    """``count / total > limit``, or True when there is no total."""
    return not total or count / total > limit


def below(count: float, total: float, limit: float) -> bool:
    """``count / total < limit``, or True when there is no total."""
    return not total or count / total < limit
