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
from beam_curator.workflows.semantic.parameters import (
    apply_storage_options,
    check_cache_path,
    check_runner_settings,
    pick,
    refuse_file_splitting,
)
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
    cache_path: str, fields: list[str] | None = None,
) -> tuple[list[ProcessingStage], str]:
    """Reader plus id assignment, identical wherever the same data is read again."""
    reader_class, _ = file_formats(input_filetype)
    numbers = FileRegistry(cache_path).register(input_path, reader_class.extensions) if id_field is None else {}
    reader = reader_class(
        input_path, files_per_partition=files_per_partition, fields=fields,
        file_column=FILE_COLUMN if id_field is None else None, row_column=ROW_COLUMN if id_field is None else None,
    )
    return [reader, AssignIdsStage(numbers, id_field)], id_field or GENERATED_ID


class TextDuplicatesRemovalWorkflow:
    """Writes the input minus the listed duplicate ids, resumable per input partition.

    ``ids_to_remove_path`` is a parquet file or folder with ``duplicate_id_field``.
    Without ``id_field`` the ids are the generated ``_curator_dedup_id`` of the
    file registry in ``cache_path`` (the same one the embedding phase used).
    With ``id_field``, ``cache_path`` only holds checkpoints and defaults to
    ``<output_path>.cache`` beside the output. ``drop_id_field`` leaves the id
    column out of the clean data; ``input_kwargs``, ``duplicate_id_read_kwargs``
    and ``output_kwargs`` carry NeMo Curator's ``storage_options``.
    """

    def __init__(
        self,
        input_path: str | list[str],
        ids_to_remove_path: str,
        output_path: str,
        cache_path: str | None = None,
        input_filetype: str = "parquet",
        output_filetype: str = "parquet",
        id_field: str | None = None,
        duplicate_id_field: str = "id",
        files_per_partition: int | None = None,
        output_fields: list[str] | None = None,
        input_files_per_partition: int | None = None,
        drop_id_field: bool = False,
        input_fields: list[str] | None = None,
        input_blocksize: int | str | None = None,
        input_file_extensions: list[str] | None = None,
        output_file_extension: str | None = None,
        input_kwargs: dict[str, Any] | None = None,
        duplicate_id_read_kwargs: dict[str, Any] | None = None,
        output_kwargs: dict[str, Any] | None = None,
        runner: str | None = "local",
        beam_args: list[str] | None = None,
        **runner_settings: object,
    ) -> None:
        owner = type(self).__name__
        check_runner_settings(self, runner, runner_settings)
        check_cache_path(owner, cache_path, "input_filetype", ("parquet", "jsonl"))
        if cache_path is None and id_field is None:
            raise ValueError(
                f"{owner}: generated ids (id_field unset) are looked up in the cache_path the embedding phase used; "
                "pass that cache_path, or id_field naming the ids in the input"
            )
        files_per_partition = pick(owner, 1, files_per_partition=files_per_partition,
                                   input_files_per_partition=input_files_per_partition)
        refuse_file_splitting(owner, input_blocksize=input_blocksize, input_file_extensions=input_file_extensions,
                              output_file_extension=output_file_extension)
        self.input_fields = input_fields
        apply_storage_options(owner, input_kwargs=(input_path, input_kwargs),
                              duplicate_id_read_kwargs=(ids_to_remove_path, duplicate_id_read_kwargs),
                              output_kwargs=(output_path, output_kwargs))
        cache_path = cache_path or f"{output_path.rstrip('/')}.cache"
        self.drop_columns = (GENERATED_ID,) if id_field is None else ((id_field,) if drop_id_field else ())
        self.output_fields = output_fields
        self.input_path = input_path
        self.ids_to_remove_path = ids_to_remove_path
        self.output_path = output_path.rstrip("/")
        self.cache_path = cache_path
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype
        self.id_field = id_field
        self.duplicate_id_field = duplicate_id_field
        self.files_per_partition = files_per_partition
        self.book = PhaseBook(f"{cache_path.rstrip('/')}/checkpoints/phases", BeamSettings(runner, list(beam_args or []), runner_settings))

    def run(self) -> dict[str, Any]:
        """Returns ``num_duplicates_removed``, ``final_output_path`` and ``removal_time``."""
        started = time.monotonic()
        _, writer_class = file_formats(self.output_filetype)
        ids_key = digest([
            _content_digest(self.ids_to_remove_path), input_listing(self.input_path, self.input_filetype),
            self.output_path, self.output_fields, self.drop_columns, self.input_fields,
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
            # NeMo's input_fields: the columns to read and keep, the id column always among them.
            fields = list(dict.fromkeys([*self.input_fields, *filter(None, [self.id_field])])) if self.input_fields else None
            stages, id_column = id_reading_stages(
                self.input_path, self.input_filetype, self.files_per_partition, self.id_field, self.cache_path, fields
            )
            summary = self.book.run_stages("removal", [
                *stages,
                # Only ids we generated are dropped; a user's own column keeps its name, even NeMo's default one.
                RemoveIdsStage(self.ids_to_remove_path, id_column, self.duplicate_id_field, self.drop_columns),
                writer_class(self.output_path, fields=self.output_fields),
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
