"""``FuzzyDeduplicationWorkflow``: NeMo Curator's MinHash LSH deduplication, resumable.

Phases, each recorded in the cache's phase book (fingerprint of inputs and
settings, files produced, checked on every rerun), laid out as NeMo Curator
lays out its cache:

1. ``minhash``: per input file (a checkpointed partition keyed by the file's
   fingerprint), each document's signature into ``<cache>/MinHashStage/``;
2. ``lsh``: one task per (band range of ``bands_per_iteration`` bands,
   partition), the buckets of two or more documents into
   ``<cache>/LSHStage/band_<i>-band_<j>/part.<p>.parquet``;
3. ``edges``: one task per bucket file, into ``<cache>/BucketsToEdgesStage/``;
4. ``connected_components``: ``<cache>/ConnectedComponentsStage/part.0.parquet``
   (id, ``_duplicate_group_id``), in memory: two int64 per edge and per
   document on an edge; above ``IN_MEMORY_EDGES`` edges the run stops with an
   error rather than exhaust memory (distributed label propagation is not done yet);
5. ``identification``: every document of a group but the least id into
   ``<output>/FuzzyDuplicateIds/part.0.parquet``, and with generated ids
   ``<output>/fuzzy_id_generator.json``;
6. ``removal`` (``perform_removal=True``): the input minus those ids, into
   ``<output>/deduplicated/``, by ``TextDuplicatesRemovalWorkflow``.

With no bucket of two documents, phases 3 to 5 write nothing (NeMo Curator's
layout then has no such folders) and ``num_duplicates`` is 0.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from beam_curator.dedup.fuzzy.lsh import component_labels, removal_ids
from beam_curator.dedup.fuzzy.minhash import permutation_seeds
from beam_curator.errors import CuratorError
from beam_curator.writing import write_atomically
from beam_curator.workflows.exact.id_generator import write_id_generator
from beam_curator.workflows.fuzzy.stages import GROUP_FIELD, BucketEdgesStage, LSHBucketsStage, MinHashStage
from beam_curator.workflows.per_file import PerFileDeduplication
from beam_curator.workflows.semantic.id_check import BucketWriter, ListIdBucketsStage
from beam_curator.workflows.semantic.layout import parquet_metadata, read_parquet
from beam_curator.workflows.semantic.parameters import check_runner_settings, settings_checked
from beam_curator.workflows.semantic.phases import digest, files_below
from beam_curator.workflows.semantic.workflow import WorkflowResult

logger = logging.getLogger(__name__)

DUPLICATES_FOLDER = "FuzzyDuplicateIds"  # NeMo Curator's names
ID_GENERATOR_FILENAME = "fuzzy_id_generator.json"
# (key, id) records an LSH task holds (about 400 MB at NeMo's 13 minhashes per band).
RECORDS_PER_PARTITION = 1 << 23
# Edges the connected components phase holds in memory (about 1.5 GB with its vertices).
IN_MEMORY_EDGES = 50_000_000
PHASES = ("minhash", "lsh", "edges", "connected_components", "identification", "removal")


class FuzzyDeduplicationWorkflow(PerFileDeduplication):
    """Near-duplicate texts (MinHash of character n-grams, LSH, connected
    components) found and, with ``perform_removal``, removed.

    Parameters are NeMo Curator's, in its order (``cache_path`` first) and with
    its defaults; ``lsh_num_output_partitions`` sets the LSH partitions (default:
    as many as keep a task under ``RECORDS_PER_PARTITION`` records). Ours beside
    NeMo's: ``id_field`` (default: generate ids into ``_curator_dedup_id``, as
    NeMo Curator always does), ``files_per_partition`` (removal's grouping instead
    of ``input_blocksize``; minhashing reads one file per partition), ``output_filetype``, ``on_bad_record``,
    ``input_fingerprint``, ``wait``, ``clear_output``, ``verbose`` and the
    runner settings, as in the other workflows.
    """

    @settings_checked
    def __init__(
        self,
        cache_path: str,
        output_path: str,
        input_path: str | list[str] | None = None,
        input_filetype: str = "parquet",
        input_blocksize: int | str | None = "1GiB",
        input_file_extensions: list[str] | None = None,
        read_kwargs: dict[str, Any] | None = None,
        cache_kwargs: dict[str, Any] | None = None,
        write_kwargs: dict[str, Any] | None = None,
        text_field: str = "text",
        perform_removal: bool = False,
        seed: int = 42,
        char_ngrams: int = 24,
        num_bands: int = 20,
        minhashes_per_band: int = 13,
        use_64_bit_hash: bool = False,
        bands_per_iteration: int = 5,
        lsh_num_output_partitions: int | None = None,
        id_field: str | None = None,
        files_per_partition: int | None = None,
        output_filetype: str | None = None,
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
        if char_ngrams < 20:  # NeMo Curator's warning
            logger.warning("char_ngrams=%d: a value below 20 may give many (about 5%%) false positives", char_ngrams)
        if bands_per_iteration < 1 or bands_per_iteration > num_bands:
            raise ValueError("bands_per_iteration must be between [1, num_bands]")
        if char_ngrams < 1 or minhashes_per_band < 1 or (lsh_num_output_partitions or 1) < 1:
            raise ValueError("char_ngrams, minhashes_per_band and lsh_num_output_partitions must be positive")
        self._configure(
            output_path=output_path, cache_path=cache_path, input_path=input_path, input_filetype=input_filetype,
            output_filetype=output_filetype, input_file_extensions=input_file_extensions, text_field=text_field,
            id_field=id_field, perform_removal=perform_removal, files_per_partition=files_per_partition,
            # Removal groups input files by NeMo's input_blocksize, or by our files_per_partition when given.
            input_blocksize=None if files_per_partition else input_blocksize, on_bad_record=on_bad_record,
            input_fingerprint=input_fingerprint, wait=wait, clear_output=clear_output, verbose=verbose, runner=runner,
            beam_args=beam_args, runner_settings=runner_settings, read_kwargs=(input_path, read_kwargs),
            cache_kwargs=(cache_path, cache_kwargs), write_kwargs=(output_path, write_kwargs),
        )
        self.minhash_settings = {"seed": seed, "char_ngrams": char_ngrams, "num_hashes": num_bands * minhashes_per_band,
                                 "use_64_bit_hash": use_64_bit_hash}
        self.num_bands = num_bands
        self.minhashes_per_band = minhashes_per_band
        self.bands_per_iteration = bands_per_iteration
        self.partitions = lsh_num_output_partitions
        self.minhashes = f"{self.cache_path}/MinHashStage"
        self.buckets = f"{self.cache_path}/LSHStage"
        self.edges = f"{self.cache_path}/BucketsToEdgesStage"
        self.components = f"{self.cache_path}/ConnectedComponentsStage"
        self.duplicates = f"{self.output_path}/{DUPLICATES_FOLDER}"
        self.id_generator = None if id_field else f"{self.output_path}/{ID_GENERATOR_FILENAME}"

    def _run_phases(self, started: float) -> WorkflowResult:
        with self.book.timed("minhash"):
            hashed = self._minhash()
        with self.book.timed("lsh"):
            lsh = self._lsh(hashed)
        metadata: dict[str, Any] = {"num_documents": hashed["rows"], "num_duplicates": 0, "duplicates_path": None,
                                    "id_generator_path": None, "final_output_path": None, "removal_time": 0.0}
        if lsh["buckets"]:
            with self.book.timed("edges"):
                edges = self._edges(lsh)
            with self.book.timed("connected_components"):
                components = self._connected_components(edges)
            with self.book.timed("identification"):
                metadata.update(self._identify(components))
        else:
            logger.info("no bucket holds two documents: no fuzzy duplicates")
        for phase in PHASES[:-1]:
            metadata[f"{phase}_time"] = self.book.times.get(phase, 0.0)
        if self.perform_removal and not metadata["duplicates_path"]:  # an empty list, for removal to read
            self._write_ids(pa.table({self.id_column: pa.array([], pa.null() if self.id_field else pa.int64())}))
            metadata["duplicates_path"] = self.duplicates
        return self._finish(metadata, started, "fuzzy dedup")

    def _minhash(self) -> dict[str, Any]:
        """Each input file a partition of its own, keyed by its fingerprint."""
        settings = self.minhash_settings
        seeds = permutation_seeds(settings["num_hashes"], settings["seed"], 64 if settings["use_64_bit_hash"] else 32)
        stage = MinHashStage(self.text_field, self.id_column, seeds, settings["char_ngrams"])
        return self._per_file_phase("minhash", stage, self.minhashes, [self.text_field, self.id_field, settings])

    def _lsh(self, hashed: dict[str, Any]) -> dict[str, Any]:
        starts = range(0, self.num_bands, self.bands_per_iteration)
        ranges = [range(first, min(first + self.bands_per_iteration, self.num_bands)) for first in starts]
        partitions = self.partitions or max(1, -(-hashed["rows"] * self.bands_per_iteration // RECORDS_PER_PARTITION))
        key = digest([hashed["fingerprint"], self.num_bands, self.minhashes_per_band, self.bands_per_iteration,
                      partitions, self.id_column])
        stages = [
            ListIdBucketsStage(len(ranges) * partitions),
            LSHBucketsStage(self.minhashes, self.id_column, ranges, self.minhashes_per_band, partitions),
            BucketWriter(self.buckets, "{bucket}"),
        ]

        def counted() -> dict[str, Any]:
            count = sum(parquet_metadata(url).num_rows for url in files_below(self.buckets))
            logger.info("lsh: %d buckets of two or more documents", count)
            return {"buckets": count, "fingerprint": key}

        return self.book.run_afresh("lsh", key, stages, f"{self.cache_path}/checkpoints/lsh", [self.buckets], counted)

    def _edges(self, lsh: dict[str, Any]) -> dict[str, Any]:
        files = files_below(self.buckets)
        names = [url[len(self.buckets) + 1:].rsplit(".", 1)[0] for url in files]
        stages = [ListIdBucketsStage(len(files)), BucketEdgesStage(files, names, self.id_column),
                  BucketWriter(self.edges, "{bucket}")]
        key = lsh["fingerprint"]

        def counted() -> dict[str, Any]:
            return {"edges": sum(parquet_metadata(url).num_rows for url in files_below(self.edges)), "fingerprint": key}

        return self.book.run_afresh("edges", key, stages, f"{self.cache_path}/checkpoints/edges", [self.edges], counted)

    def _connected_components(self, edges: dict[str, Any]) -> dict[str, Any]:
        if edges["edges"] > IN_MEMORY_EDGES:
            raise CuratorError(
                f"{edges['edges']} edges: more than the {IN_MEMORY_EDGES} the in-memory connected components "
                "phase holds; raise num_bands' selectivity (more minhashes_per_band) or split the input"
            )

        def components() -> dict[str, Any]:
            tables = [read_parquet(url) for url in files_below(self.edges)]
            table = pa.concat_tables(tables)
            vertices, labels = component_labels(table.column(0).combine_chunks(), table.column(1).combine_chunks())
            found = pa.table({self.id_column: vertices, GROUP_FIELD: pa.array(labels.astype("int64"))})
            write_atomically(f"{self.components}/part.0.parquet", lambda handle: pq.write_table(found, handle))
            logger.info("connected components: %d documents in %d groups", len(vertices), int(labels.max()) + 1)
            return {"fingerprint": edges["fingerprint"]}

        return self.book.run_afresh("connected_components", edges["fingerprint"], [], None, [self.components], components)

    def _identify(self, components: dict[str, Any]) -> dict[str, Any]:
        def identified() -> dict[str, Any]:
            table = read_parquet(f"{self.components}/part.0.parquet")
            removed = removal_ids(table.column(0).combine_chunks(), table.column(GROUP_FIELD).to_numpy())
            self._write_ids(pa.table({self.id_column: removed}))
            if self.id_generator:
                write_id_generator(self.minhashes, self.id_generator)
            logger.info("identified %d fuzzy duplicates", len(removed))
            return {"num_duplicates": len(removed), "duplicates_path": self.duplicates,
                    "id_generator_path": self.id_generator}

        key = digest([components["fingerprint"], self.id_generator])
        return self.book.run_afresh("identification", key, [], None, [self.duplicates, *filter(None, [self.id_generator])],
                                    identified)

    def _write_ids(self, table: pa.Table) -> None:
        write_atomically(f"{self.duplicates}/part.0.parquet", lambda handle: pq.write_table(table, handle))
