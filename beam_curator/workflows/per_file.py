"""What the exact and fuzzy workflows share: their common settings and
checks, a first phase that reads each input file as a partition of its own
(so that a changed file is processed again alone) into parquet of small row
groups (a reader of one key range skips the others by their statistics),
and removal."""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa

from beam_curator.errors import CuratorSettingsError, check_on_bad_record, store_outages_named
from beam_curator.stages import ProcessingStage
from beam_curator.stages.io import ParquetWriter
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.fingerprint import check_mode
from beam_curator.stages.io.parquet import write_table
from beam_curator.workflows.phases import BeamSettings, PhaseBook
from beam_curator.workflows.semantic.ids import FILE_COLUMN, GENERATED_ID, ROW_COLUMN, places_in_files
from beam_curator.workflows.parameters import apply_storage_options, set_verbosity
from beam_curator.workflows.semantic.preflight import checked_text_input
from beam_curator.workflows.semantic.removal import (
    TextDuplicatesRemovalWorkflow,
    count_skipped,
    file_formats,
    id_reading_stages,
    input_extensions,
    partition_grouping,
)
from beam_curator.workflows.semantic.workflow import WorkflowResult

ROWS_PER_GROUP = 1 << 16


def document_places(source: str, ids: pa.ChunkedArray, id_column: str) -> dict[str, pa.Array]:
    """The file and row columns of one partition's documents (the path stored
    once, as a dictionary): which copy is first. With generated ids the row is
    the one within the whole file, whichever block of it the partition holds;
    with the user's ids, which rank copies by themselves, the row in the partition."""
    rows = len(ids)
    return {
        FILE_COLUMN: pa.DictionaryArray.from_arrays(pa.nulls(rows, pa.int32()).fill_null(0), pa.array([source])),
        ROW_COLUMN: places_in_files(ids.combine_chunks()) if id_column == GENERATED_ID
        else pa.array(range(rows), pa.int64()),
    }


class HashesWriter(ParquetWriter):
    """Parquet in row groups small enough for a digest range to skip most of them;
    list columns (MinHash signatures) written plain by ``write_table``: a
    dictionary tried on their values, which hardly repeat, made writing a
    file of 1,000 signatures nine times slower (and the file half again larger)."""

    name = "hashes_writer"

    def serialize(self, table: pa.Table, handle) -> None:
        write_table(table, handle, row_group_size=ROWS_PER_GROUP)


