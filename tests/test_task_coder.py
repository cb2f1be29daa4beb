"""Tasks travel between Beam stages pickled, and are sized without pickling their tables."""

from __future__ import annotations

import pickle

import apache_beam as beam
import numpy as np
import pyarrow as pa

from beam_curator.tasks import DocumentBatch, FileGroupTask, Task
from beam_curator.transforms.task_coder import TaskCoder


def test_task_pcollections_use_the_task_coder() -> None:
    assert isinstance(beam.coders.registry.get_coder(Task), TaskCoder)


def test_a_batch_round_trips_and_is_sized_by_its_table(monkeypatch) -> None:
    table = pa.table({"id": np.arange(10_000), "embeddings": list(np.ones((10_000, 64), dtype=np.float32))})
    batch = DocumentBatch(dataset_name="d", data=table, _metadata={"source_files": ["a.parquet"]})
    impl = TaskCoder().get_impl()
    back = impl.decode(impl.encode(batch))
    assert back.data.equals(table) and back._metadata == batch._metadata

    def no_pickling(*args, **kwargs):
        raise AssertionError("sized by pickling the table")

    monkeypatch.setattr(pickle, "dumps", no_pickling)
    assert impl.estimate_size(batch) >= table.nbytes


def test_small_tasks_are_sized_by_their_pickle() -> None:
    task = FileGroupTask(dataset_name="d", data=["a.parquet", "b.parquet"])
    assert TaskCoder().get_impl().estimate_size(task) >= len(pickle.dumps(task))
