"""``FuzzyDeduplicationWorkflow``: NeMo Curator's MinHash LSH deduplication, resumable.

Phases, each recorded in the cache's phase book (fingerprint of inputs and
settings, files produced, checked on every rerun), laid out as NeMo Curator
lays out its cache:

1. ``minhash``: per input file (a checkpointed partition keyed by the file's
   fingerprint), each document's signature into ``<cache>/MinHashStage/``;
2. ``lsh``: the band keys of each group of signature files (``BAND_KEY_RECORDS``)
   sorted by the task that reads them (``<cache>/fuzzy/band_keys/``, removed
   once the phase is done), then
   one task per (band range of ``bands_per_iteration`` bands, partition), the
   buckets of two or more documents into
   ``<cache>/LSHStage/band_<i>-band_<j>/part.<p>.parquet``;
3. ``edges``: one task per bucket file, into ``<cache>/BucketsToEdgesStage/``;
4. ``connected_components``: ``<cache>/ConnectedComponentsStage/part.<n>.parquet``
   (id, ``_duplicate_group_id``: the least id of its component), in memory
   (scipy) when the graph fits the memory bound measured on a sample of its
   edges (``dedup/fuzzy/memory_bound.py``); else by rounds of large-star
   and small-star steps, each a Beam pipeline over the edges bucketed by id
   (``<cache>/fuzzy/star_rounds/round_<r>/``) and a phase of its own
   (``star-round-<r>``), until a round finds the graph settled into stars;
5. ``identification``: per components file, every id but its group's least into
   ``<output>/FuzzyDuplicateIds/part.<n>.parquet``, and with generated ids
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
import pyarrow.compute as pc
import pyarrow.parquet as pq

from beam_curator.dedup.fuzzy.lsh import component_groups
from beam_curator.dedup.fuzzy.memory_bound import SAMPLE_EDGES, in_memory_edge_limit, memory_plan
from beam_curator.dedup.fuzzy.minhash import permutation_seeds
from beam_curator.checkpoint.files import relative_name
from beam_curator.errors import CuratorError
from beam_curator.stages.io.parquet import parquet_files, parquet_metadata, read_parquet
from beam_curator.writing import write_atomically
from beam_curator.workflows.exact.id_generator import write_id_generator
from beam_curator.workflows.fuzzy.stages import (
    GROUP_FIELD,
    BandKeysStage,
    SETTLED,
    BucketEdgesStage,
    LaterMembersStage,
    LSHBucketsStage,
    MinHashStage,
    RoundWriter,
    ScatterEdgesStage,
    StarLabelsStage,
    StarRoundStage,
    file_groups,
)
from beam_curator.workflows.per_file import PerFileDeduplication
from beam_curator.workflows.phases import FeederStep, digest, files_below
from beam_curator.workflows.semantic.id_check import BucketWriter, ListIdBucketsStage
from beam_curator.workflows.parameters import check_positive_integers, check_runner_settings, settings_checked
from beam_curator.workflows.semantic.workflow import WorkflowResult

logger = logging.getLogger(__name__)

DUPLICATES_FOLDER = "FuzzyDuplicateIds"  # NeMo Curator's names
ID_GENERATOR_FILENAME = "fuzzy_id_generator.json"
# (key, id) records an LSH task holds: 64 bytes each at NeMo's 13 minhashes per band, about 200 while
# bucketing them (a task at this bound peaks 1.9 GB above the process: bench/bench_fuzzy_scale.py --lsh-bound).
RECORDS_PER_PARTITION = 1 << 23
# The (key, id) records of one band range a band-key task holds and sorts (its group of signature files):
# each LSH task finds its records in a row group or two of a band-key file while the partitions per band
# range stay below BAND_KEY_RECORDS / ROWS_PER_GROUP (64, reached at about 107M documents).
BAND_KEY_RECORDS = 1 << 22
# The rows of a star round's task are bounded by ROWS_PER_BATCH (stages.py), its buckets sized from this.
MAX_STAR_ROUNDS = 200
PHASES = ("minhash", "lsh", "edges", "connected_components", "identification", "removal")


class FuzzyDeduplicationWorkflow(PerFileDeduplication):
    """Near-duplicate texts (MinHash of character n-grams, LSH, connected
    components) found and, with ``perform_removal``, removed.

    Parameters are NeMo Curator's, in its order (``cache_path`` first) and with
    its defaults; ``lsh_num_output_partitions`` sets the LSH partitions (default:
    as many as keep a task under ``RECORDS_PER_PARTITION`` records). Ours beside
    NeMo's: ``in_memory_components_bytes`` (the memory connected components may
    take in this process, default half of what is available; a graph that needs
    more goes by star rounds on Beam, and 0 sends every graph there), ``id_field`` (default: generate ids into ``_curator_dedup_id``, as
    NeMo Curator always does), ``files_per_partition`` (removal's grouping instead
    of ``input_blocksize``; minhashing reads one file per partition, a larger one in blocks), ``output_filetype``, ``on_bad_record``,
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
        in_memory_components_bytes: int | None = None,
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
        check_positive_integers(num_bands=num_bands, minhashes_per_band=minhashes_per_band, char_ngrams=char_ngrams)
        check_positive_integers(lsh_num_output_partitions=lsh_num_output_partitions, unset_allowed=True)
        if bands_per_iteration < 1 or bands_per_iteration > num_bands:  # NeMo Curator's words, then the values
            raise ValueError(f"bands_per_iteration must be between [1, num_bands], got {bands_per_iteration!r} "
                             f"with num_bands={num_bands}")
        if char_ngrams < 20:  # NeMo Curator's warning
            logger.warning("char_ngrams=%d: a value below 20 may give many (about 5%%) false positives", char_ngrams)
        if in_memory_components_bytes is not None and in_memory_components_bytes < 0:
            raise ValueError(f"in_memory_components_bytes must be 0 or more, not {in_memory_components_bytes}")
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
        self.in_memory_components_bytes = in_memory_components_bytes
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
        signature_files = parquet_files(self.minhashes)
        recorded = hashed.get("file_rows", {})  # a marker of an earlier version has none: count from the footers
        rows = [recorded.get(relative_name(self.minhashes, url)) for url in signature_files]
        rows = [parquet_metadata(url).num_rows if count is None else count for url, count in zip(signature_files, rows)]
        groups = file_groups(signature_files, rows, BAND_KEY_RECORDS // self.bands_per_iteration)
        band_keys = f"{self.cache_path}/fuzzy/band_keys"
        feeder = FeederStep("lsh-band-keys", [
            ListIdBucketsStage(len(groups)),
            BandKeysStage(groups, self.id_column, ranges, self.minhashes_per_band, partitions, band_keys),
        ], f"{self.cache_path}/checkpoints/lsh-band-keys", band_keys)
        stages = [
            ListIdBucketsStage(len(ranges) * partitions),
            LSHBucketsStage(band_keys, self.id_column, ranges, partitions),
            BucketWriter(self.buckets, "{bucket}", unit="bucket"),
        ]

        def counted() -> dict[str, Any]:
            count = sum(parquet_metadata(url).num_rows for url in files_below(self.buckets))
            logger.info("lsh: %d buckets of two or more documents", count)
            return {"buckets": count, "fingerprint": key}

        return self.book.run_afresh("lsh", key, stages, f"{self.cache_path}/checkpoints/lsh", [self.buckets], counted,
                                    feeder)

    def _edges(self, lsh: dict[str, Any]) -> dict[str, Any]:
        files = files_below(self.buckets)
        names = [url[len(self.buckets) + 1:].rsplit(".", 1)[0] for url in files]
        stages = [ListIdBucketsStage(len(files)), BucketEdgesStage(files, names, self.id_column),
                  BucketWriter(self.edges, "{bucket}", unit="edge")]
        key = lsh["fingerprint"]

        def counted() -> dict[str, Any]:
            return {"edges": sum(parquet_metadata(url).num_rows for url in files_below(self.edges)), "fingerprint": key}

        return self.book.run_afresh("edges", key, stages, f"{self.cache_path}/checkpoints/edges", [self.edges], counted)

    def _connected_components(self, edges: dict[str, Any]) -> dict[str, Any]:
        """In memory when the graph fits the bound measured on its first edges, else by star rounds on Beam;
        a rerun reuses what either found (the memory at hand may differ from the last run's)."""
        parts = max(1, -(-2 * edges["edges"] // RECORDS_PER_PARTITION))
        star_key = digest([edges["fingerprint"], parts])
        for key in (edges["fingerprint"], star_key):
            if self.book.is_done("connected_components", key):
                logger.info("connected_components: inputs unchanged, reusing %s", self.components)
                return dict(self.book.details("connected_components")["results"])
        sample = self._edge_sample()
        limit, per_edge = in_memory_edge_limit(sample.column(0).combine_chunks(), sample.column(1).combine_chunks(),
                                               self.in_memory_components_bytes)
        logger.info("connected components: %s", memory_plan(edges["edges"], limit, per_edge))
        if edges["edges"] > limit:
            return self._star_rounds(star_key, parts)

        def components() -> dict[str, Any]:
            table = pa.concat_tables([read_parquet(url) for url in files_below(self.edges)])
            vertices, groups = component_groups(table.column(0).combine_chunks(), table.column(1).combine_chunks())
            found = pa.table({self.id_column: vertices, GROUP_FIELD: groups})
            write_atomically(f"{self.components}/part.0.parquet", lambda handle: pq.write_table(found, handle))
            logger.info("connected components (in memory): %d documents on an edge", len(vertices))
            return {"fingerprint": edges["fingerprint"], "parts": 1}

        return self.book.run_afresh("connected_components", edges["fingerprint"], [], None, [self.components],
                                    components)

    def _edge_sample(self) -> pa.Table:
        """The first ``SAMPLE_EDGES`` edges (all of a smaller graph), for measuring the memory per edge."""
        tables, rows = [], 0
        for url in files_below(self.edges):
            tables.append(read_parquet(url))
            rows += tables[-1].num_rows
            if rows >= SAMPLE_EDGES:
                break
        return pa.concat_tables(tables).slice(0, SAMPLE_EDGES)

    def _star_rounds(self, key: str, parts: int) -> dict[str, Any]:
        """Large-star and small-star steps in turn (``dedup/fuzzy/components.py``),
        each round a Beam pipeline of one task per id bucket (``parts``) and a
        phase of its own in the book, until a round finds its input settled into stars."""
        rounds = f"{self.cache_path}/fuzzy/star_rounds"
        files = files_below(self.edges)
        previous = self._round(0, key, [ListIdBucketsStage(len(files)), ScatterEdgesStage(files, parts)], rounds)
        for number in range(1, MAX_STAR_ROUNDS + 1):
            folder = f"{rounds}/round_{number}"  # the step writes its own file: its output streams out in batches
            current = self._round(number, key, [
                ListIdBucketsStage(parts), StarRoundStage(previous, number % 2 == 1, parts, folder)], rounds)
            if all(pc.all(read_parquet(url, [SETTLED])[SETTLED]).as_py() is not False for url in parquet_files(current)):
                logger.info("connected components: settled after %d star rounds", number)
                break
            previous = current
        else:
            raise CuratorError(f"connected components did not settle in {MAX_STAR_ROUNDS} star rounds")
        checkpoint = f"{self.cache_path}/checkpoints/connected_components"
        self.book.run_afresh("connected_components", key, [
            ListIdBucketsStage(parts), StarLabelsStage(previous, self.id_column),
            BucketWriter(self.components, "part.{bucket}")], checkpoint, [self.components],
            lambda: {"fingerprint": key, "parts": parts})
        return dict(self.book.details("connected_components")["results"])

    def _round(self, number: int, key: str, stages: list, rounds: str) -> str:
        """One star round (0: the edges scattered to their keys' buckets), resumable on its own."""
        folder = f"{rounds}/round_{number}"
        writer = [] if isinstance(stages[-1], StarRoundStage) else [RoundWriter(folder, "part.{bucket}")]
        self.book.run_afresh(f"star-round-{number}", digest([key, number]), [*stages, *writer],
                             f"{self.cache_path}/checkpoints/star_rounds/{number}", [folder], dict)
        return folder

    def _identify(self, components: dict[str, Any]) -> dict[str, Any]:
        """Per components file, every id but its group's least."""
        def identified() -> dict[str, Any]:
            if self.id_generator:
                write_id_generator(self.minhashes, self.id_generator)
            count = sum(parquet_metadata(url).num_rows for url in parquet_files(self.duplicates))
            logger.info("identified %d fuzzy duplicates", count)
            return {"num_duplicates": count, "duplicates_path": self.duplicates, "id_generator_path": self.id_generator}

        key = digest([components["fingerprint"], components["parts"], self.id_generator])
        stages = [ListIdBucketsStage(components["parts"]), LaterMembersStage(self.components, self.id_column),
                  BucketWriter(self.duplicates, "part.{bucket}")]
        return self.book.run_afresh("identification", key, stages, f"{self.cache_path}/checkpoints/identification",
                                    [self.duplicates, *filter(None, [self.id_generator])], identified)

    def _write_ids(self, table: pa.Table) -> None:
        write_atomically(f"{self.duplicates}/part.0.parquet", lambda handle: pq.write_table(table, handle))
