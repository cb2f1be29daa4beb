"""Removing listed duplicate ids from the original data, and reading data with stable ids."""

from __future__ import annotations

import logging
import time
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from beam_curator.stages.io.partitioning import expand_paths
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.semantic.ids import FILE_COLUMN, GENERATED_ID, ROW_COLUMN, AssignIdsStage, FileRegistry
from beam_curator.workflows.semantic.layout import parquet_files, read_parquet
from beam_curator.workflows.semantic.phases import BeamSettings, PhaseBook, digest, remove_tree

logger = logging.getLogger(__name__)


class RemoveIdsStage(ProcessingStage):
    """Drops the rows whose id is listed; the id set is loaded once per worker."""

    name = "remove_duplicates"

    def __init__(self, ids_url: str, id_column: str, duplicate_id_field: str = "id", drop_columns: tuple[str, ...] = (GENERATED_ID,)) -> None:
        self.ids_url = ids_url
        self.id_column = id_column
        self.duplicate_id_field = duplicate_id_field
        self.drop_columns = drop_columns

    def setup(self) -> None:
        tables = [read_parquet(file, [self.duplicate_id_field]) for file in _id_files(self.ids_url)]
        self.remove = pa.concat_tables(tables).column(0).combine_chunks() if tables else pa.array([])

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        if table.num_rows:
            ids = table.column(self.id_column)
            keep = pc.invert(pc.is_in(ids, value_set=self.remove.cast(ids.type)))
            table = table.filter(keep)
        table = table.drop_columns([c for c in self.drop_columns if c in table.column_names])
        result = DocumentBatch(dataset_name=task.dataset_name, data=table)
        result._metadata = {**task._metadata, "removed": task.num_items - table.num_rows}
        return result


_FORMATS = {"jsonl": (JsonlReader, JsonlWriter), "parquet": (ParquetReader, ParquetWriter)}


def file_formats(filetype: str) -> tuple[type, type]:
    """The reader and writer classes of ``jsonl`` or ``parquet``."""
    if filetype not in _FORMATS:
        raise ValueError(f"input_filetype must be 'jsonl' or 'parquet', not {filetype!r}")
    return _FORMATS[filetype]


def input_listing(input_path: str | list[str], input_filetype: str) -> list[tuple[str, int]]:
    """The input files and their sizes, for phase fingerprints: a rerun after
    files were added or changed must redo the phase, not skip it as done."""
    paths = expand_paths(input_path, file_formats(input_filetype)[0].extensions)
    fs, _ = fsspec.core.url_to_fs(paths[0])
    return [(path, fs.size(path)) for path in paths]


def id_reading_stages(
    input_path: str | list[str], input_filetype: str, files_per_partition: int, id_field: str | None,
    cache_path: str, fields: list[str] | None = None, on_bad_record: str = "raise",
) -> tuple[list[ProcessingStage], str]:
    """Reader plus id assignment, identical wherever the same data is read again."""
    reader_class, _ = file_formats(input_filetype)
    numbers = FileRegistry(cache_path).register(input_path, reader_class.extensions) if id_field is None else {}
    reader = reader_class(
        input_path, files_per_partition=files_per_partition, fields=fields, on_bad_record=on_bad_record,
        file_column=FILE_COLUMN if id_field is None else None, row_column=ROW_COLUMN if id_field is None else None,
    )
    return [reader, AssignIdsStage(numbers, id_field)], id_field or GENERATED_ID


class TextDuplicatesRemovalWorkflow:
    """Writes the input minus the listed duplicate ids, resumable per input partition.

    ``ids_to_remove_path`` is a parquet file or folder with ``duplicate_id_field``.
    Without ``id_field`` the ids are the generated ``_curator_dedup_id`` of the
    file registry in ``cache_path`` (the same one the embedding phase used).
    """

    def __init__(
        self,
        input_path: str | list[str],
        ids_to_remove_path: str,
        output_path: str,
        cache_path: str,
        input_filetype: str = "jsonl",
        output_filetype: str | None = None,
        id_field: str | None = None,
        duplicate_id_field: str = "id",
        files_per_partition: int = 1,
        runner: str | None = "local",
        on_bad_record: str = "raise",
        beam_args: list[str] | None = None,
        **runner_settings: object,
    ) -> None:
        self.input_path = input_path
        self.ids_to_remove_path = ids_to_remove_path
        self.output_path = output_path.rstrip("/")
        self.cache_path = cache_path
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype or input_filetype
        self.id_field = id_field
        self.duplicate_id_field = duplicate_id_field
        self.files_per_partition = files_per_partition
        self.on_bad_record = on_bad_record
        self.book = PhaseBook(f"{cache_path.rstrip('/')}/checkpoints/phases", BeamSettings(runner, list(beam_args or []), runner_settings))

    def run(self) -> dict[str, Any]:
        """Returns ``num_duplicates_removed``, ``final_output_path`` and ``removal_time``."""
        started = time.monotonic()
        _, writer_class = file_formats(self.output_filetype)
        ids_key = digest([
            _content_digest(self.ids_to_remove_path), input_listing(self.input_path, self.input_filetype),
            self.output_path,
        ])
        checkpoint = f"{self.cache_path.rstrip('/')}/checkpoints/removal"
        fs, output = fsspec.core.url_to_fs(self.output_path)
        output_exists = fs.exists(output)  # deleted since the last run: write it again
        if self.book.is_done("removal", ids_key) and output_exists:
            logger.info("removal: already complete for these duplicates, nothing to do")
            removed = self.book.details("removal").get("removed", 0)
        else:
            if not (self.book.is_done("removal-started", ids_key) and output_exists):  # start over
                for stale in (self.output_path, checkpoint):
                    remove_tree(stale)
                self.book.mark_done("removal-started", ids_key)
            stages, id_column = id_reading_stages(
                self.input_path, self.input_filetype, self.files_per_partition, self.id_field, self.cache_path,
                on_bad_record=self.on_bad_record,
            )
            summary = self.book.run_stages("removal", [
                *stages,
                RemoveIdsStage(self.ids_to_remove_path, id_column, self.duplicate_id_field),
                writer_class(self.output_path),
            ], checkpoint)
            counters = summary.counters
            removed = counters.get("remove_duplicates.items_in", 0) - counters.get("remove_duplicates.items_out", 0)
            self.book.mark_done("removal", ids_key, removed=removed)
        return {
            "num_duplicates_removed": removed,
            "final_output_path": self.output_path,
            "removal_time": time.monotonic() - started,
        }


def _id_files(url: str) -> list[str]:
    """A parquet file of ids, or the parquet files of a folder."""
    fs, path = fsspec.core.url_to_fs(url)
    return [url] if fs.isfile(path) else parquet_files(url)


def _content_digest(url: str) -> str:
    fs, _ = fsspec.core.url_to_fs(url)
    return digest([(file, fs.size(file), fs.checksum(file)) for file in _id_files(url)])
