"""``beam-curator fuzzy``: fuzzy deduplication (MinHash LSH, as NeMo Curator)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from beam_curator.cli.flags import EXAMPLES, HelpFormatter, add_data_flags, add_runner_flags, runner_settings
from beam_curator.cli.summary import duplicates_summary


def add_fuzzy(commands: argparse._SubParsersAction) -> None:
    fuzzy = commands.add_parser(
        "fuzzy", formatter_class=HelpFormatter, epilog=EXAMPLES,
        help="fuzzy deduplication (MinHash LSH, as NeMo Curator) of JSONL or parquet text files",
        description=textwrap.fill(
            "MinHash every document's character n-grams, bucket the signatures by LSH bands, join documents "
            "sharing a bucket into groups (connected components), list all of each group but one in "
            "FuzzyDuplicateIds/, and write the input without them to deduplicated/. Every phase is checkpointed: "
            "interrupt the run and rerun the same command to resume.", 80),
    )
    add_data_flags(fuzzy, "where FuzzyDuplicateIds/, fuzzy_id_generator.json and deduplicated/ go",
                   "where signatures, buckets, edges, components and checkpoints go (default: --output)",
                   "to compare")
    lsh = fuzzy.add_argument_group("minhash and LSH (NeMo Curator's defaults)")
    lsh.add_argument("--char-ngrams", type=int, default=24, help="characters per n-gram")
    lsh.add_argument("--num-bands", type=int, default=20, help="LSH bands")
    lsh.add_argument("--minhashes-per-band", type=int, default=13, help="minhashes per band")
    lsh.add_argument("--seed", type=int, default=42, help="seed of the hash permutations")
    lsh.add_argument("--use-64-bit-hash", action="store_true", help="64-bit MurmurHash3 and minhashes")
    lsh.add_argument("--bands-per-iteration", type=int, default=5, help="bands bucketed per LSH pass")
    lsh.add_argument("--lsh-num-output-partitions", type=int,
                     help="LSH partitions per pass (default: enough for a bounded task)")
    fuzzy.add_argument("--in-memory-components-bytes", type=int,
                       help="memory connected components may take in this process (default: half of what is "
                            "available); a graph measured to need more goes by star rounds on the runner, 0: always")
    fuzzy.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    add_runner_flags(fuzzy)
    fuzzy.set_defaults(handler=run_fuzzy, parser=fuzzy)


def run_fuzzy(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import FuzzyDeduplicationWorkflow

    workflow = FuzzyDeduplicationWorkflow(
        cache_path=args.cache or args.output, output_path=args.output, input_path=args.input,
        input_filetype=args.input_filetype, input_blocksize=None, text_field=args.text_field, id_field=args.id_field,
        on_bad_record=args.on_bad_record, files_per_partition=args.files_per_partition,
        perform_removal=not args.no_removal, seed=args.seed, char_ngrams=args.char_ngrams, num_bands=args.num_bands,
        minhashes_per_band=args.minhashes_per_band, use_64_bit_hash=args.use_64_bit_hash,
        bands_per_iteration=args.bands_per_iteration, lsh_num_output_partitions=args.lsh_num_output_partitions,
        in_memory_components_bytes=args.in_memory_components_bytes, wait=args.wait, **runner_settings(args, beam_args),
    )
    print(fuzzy_summary(workflow.run().metadata))
    return 0


def fuzzy_summary(metadata: dict[str, Any]) -> str:
    """Documents in, fuzzy duplicates found, removed and kept, time per phase, where the results are."""
    from beam_curator.workflows.fuzzy.workflow import PHASES

    return duplicates_summary("fuzzy deduplication summary", metadata,
                              "all documents of each group of near-copies but the least id", PHASES)