class PerFileDeduplication:
    """Base of a workflow whose first phase maps each input file to a file of
    per-document records, and whose last removes the listed ids."""

    def _configure(
        self, *, output_path: str, cache_path: str, input_path: str | list[str] | None, input_filetype: str,
        output_filetype: str | None, input_file_extensions: list[str] | None, text_field: str, id_field: str | None,
        perform_removal: bool, files_per_partition: int | None, input_blocksize: int | str | None,
        on_bad_record: str, input_fingerprint: str, wait: bool, clear_output: bool, verbose: bool,
        runner: str | None, beam_args: list[str] | None, runner_settings: dict[str, object],
        **storage: tuple[str | list[str] | None, dict[str, Any] | None],
    ) -> None:
        """The settings both workflows take, checked; ``storage`` maps NeMo's
        ``read_kwargs`` / ``write_kwargs`` / ``cache_kwargs`` to ``(path, kwargs)``."""
        owner = type(self).__name__
        self.output_filetype = output_filetype or input_filetype
        file_formats(input_filetype), file_formats(self.output_filetype)
        check_on_bad_record(on_bad_record, owner)
        self.grouping = partition_grouping(owner, files_per_partition, input_blocksize)
        apply_storage_options(owner, **{name: where for name, where in storage.items() if where[0] is not None})
        set_verbosity(verbose)
        self.input_path = input_path
        self.output_path = output_path.rstrip("/")
        self.cache_path = cache_path.rstrip("/")
        self.input_filetype = input_filetype
        self.input_file_extensions = input_file_extensions
        self.input_extensions = input_extensions(input_filetype, input_file_extensions)
        self.text_field = text_field
        self.id_field = id_field
        self.id_column = id_field or GENERATED_ID
        self.perform_removal = perform_removal
        self.on_bad_record = on_bad_record
        self.input_fingerprint = check_mode(input_fingerprint) or "stat"
        self.wait = wait
        self.clear_output = clear_output
        self.runner = {"runner": runner, "beam_args": list(beam_args or []), **runner_settings}
        self.book = PhaseBook(
            f"{self.cache_path}/checkpoints/phases", BeamSettings(runner, list(beam_args or []), runner_settings),
            {"cache": self.cache_path, "output": self.output_path}, logging.getLogger(type(self).__module__),
        )

    @store_outages_named
    def run(self) -> WorkflowResult:
        """Checks first (a run that fails them creates nothing), then every phase,
        holding the output and cache folders against other runs."""
        started = time.monotonic()
        if self.input_path is None:
            raise CuratorSettingsError("input_path to the dataset must be provided")
        folders = {"output_path": self.output_path, "cache_path": self.cache_path}
        with checked_text_input(self.input_path, folders, self.input_extensions, self.input_filetype, self.text_field,
                                self.id_field, self.on_bad_record, self.clear_output, self.wait):
            return self._run_phases(started)

    def _run_phases(self, started: float) -> WorkflowResult:
        raise NotImplementedError

    def _per_file_phase(self, name: str, stage: ProcessingStage, output: str, settings: object) -> dict[str, Any]:
        """``stage`` on each input file (a file larger than ``input_blocksize``:
        on each of its blocks; id column: ``self.id_column``), its records
        written to ``output``; the phase book's details."""
        fields = [self.text_field, *filter(None, [self.id_field])]
        reading, _ = id_reading_stages(
            self.input_path, self.input_filetype, 1, self.id_field, self.cache_path, fields, self.input_fingerprint,
            self.on_bad_record, self.input_extensions, blocksize=self.grouping["blocksize"],
        )
        details = self.book.run_partitioned(name, [*reading, stage, HashesWriter(output)],
                                            f"{self.cache_path}/checkpoints/{name}", settings, output)
        if not details["rows"]:  # every record was skipped as bad
            self.book.forget(name)
            raise CuratorInputError(f"input {self.input_path!r} holds no records to deduplicate")
        return details

    def _finish(self, metadata: dict[str, Any], started: float, what: str) -> WorkflowResult:
        """Removal (with ``perform_removal``) of the ids in ``metadata["duplicates_path"]``, the totals, the log line."""
        metadata["phases_run"] = list(self.book.ran)
        if self.perform_removal:
            workflow = TextDuplicatesRemovalWorkflow(
                self.input_path, metadata["duplicates_path"], f"{self.output_path}/deduplicated", self.cache_path,
                self.input_filetype, self.output_filetype, self.id_field, self.id_column,
                self.grouping["files_per_partition"], input_blocksize=self.grouping["blocksize"],
                input_file_extensions=self.input_file_extensions, input_fingerprint=self.input_fingerprint,
                on_bad_record=self.on_bad_record, **self.runner,
            )
            workflow.book.log = self.book.log  # a phase of this workflow: it logs as one
            removal = workflow.run()
            metadata.update(removal, phases_run=[*metadata["phases_run"], *removal["phases_run"]])
        count_skipped(metadata, self.on_bad_record, self.input_path, self.input_extensions, self.input_filetype)
        metadata["total_time"] = time.monotonic() - started
        log = self.book.log
        if not metadata["phases_run"]:
            log.info("%s: nothing to do, every phase was complete with its outputs in place "
                     "(%s documents, %s duplicates)", what, metadata["num_documents"], metadata["num_duplicates"])
        else:
            log.info("%s finished in %.1f s: %s documents, %s duplicates, ids in %s", what, metadata["total_time"],
                     metadata["num_documents"], metadata["num_duplicates"], metadata["duplicates_path"])
        return WorkflowResult(metadata)
