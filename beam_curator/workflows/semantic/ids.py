"""Document ids that survive re-partitioning, reruns and the removal phase.

Generated ids are ``file_number << 32 | row``: exact (no hashing, so no
collisions), computed locally by any worker, and the same in the embedding
and removal phases whatever ``files_per_partition`` each uses. File numbers
come from a registry persisted in the cache: files are numbered in sorted
order when first seen and never renumbered, so adding files later keeps
every earlier id. ``locate`` maps an id back to (file, row).
"""

from __future__ import annotations

import json

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.dedup import GENERATED_ID
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.partitioning import expand_paths
from beam_curator.writing import write_atomically
from beam_curator.tasks import DocumentBatch

FILE_COLUMN = "_curator_file"
ROW_COLUMN = "_curator_row"
_ROW_BITS = 32


class FileRegistry:
    """The persisted file → number map (``<cache>/id_map/files.json``)."""

    def __init__(self, cache_path: str) -> None:
        self.url = f"{cache_path.rstrip('/')}/id_map/files.json"

    def load(self) -> dict[str, int]:
        fs, path = fsspec.core.url_to_fs(self.url)
        if not fs.exists(path):
            return {}
        with fs.open(path, "r") as handle:
            return json.load(handle)

    def register(self, input_path: str | list[str], extensions: tuple[str, ...]) -> dict[str, int]:
        """Number any new input files after the known ones, and persist."""
        numbers = self.load()
        new = [path for path in expand_paths(input_path, extensions) if path not in numbers]
        if new:
            start = max(numbers.values(), default=-1) + 1
            numbers.update({path: start + offset for offset, path in enumerate(new)})
            fs, path = fsspec.core.url_to_fs(self.url)
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            write_atomically(self.url, lambda handle: handle.write(json.dumps(numbers, indent=1).encode()))
        return numbers

    def locate(self, generated_id: int) -> tuple[str, int]:
        """The (file, row) a generated id stands for."""
        number, row = generated_id >> _ROW_BITS, generated_id & ((1 << _ROW_BITS) - 1)
        files = {n: path for path, n in self.load().items()}
        return files[number], row


def places_in_files(ids: pa.Array) -> pa.Array:
    """The row within its file of each generated id: the same however the file
    was split into blocks, and counting every physical record before it."""
    return pc.bit_wise_and(ids, (1 << _ROW_BITS) - 1)


class AssignIdsStage(ProcessingStage):
    """Adds ``_curator_dedup_id`` (or checks the user's ``id_field``) and drops the locator columns."""

    name = "assign_ids"

    def __init__(self, file_numbers: dict[str, int], id_field: str | None) -> None:
        self.file_numbers = file_numbers
        self.id_field = id_field

    def process(self, task: DocumentBatch) -> DocumentBatch | None:
        table = task.to_pyarrow()
        if table.num_rows == 0:
            # Only empty input files in this partition: nothing to embed or keep.
            return None
        if self.id_field is None:
            files = table.column(FILE_COLUMN).to_pylist()
            unknown = sorted({path for path in files if path not in self.file_numbers})
            if unknown:
                raise CuratorInputError(f"files {unknown} are not in the id registry; rerun the workflow to register them")
            numbers = pa.array([self.file_numbers[path] << _ROW_BITS for path in files], pa.int64())
            table = table.append_column(GENERATED_ID, pc.add(numbers, table.column(ROW_COLUMN)))
        else:
            ids = table.column(self.id_field)
            if not (pa.types.is_integer(ids.type) or pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
                raise CuratorInputError(
                    f"{task._metadata.get('source_files')}: id_field {self.id_field!r} holds {ids.type} values "
                    f"(e.g. {ids[0].as_py()!r}); ids must be integers or strings (leave id_field unset to generate ids)"
                )
            if ids.null_count:
                raise CuratorInputError(
                    f"{task._metadata.get('source_files')}: {ids.null_count} record(s) have no {self.id_field!r}; "
                    "give every record an id or leave id_field unset to generate ids"
                )
            counts = pc.value_counts(ids)
            repeated = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
            if repeated:
                raise CuratorInputError(
                    f"{task._metadata.get('source_files')}: id_field {self.id_field!r} repeats the ids "
                    f"{repeated[:5]}; ids must be unique (leave id_field unset to generate ids)"
                )
        table = table.drop_columns([c for c in (FILE_COLUMN, ROW_COLUMN) if c in table.column_names])
        result = DocumentBatch(dataset_name=task.dataset_name, data=table)
        result._metadata = dict(task._metadata)
        return result
