"""``ExactDeduplicationWorkflow``: NeMo Curator's exact deduplication, resumable.

Three phases, each recorded in the cache's phase book (fingerprint of inputs
and settings, files produced, checked on every rerun):

1. ``hashing``: per input file (a checkpointed partition keyed by the file's
   fingerprint), the md5 of each text with the document's id;
2. ``identification``: one task per digest range lists every copy but the
   first, into ``<output_path>/ExactDuplicateIds/``; with generated ids also
   ``<output_path>/exact_id_generator.json``;
3. ``removal`` (``perform_removal=True``): the input minus those ids, into
   ``<output_path>/deduplicated/``, by ``TextDuplicatesRemovalWorkflow``.

A rerun with nothing changed runs nothing; a changed, added or removed file
is hashed again alone and the later phases give what a fresh run gives.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from beam_curator.errors import CuratorSettingsError
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.fingerprint import check_mode
from beam_curator.workflows.exact.hashing import HashesWriter, HashTextStage
from beam_curator.workflows.exact.id_generator import FILENAME, write_id_generator
from beam_curator.workflows.exact.identification import DUPLICATE_IDS_STEM, DuplicateIdsStage, bucket_count
from beam_curator.workflows.semantic.id_check import BucketWriter, ListIdBucketsStage
from beam_curator.workflows.semantic.ids import GENERATED_ID
from beam_curator.workflows.semantic.layout import parquet_files, parquet_metadata
from beam_curator.workflows.semantic.parameters import (
    apply_storage_options,
    check_runner_settings,
    settings_checked,
    set_verbosity,
)
from beam_curator.workflows.semantic.phases import BeamSettings, PhaseBook, digest, remove_tree
from beam_curator.workflows.semantic.preflight import checked_text_input
from beam_curator.workflows.semantic.removal import (
    TextDuplicatesRemovalWorkflow,
    file_formats,
    id_reading_stages,
    input_extensions,
    partition_grouping,
)
from beam_curator.workflows.semantic.workflow import WorkflowResult

logger = logging.getLogger(__name__)

DUPLICATES_FOLDER = "ExactDuplicateIds"  # NeMo Curator's name


class ExactDeduplicationWorkflow:
    """Exact duplicates of ``text_field`` found and, with ``perform_removal``, removed.

    Parameters follow NeMo Curator's workflow of the same name (``output_path``
    first). ``assign_id=True`` generates ids into ``_curator_dedup_id``;
    ``assign_id=False`` uses the input's ``id_field``. ``input_blocksize`` groups
    input files for removal (hashing reads one file per partition, so that a
    changed file is hashed again alone). Ours beside NeMo's: ``cache_path``
    (digests and checkpoints; default ``output_path``), ``output_filetype``,
    ``on_bad_record``, ``input_fingerprint``, ``wait``, ``clear_output``,
    ``verbose`` and the runner settings, as in the semantic workflows.
    """

    @settings_checked
    def __init__(
        self,
        output_path: str,
        input_path: str | list[str] | None = None,
        input_filetype: str = "parquet",
        input_blocksize: int | str | None = None,
        input_file_extensions: list[str] | None = None,
        read_kwargs: dict[str, Any] | None = None,
        write_kwargs: dict[str, Any] | None = None,
        assign_id: bool = True,
        id_field: str | None = None,
        text_field: str = "text",
        perform_removal: bool = False,
        cache_path: str | None = None,
        output_filetype: str | None = None,
        files_per_partition: int | None = None,
        on_bad_record: str = "raise",
        input_fingerprint: str = "stat",
        wait: bool = False,
        clear_output: bool = False,
        verbose: bool = True,
        runner: str | None = "local",
        beam_args: list[str] | None = None,
        **runner_settings: object,
    ) -> None:
        owner = type(self).__name__
        check_runner_settings(self, runner, runner_settings)
        # NeMo Curator's own checks, in its words.
        if not assign_id and id_field is None:
            raise ValueError("id_field must be provided if assign_id is False")
        if assign_id and id_field is not None:
            raise ValueError("id_field must be None if assign_id is True")
        self.output_filetype = output_filetype or input_filetype
        file_formats(input_filetype), file_formats(self.output_filetype)
        if on_bad_record not in ("raise", "skip"):
            raise ValueError(f"on_bad_record must be 'raise' or 'skip', not {on_bad_record!r}")
        self.grouping = partition_grouping(owner, files_per_partition, input_blocksize)
        if input_path is not None:
            apply_storage_options(owner, read_kwargs=(input_path, read_kwargs))
        apply_storage_options(owner, write_kwargs=(output_path, write_kwargs))
        set_verbosity(verbose)
        self.input_path = input_path
        self.output_path = output_path.rstrip("/")
        self.cache_path = (cache_path or output_path).rstrip("/")
        self.input_filetype = input_filetype
        self.input_file_extensions = input_file_extensions
        self.input_extensions = input_extensions(input_filetype, input_file_extensions)
        self.text_field = text_field
        self.id_field = None if assign_id else id_field
        self.id_column = id_field or GENERATED_ID
        self.perform_removal = perform_removal
        self.on_bad_record = on_bad_record
        self.input_fingerprint = check_mode(input_fingerprint) or "stat"
        self.wait = wait
        self.clear_output = clear_output
        self.runner = {"runner": runner, "beam_args": list(beam_args or []), **runner_settings}
        self.hashes = f"{self.cache_path}/exact/hashes"
        self.duplicates = f"{self.output_path}/{DUPLICATES_FOLDER}"
        self.id_generator = f"{self.output_path}/{FILENAME}" if assign_id else None
        self.book = PhaseBook(
            f"{self.cache_path}/checkpoints/phases", BeamSettings(runner, list(beam_args or []), runner_settings),
            {"cache": self.cache_path, "output": self.output_path},
        )

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
        with self.book.timed("hashing"):
            hashed = self._hash()
        with self.book.timed("identification"):
            metadata = self._identify(hashed)
        metadata.update(num_documents=hashed["rows"], final_output_path=None, removal_time=0.0)
        for phase in ("hashing", "identification"):
            metadata[f"{phase}_time"] = self.book.times[phase]
        metadata["phases_run"] = list(self.book.ran)
        if self.perform_removal:
            removal = TextDuplicatesRemovalWorkflow(
                self.input_path, self.duplicates, f"{self.output_path}/deduplicated", self.cache_path,
                self.input_filetype, self.output_filetype, self.id_field, self.id_column,
                self.grouping["files_per_partition"], input_blocksize=self.grouping["blocksize"],
                input_file_extensions=self.input_file_extensions, input_fingerprint=self.input_fingerprint,
                on_bad_record=self.on_bad_record, **self.runner,
            ).run()
            metadata.update(removal, phases_run=[*metadata["phases_run"], *removal["phases_run"]])
        metadata["total_time"] = time.monotonic() - started
        if not metadata["phases_run"]:
            logger.info("exact dedup: nothing to do, every phase was complete with its outputs in place "
                        "(%s documents, %s duplicates)", metadata["num_documents"], metadata["num_duplicates"])
        else:
            logger.info("exact dedup finished in %.1f s: %s documents, %s duplicates, ids in %s",
                        metadata["total_time"], metadata["num_documents"], metadata["num_duplicates"], self.duplicates)
        return WorkflowResult(metadata)

    def _hash(self) -> dict[str, Any]:
        """Each input file a partition of its own, keyed by its fingerprint."""
        fields = [self.text_field, *filter(None, [self.id_field])]
        reading, id_column = id_reading_stages(
            self.input_path, self.input_filetype, 1, self.id_field, self.cache_path, fields, self.input_fingerprint,
            self.on_bad_record, self.input_extensions,
        )
        details = self.book.run_partitioned("hashing", [
            *reading, HashTextStage(self.text_field, id_column), HashesWriter(self.hashes),
        ], f"{self.cache_path}/checkpoints/hashing", [self.text_field, self.id_field, "md5"], self.hashes)
        if not details["rows"]:  # every record was skipped as bad
            self.book.forget("hashing")
            raise CuratorInputError(f"input {self.input_path!r} holds no records to deduplicate")
        return details

    def _identify(self, hashed: dict[str, Any]) -> dict[str, Any]:
        """Reused while the digests and the id column stay the same, so that a
        rerun rewrites nothing (and removal, keyed on the ids, is skipped too)."""
        buckets = bucket_count(hashed["rows"])
        key = digest([hashed["fingerprint"], buckets, self.id_column, self.id_generator])
        if self.book.is_done("identification", key):
            logger.info("identification: digests unchanged, reusing %s", self.duplicates)
            return dict(self.book.details("identification")["results"])
        checkpoint = f"{self.cache_path}/checkpoints/identification"
        if not self.book.is_done("identification-started", key):  # new digests: drop the old lists
            for stale in (self.duplicates, checkpoint):
                remove_tree(stale)
            self.book.mark_done("identification-started", key)
        self.book.run_stages("identification", [
            ListIdBucketsStage(buckets),
            DuplicateIdsStage(self.hashes, buckets, self.id_column),
            BucketWriter(self.duplicates, DUPLICATE_IDS_STEM),
        ], checkpoint)
        if self.id_generator:
            write_id_generator(self.hashes, self.id_generator)
        count = sum(parquet_metadata(url).num_rows for url in parquet_files(self.duplicates))
        results = {"num_duplicates": count, "duplicates_path": self.duplicates, "id_generator_path": self.id_generator}
        logger.info("identified %d exact duplicates", count)
        self.book.mark_done("identification", key, [self.duplicates, *filter(None, [self.id_generator])],
                            results=results)
        return dict(results)
