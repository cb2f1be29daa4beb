"""How Beam encodes tasks: pickled, as Beam's default coder does, but sized
without pickling.

Beam samples the elements of every PCollection and asks their coder for
their size, for its metrics. Python's default coders answer by pickling the
element. A ``DocumentBatch`` holds up to a file's rows (75 MB of 384-d
vectors at 50,000 documents), so those samples pickled more bytes than the
whole collection holds: 690 MB for 300 MB of vectors at 200,000 documents
(3% of the post-embedding phases' time at a million). Tasks whose payload
knows its size (Arrow tables, numpy arrays) report that instead.
"""

from __future__ import annotations

import pickle

import apache_beam as beam
from apache_beam.coders import coder_impl

from beam_curator.tasks import Task


def _estimated_size(task: Task) -> int:
    size = getattr(getattr(task, "data", None), "nbytes", None)
    if isinstance(size, int):
        return size
    return len(pickle.dumps(task, pickle.HIGHEST_PROTOCOL))  # small tasks: paths, ids, ranges


class TaskCoder(beam.coders.PickleCoder):
    """Beam's ``PickleCoder`` with a size estimate that does not pickle large payloads."""

    def _create_impl(self) -> coder_impl.CallbackCoderImpl:
        return coder_impl.CallbackCoderImpl(
            lambda task: pickle.dumps(task, pickle.HIGHEST_PROTOCOL), pickle.loads, size_estimator=_estimated_size,
        )


beam.coders.registry.register_coder(Task, TaskCoder)
