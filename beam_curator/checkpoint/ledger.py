"""Order-independent, retry-safe completion arithmetic.

Each terminal task returns its credits once, keyed by its lineage id, so a
retried bundle that reports the same task twice cannot push a partition to
completion early. A partition is complete exactly when the distinct returned
credits sum to 1.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from fractions import Fraction
from typing import Callable, Iterable, Mapping

ONE = Fraction(1)
logger = logging.getLogger(__name__)


class CreditOverflowError(ValueError):
    """More than the whole credit came back: the stages are not deterministic."""


class CreditLedger:
    """Returned credits per source partition, deduplicated by task id."""

    def __init__(self) -> None:
        self._returned: dict[str, dict[str, Fraction]] = defaultdict(dict)
        self.complete: set[str] = set()

    def add(
        self, task_id: str, credits: Mapping[str, Fraction], durable: Callable[[list[str]], object] | None = None,
    ) -> list[str]:
        """Record one terminal task; return the sources it completed.

        ``durable(finished)``, when given, stores the task before the ledger
        counts it: if storing fails (a full disk), the ledger is left as it
        was, so that a retry of the task in this process is counted again
        instead of being taken for a duplicate of one that was never stored.
        """
        finished, shares = [], {}
        for source, share in credits.items():
            if source in self.complete:
                continue
            total = sum((credit for task, credit in self._returned.get(source, {}).items() if task != task_id), share)
            if total > ONE:
                raise CreditOverflowError(
                    f"partition {source} returned credit {total} > 1: the pipeline is not deterministic "
                    "(a stage produced different children for the same task); reset the checkpoint"
                )
            shares[source] = share
            if total == ONE:
                finished.append(source)
        if durable is not None:
            durable(finished)
        for source, share in shares.items():
            self._returned[source][task_id] = share
        for source in finished:
            self.complete.add(source)
            del self._returned[source]
        return finished

    def partial(self, source: str) -> dict[str, Fraction]:
        return dict(self._returned.get(source, {}))


def union_complete(done: Iterable[str], partials: Iterable[tuple[str, str, Fraction]]) -> set[str]:
    """Sources complete across several writers.

    ``done`` are sources some writer saw finish; ``partials`` are
    ``(source, task_id, credit)`` rows left by writers that each saw only part
    of a partition (its descendants ran on several workers).
    """
    ledger = CreditLedger()
    ledger.complete.update(done)
    for source, task_id, share in partials:
        try:
            ledger.add(task_id, {source: share})
        except CreditOverflowError as error:
            logger.warning("ignoring inconsistent partial credits: %s", error)
    return ledger.complete
