"""``AfterComplete``: a barrier between two stage chains of one Beam pipeline.

A phase such as "assign every document to a cluster, then write each
cluster's documents" needs the first chain finished everywhere before the
second may read what it wrote. Running each chain as a Beam pipeline of its
own costs a pipeline start per chain; inside one pipeline, a side input of
the first chain's output is the barrier (a runner hands it over only once
all of it is computed), and the checkpoint, not the element count, says
whether the first chain really is complete: a task that failed leaves its
partition pending, and then the second chain must not see half of the
first's output, so it gets no root task and does nothing.
"""

from __future__ import annotations

import logging
from typing import Iterator

import apache_beam as beam

from beam_curator.checkpoint import CheckpointStore
from beam_curator.tasks import EmptyTask, Task
from beam_curator.transforms.curator_stages import CuratorStages, PipelineDefinitionError
from beam_curator.transforms.storage_settings import StorageSettings, apply_settings, driver_settings

logger = logging.getLogger(__name__)


def _root_if_complete(
    _: None, pending: list[str], ended: object, store: CheckpointStore, name: str, storage: StorageSettings,
) -> Iterator[Task]:
    """The root task of the next chain, if every ``pending`` partition is complete in ``store``
    (``ended``, the finished chain's output, is only waited for; ``storage``: the driver's fsspec settings)."""
    apply_settings(storage)
    missing = set(pending) - store.completed()
    if missing:
        logger.warning(
            "%s: %d partition(s) not complete (e.g. %s); what follows it does not start this run",
            name, len(missing), sorted(missing)[0],
        )
        return
    yield EmptyTask()


class AfterComplete(beam.PTransform):
    """One root task once every partition ``chain`` had pending is complete in
    its checkpoint; none otherwise. Apply it to the pipeline's start after
    ``chain`` was applied, and a ``CuratorStages`` to its output."""

    def __init__(self, chain: CuratorStages, name: str) -> None:
        super().__init__()
        if chain.store is None or chain.ended is None or chain.pending_keys is None:
            raise PipelineDefinitionError(f"{name}: a chain must be applied, with a checkpoint, before a stage may wait for it")
        self.chain = chain
        self.name = name

    def expand(self, start):
        # A side input is ready only once all of its PCollection is: the chain's output (and marks), each as None.
        ended = self.chain.ended | "Ended" >> beam.Map(lambda _: None)
        return start | "Start" >> beam.Create([None]) | "RootIfComplete" >> beam.FlatMap(
            _root_if_complete, beam.pvalue.AsList(self.chain.pending_keys), beam.pvalue.AsIter(ended),
            self.chain.store, self.name, driver_settings(),
        )
