"""A batch of documents backed by a pyarrow Table."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from beam_curator.tasks.base import Task


@dataclass
class DocumentBatch(Task[pa.Table]):
    """Documents as columns; stages may hand back a pandas DataFrame, which is
    converted so that every downstream stage sees the same type."""

    def __post_init__(self) -> None:
        if isinstance(self.data, pd.DataFrame):
            self.data = pa.Table.from_pandas(self.data, preserve_index=False)
        if self.data is None:
            self.data = pa.table({})

    @property
    def num_items(self) -> int:
        return self.data.num_rows

    def to_pyarrow(self) -> pa.Table:
        return self.data

    def to_pandas(self) -> pd.DataFrame:
        return self.data.to_pandas()
