"""``beam-curator exact``: exact deduplication (md5 of each text)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from beam_curator.cli.flags import EXAMPLES, HelpFormatter, add_data_flags, add_runner_flags, runner_settings
from beam_curator.cli.summary import duplicates_summary


def add_exact(commands: argparse._SubParsersAction) -> None:
    exact = commands.add_parser(
        "exact", formatter_class=HelpFormatter, epilog=EXAMPLES,
        help="exact deduplication (md5 of each text) of JSONL or parquet text files",
        description=textwrap.fill(
            "Hash every document's text (md5, as NeMo Curator), list every copy of each text but the one kept (the "
            "smallest --id-field value; without --id-field, the first in input order: files by path, then rows) in "
            "ExactDuplicateIds/, and write the input without them to deduplicated/. Every phase is checkpointed: "
            "interrupt the run and rerun the same command to resume; a changed input file is hashed again alone.", 80),
    )
    add_data_flags(exact, "where ExactDuplicateIds/, exact_id_generator.json and deduplicated/ go",
                   "where digests and checkpoints go (default: under --output)", "to compare")
    exact.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    add_runner_flags(exact)
    exact.set_defaults(handler=run_exact, parser=exact)


def run_exact(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import ExactDeduplicationWorkflow

    workflow = ExactDeduplicationWorkflow(
        output_path=args.output, input_path=args.input, cache_path=args.cache, input_filetype=args.input_filetype,
        text_field=args.text_field, assign_id=args.id_field is None, id_field=args.id_field,
        on_bad_record=args.on_bad_record, files_per_partition=args.files_per_partition,
        perform_removal=not args.no_removal, wait=args.wait, **runner_settings(args, beam_args),
    )
    print(exact_summary(workflow.run().metadata, args.id_field))
    return 0


def exact_summary(metadata: dict[str, Any], id_field: str | None) -> str:
    """Documents in, exact duplicates found (and which copy of each text is kept: the
    smallest id, so with ``id_field`` the smallest of the user's ids), removed and kept,
    time per phase, where the results are."""
    kept = f"the smallest {id_field}" if id_field else "the first in input order, files by path then rows"
    return duplicates_summary("exact deduplication summary", metadata, f"every copy of each text but {kept}",
                              ("hashing", "identification", "removal"))
