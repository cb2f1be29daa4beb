"""Removing listed duplicate ids from the original data, and reading data with stable ids."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.errors import store_outages_named
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.fingerprint import check_mode
from beam_curator.stages.io.overlap import check_paths
from beam_curator.running.lock import run_lock
from beam_curator.stages.io.parquet import parquet_files, parquet_metadata, read_parquet
from beam_curator.stages.io.partitioning import expand_paths
from beam_curator.tasks import DocumentBatch
from beam_curator.workflows.phases import BeamSettings, PhaseBook
from beam_curator.workflows.semantic.ids import FILE_COLUMN, GENERATED_ID, ROW_COLUMN, AssignIdsStage, FileRegistry
from beam_curator.workflows.parameters import (
    apply_storage_options,
    check_positive_integers,
    check_runner_settings,
    settings_checked,
)
from beam_curator.workflows.semantic.parameters import check_cache_path, pick

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


def input_extensions(filetype: str, override: list[str] | None = None) -> tuple[str, ...]:
    """The file name endings that make a file input: NeMo's ``input_file_extensions``, or the format's own."""
    return tuple(f".{ext.lstrip('.')}" for ext in override) if override else file_formats(filetype)[0].extensions


def partition_grouping(owner: str, files_per_partition: int | None, blocksize: int | str | None) -> dict[str, Any]:
    """NeMo's two ways of grouping input files, one at a time: a file count,
    or a size in bytes (``"128MiB"``) that also splits a larger file into
    blocks of about that size (each resumed on its own)."""
    if files_per_partition is not None and blocksize is not None:
        raise ValueError(f"{owner}: give files_per_partition or input_blocksize, not both")
    check_positive_integers(files_per_partition=files_per_partition, unset_allowed=True)
    return {"files_per_partition": None if blocksize is not None else (files_per_partition or 1), "blocksize": blocksize}


def count_records(path: str, filetype: str, enough: float = float("inf")) -> int:
    """Records in one input file (parquet: from its footer; JSON Lines:
    non-empty lines), counting no further than ``enough``."""
    if filetype == "parquet":
        return parquet_metadata(path).num_rows
    count = 0
    with fsspec.open(path, "rb", compression="infer") as handle:
        for raw in handle:
            count += bool(raw.strip())
            if count >= enough:
                break
    return count


def count_input_records(input_path: str | list[str], extensions: tuple[str, ...], filetype: str) -> int:
    """Records in every input file now, bad ones included (JSON Lines: non-empty lines)."""
    return sum(count_records(path, filetype) for path in expand_paths(input_path, extensions))


def count_skipped(metadata: dict[str, Any], on_bad_record: str, input_path: str | list[str],
                  extensions: tuple[str, ...], filetype: str) -> None:
    """Bad records the readers skipped (``on_bad_record="skip"``), counted on
    their own in ``num_records_skipped`` rather than among the duplicates removed.

    ``metadata["num_documents"]`` holds the records a workflow's first phase
    read; every record of the input, bad ones included, comes from the removal
    phase (``num_records_in``) when it ran, else is counted here. Removed
    are then the documents read less those kept."""
    if on_bad_record != "skip":  # a bad record stopped the run instead
        metadata["num_records_skipped"] = 0
        return
    records_in = metadata.get("num_records_in")
    if records_in is None:
        records_in = count_input_records(input_path, extensions, filetype)
    metadata["num_records_skipped"] = records_in - metadata["num_documents"]
    if metadata.get("final_output_path"):
        metadata["num_duplicates_removed"] = metadata["num_documents"] - metadata["num_documents_kept"]


def id_reading_stages(
    input_path: str | list[str], input_filetype: str, files_per_partition: int, id_field: str | None,
    cache_path: str, fields: list[str] | None = None, fingerprint: str | None = "stat", on_bad_record: str = "raise",
    extensions: tuple[str, ...] | None = None, blocksize: int | str | None = None,
) -> tuple[list[ProcessingStage], str]:
    """Reader plus id assignment, identical wherever the same data is read again.

    Partitions are keyed by their files' ``fingerprint``, so a file changed
    since a finished run is read again, not skipped as done."""
    reader_class, _ = file_formats(input_filetype)
    extensions = extensions or reader_class.extensions
    numbers = FileRegistry(cache_path).register(input_path, extensions) if id_field is None else {}
    reader = reader_class(
        input_path, files_per_partition=files_per_partition, blocksize=blocksize, fields=fields,
        on_bad_record=on_bad_record, file_column=FILE_COLUMN if id_field is None else None,
        row_column=ROW_COLUMN if id_field is None else None, fingerprint=fingerprint, extensions=extensions,
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
    A rerun redoes only partitions whose input files changed, whose output
    files went missing, or all of them when the listed ids changed; output
    files are replaced one by one (never deleted first), and files of inputs
    that are gone are removed once the rest is written.
    """

    @settings_checked
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
        input_fingerprint: str = "stat",
        runner: str | None = "local",
        on_bad_record: str = "raise",
        wait: bool = False,
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
        self.grouping = partition_grouping(owner, pick(owner, None, files_per_partition=files_per_partition,
                                                       input_files_per_partition=input_files_per_partition),
                                           input_blocksize)
        self.input_extensions = input_extensions(input_filetype, input_file_extensions)
        self.output_file_extension = output_file_extension
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
        self.cache_path = cache_path.rstrip("/")
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype
        self.id_field = id_field
        self.duplicate_id_field = duplicate_id_field
        self.input_fingerprint = check_mode(input_fingerprint) or "stat"
        self.on_bad_record = on_bad_record
        self.wait = wait
        self.book = PhaseBook(
            f"{self.cache_path}/checkpoints/phases", BeamSettings(runner, list(beam_args or []), runner_settings),
            {"cache": self.cache_path, "output": self.output_path}, logger,
        )

    def _documents_in(self) -> dict[str, int]:
        """Records in the input now (read again, so exact however often the phase was resumed)."""
        return {"documents_in": count_input_records(self.input_path, self.input_extensions, self.input_filetype)}

    @store_outages_named
    def run(self) -> dict[str, Any]:
        """Returns ``num_documents_kept``, ``num_records_in`` (every record of the input, bad ones
        included), ``num_duplicates_removed`` (the difference: bad records skipped are among them,
        see :func:`count_skipped`), ``final_output_path``, ``removal_time`` and ``phases_run``
        (["removal"], or [] when an earlier run's output was still in place)."""
        folders = {"output_path": self.output_path, "cache_path": self.cache_path}
        check_paths({"input_path": self.input_path}, folders)
        with run_lock(folders, wait=self.wait), self.book.timed("removal"):
            details = self._remove()
        return {
            "num_documents_kept": details["rows"],
            "num_records_in": details["documents_in"],
            "num_duplicates_removed": details["documents_in"] - details["rows"],
            "final_output_path": self.output_path,
            "removal_time": self.book.times.get("removal", 0.0),
            "phases_run": list(self.book.ran),
        }

    def _remove(self) -> dict[str, Any]:
        _, writer_class = file_formats(self.output_filetype)
        # NeMo's input_fields: the columns to read and keep, the id column always among them.
        fields = list(dict.fromkeys([*self.input_fields, *filter(None, [self.id_field])])) if self.input_fields else None
        stages, id_column = id_reading_stages(
            self.input_path, self.input_filetype, self.grouping["files_per_partition"], self.id_field,
            self.cache_path, fields, fingerprint=self.input_fingerprint, on_bad_record=self.on_bad_record,
            extensions=self.input_extensions, blocksize=self.grouping["blocksize"],
        )
        settings = [
            ids_digest(self.ids_to_remove_path, self.duplicate_id_field), self.id_field, self.output_filetype,
            self.output_fields, self.drop_columns, self.input_fields, self.output_file_extension,
        ]
        return self.book.run_partitioned("removal", [
            *stages,
            # Only ids we generated are dropped; a user's own column keeps its name, even NeMo's default one.
            RemoveIdsStage(self.ids_to_remove_path, id_column, self.duplicate_id_field, self.drop_columns),
            writer_class(self.output_path, fields=self.output_fields, extension=self.output_file_extension),
        ], f"{self.cache_path}/checkpoints/removal", settings, self.output_path, self._documents_in)


def _id_files(url: str) -> list[str]:
    """A parquet file of ids, or the parquet files of a folder."""
    fs, path = fsspec.core.url_to_fs(url)
    return [url] if fs.isfile(path) else parquet_files(url)


def ids_digest(url: str, id_field: str) -> str:
    """A digest of the listed ids themselves (sorted), not of the files that
    hold them: duplicates written again with the same ids change nothing."""
    files = _id_files(url)
    if not files:
        raise CuratorInputError(f"no duplicate id files at {url}; run identification first")
    ids = pa.concat_arrays([read_parquet(file, [id_field]).column(0).combine_chunks() for file in files])
    table = pa.table({"id": pc.take(ids, pc.sort_indices(ids))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return hashlib.sha256(sink.getvalue()).hexdigest()
