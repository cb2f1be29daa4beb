"""``ExactDeduplicationWorkflow``: NeMo Curator's exact deduplication, resumable.

Three phases, each recorded in the cache's phase book (fingerprint of inputs
and settings, files produced, checked on every rerun):

1. ``hashing``: per input file (a checkpointed partition keyed by the file's
   fingerprint), the md5 of each text with the document's id;
2. ``identification``: one task per digest range lists every copy but the
   kept one (the smallest id), into ``<output_path>/ExactDuplicateIds/``; with generated ids also
   ``<output_path>/exact_id_generator.json``;
3. ``removal`` (``perform_removal=True``): the input minus those ids, into
   ``<output_path>/deduplicated/``, by ``TextDuplicatesRemovalWorkflow``.

A rerun with nothing changed runs nothing; a changed, added or removed file
is hashed again alone and the later phases give what a fresh run gives.
"""

from __future__ import annotations

import logging
from typing import Any

from beam_curator.stages.io.parquet import parquet_files, parquet_metadata
from beam_curator.workflows.exact.hashing import HashTextStage
from beam_curator.workflows.exact.id_generator import FILENAME, write_id_generator
from beam_curator.workflows.exact.identification import (
    DUPLICATE_IDS_STEM,
    DuplicateIdsStage,
    bucket_count,
    kept_order,
)
from beam_curator.workflows.per_file import PerFileDeduplication
from beam_curator.workflows.phases import digest
from beam_curator.workflows.semantic.id_check import BucketWriter, ListIdBucketsStage
from beam_curator.workflows.parameters import check_runner_settings, settings_checked
from beam_curator.workflows.semantic.workflow import WorkflowResult

logger = logging.getLogger(__name__)

DUPLICATES_FOLDER = "ExactDuplicateIds"  # NeMo Curator's name


class ExactDeduplicationWorkflow(PerFileDeduplication):
    """Exact duplicates of ``text_field`` found and, with ``perform_removal``, removed.

    Parameters follow NeMo Curator's workflow of the same name (``output_path``
    first). ``assign_id=True`` generates ids into ``_curator_dedup_id``;
    ``assign_id=False`` uses the input's ``id_field``. ``input_blocksize`` groups
    input files for removal, and splits larger ones into blocks in every phase (hashing otherwise reads one file
    per partition, so that a changed file is hashed again alone). Ours beside NeMo's: ``cache_path``
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
        check_runner_settings(self, runner, runner_settings)
        # NeMo Curator's own checks, in its words.
        if not assign_id and id_field is None:
            raise ValueError("id_field must be provided if assign_id is False")
        if assign_id and id_field is not None:
            raise ValueError("id_field must be None if assign_id is True")
        self._configure(
            output_path=output_path, cache_path=cache_path or output_path, input_path=input_path,
            input_filetype=input_filetype, output_filetype=output_filetype, input_file_extensions=input_file_extensions,
            text_field=text_field, id_field=None if assign_id else id_field, perform_removal=perform_removal,
            files_per_partition=files_per_partition, input_blocksize=input_blocksize, on_bad_record=on_bad_record,
            input_fingerprint=input_fingerprint, wait=wait, clear_output=clear_output, verbose=verbose, runner=runner,
            beam_args=beam_args, runner_settings=runner_settings, read_kwargs=(input_path, read_kwargs),
            write_kwargs=(output_path, write_kwargs),
        )
        self.hashes = f"{self.cache_path}/exact/hashes"
        self.duplicates = f"{self.output_path}/{DUPLICATES_FOLDER}"
        self.id_generator = f"{self.output_path}/{FILENAME}" if assign_id else None

    def _run_phases(self, started: float) -> WorkflowResult:
        with self.book.timed("hashing"):
            hashed = self._hash()
        with self.book.timed("identification"):
            metadata = self._identify(hashed)
        metadata.update(num_documents=hashed["rows"], final_output_path=None, removal_time=0.0)
        for phase in ("hashing", "identification"):
            metadata[f"{phase}_time"] = self.book.times.get(phase, 0.0)
        return self._finish(metadata, started, "exact dedup")

    def _hash(self) -> dict[str, Any]:
        """Each input file a partition of its own, keyed by its fingerprint."""
        return self._per_file_phase("hashing", HashTextStage(self.text_field, self.id_column), self.hashes,
                                    [self.text_field, self.id_field, "md5"])

    def _identify(self, hashed: dict[str, Any]) -> dict[str, Any]:
        """Reused while the digests and the id column stay the same, so that a
        rerun rewrites nothing (and removal, keyed on the ids, is skipped too)."""
        buckets = bucket_count(hashed["rows"])
        key = digest([hashed["fingerprint"], buckets, self.id_column, self.id_generator, kept_order(self.id_column)])
        stages = [
            ListIdBucketsStage(buckets),
            DuplicateIdsStage(self.hashes, buckets, self.id_column),
            BucketWriter(self.duplicates, DUPLICATE_IDS_STEM),
        ]
        return self.book.run_afresh("identification", key, stages, f"{self.cache_path}/checkpoints/identification",
                                    [self.duplicates, *filter(None, [self.id_generator])], self._identified)

    def _identified(self) -> dict[str, Any]:
        if self.id_generator:
            write_id_generator(self.hashes, self.id_generator)
        count = sum(parquet_metadata(url).num_rows for url in parquet_files(self.duplicates))
        logger.info("identified %d exact duplicates", count)
        return {"num_duplicates": count, "duplicates_path": self.duplicates, "id_generator_path": self.id_generator}
