"""``beam-curator filter``: heuristic filters and modifiers from a YAML file in NeMo Curator's layout,
or a preset, over JSONL or parquet files, written in the input's format with all its fields."""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING

from beam_curator.cli.flags import EXAMPLES, HelpFormatter, add_data_flags, add_runner_flags, runner_settings
from beam_curator.cli.summary import summary_start
from beam_curator.configs import PRESETS

if TYPE_CHECKING:
    from beam_curator.running.summary import RunSummary
    from beam_curator.stages.base import ProcessingStage

PIPELINE_NAME = "filter"


def add_filter(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        "filter", formatter_class=HelpFormatter, epilog=EXAMPLES,
        help="heuristic filters and modifiers (NeMo Curator's, datatrove's Gopher, C4, FineWeb) from a YAML file or a preset",
        description=textwrap.fill(
            "Run the filters and modifiers a YAML file lists (NeMo Curator's layout: its pipeline files run as they "
            "are, their nemo_curator targets read as beam_curator's) or a preset's, and write the documents kept, "
            "with all their fields, in the input's format to --output. Every target and parameter is checked "
            "before any work. Each input file is a checkpointed partition: interrupt the run and rerun the same "
            "command to resume; a rerun skips the complete ones.", 80),
    )
    add_data_flags(command, "where the documents kept go, in the input's format",
                   "where the checkpoint goes, in checkpoints/filter (default: --output)",
                   "to filter (default: the file's text_field value, else text)", ids=False)
    command.set_defaults(text_field=None)  # unset: the file's own text_field stands
    chosen = command.add_argument_group("filters (one of)").add_mutually_exclusive_group(required=True)
    chosen.add_argument("--config", help="a YAML file listing the stages under stages:, as NeMo Curator's "
                        "config/text/*_pipeline.yaml")
    chosen.add_argument("--preset", choices=PRESETS, help="a shipped set: nemo-heuristic-en (NeMo Curator's English "
                        "heuristics), gopher, c4, fineweb (datatrove's rules at its defaults)")
    add_runner_flags(command)
    command.set_defaults(handler=run_filter, parser=command)


def run_filter(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.configs import load_filter_config, preset_path
    from beam_curator.pipeline import Pipeline
    from beam_curator.workflows.semantic.preflight import checked_text_input
    from beam_curator.workflows.semantic.removal import file_formats

    values = {"input_path": args.input, "output_path": args.output}
    if args.text_field is not None:
        values["text_field"] = args.text_field
    config = load_filter_config(args.config or preset_path(args.preset), values)  # every check, before any work
    reader, writer = file_formats(args.input_filetype)
    reading = {"files_per_partition": args.files_per_partition, "on_bad_record": args.on_bad_record,
               **config.reader_settings}
    if "blocksize" in config.reader_settings and "files_per_partition" not in config.reader_settings:
        del reading["files_per_partition"]  # the file's blocksize groups the files instead
    cache = args.cache or args.output
    folders = {"output_path": args.output, "cache_path": cache}
    with checked_text_input(args.input, folders, reader.extensions, args.input_filetype,
                            config.values.get("text_field", "text"), None, args.on_bad_record, False, args.wait):
        stages = [reader(args.input, **reading), *config.stages, writer(args.output, **config.writer_settings)]
        summary = Pipeline(PIPELINE_NAME, stages=stages).run(checkpoint_path=f"{cache.rstrip('/')}/checkpoints/filter",
                                                             **runner_settings(args, beam_args))
    print(filter_summary(summary, stages, config.path, args.output))
    return 0


def filter_summary(summary: RunSummary, stages: list[ProcessingStage], config_path: str, output: str) -> str:
    """This run's partitions, documents in and kept, then each stage's documents in, kept and
    dropped (from the counters every stage keeps), time, and where the results are."""
    counters = summary.counters
    source, *steps, sink = stages
    lines, row = summary_start("filter summary", {"num_documents": counters.get(f"{source.reader.stage_name}.items_out", 0)})
    kept = counters.get(f"{sink.stage_name}.items_in", 0)
    row("kept", kept)
    row("dropped", counters.get(f"{source.reader.stage_name}.items_out", 0) - kept)
    row("this run", f"{summary.partitions_completed} partition(s) filtered, {summary.partitions_skipped} skipped as "
                    "complete (their documents are not counted above)" if summary.partitions_skipped else
                    f"{summary.partitions_completed} partition(s) filtered")
    row("per stage", "documents in / kept / dropped")
    for name in dict.fromkeys(stage.stage_name for stage in steps):  # a name used twice shares its counters
        seen, passed = counters.get(f"{name}.items_in", 0), counters.get(f"{name}.items_out", 0)
        lines.append(f"    {name:<30} {seen:>9} {passed:>9} {seen - passed:>9}")
    row("time (s)", f"{summary.seconds:.1f}")
    row("filters", config_path)
    row("filtered data", output)
    return "\n".join(lines)
