"""``beam-curator langid``: each document's language (``LanguageIdentifier``), written in the
input's format, optionally one hive folder per language, resumably."""

from __future__ import annotations

import argparse
import textwrap
from collections import Counter

from beam_curator.cli.flags import EXAMPLES, HelpFormatter, add_logging_flags, add_runner_flags, runner_settings
from beam_curator.errors import ON_BAD_RECORD, CuratorError

LANGUAGE = "language"  # the field LanguageIdentifier writes, and the folders of --split


def add_langid(commands: argparse._SubParsersAction) -> None:
    langid = commands.add_parser(
        "langid", formatter_class=HelpFormatter, epilog=EXAMPLES,
        help="identify each document's language (offline models), keep some, split into one folder per language",
        description=textwrap.fill(
            "Write every document with its language (ISO 639-1 code, \"\" for an empty text) and language_score "
            "(0 to 1) to --output, in the input's format; --languages and --min-score keep only those documents; "
            "--split writes one folder per language, output/language=de/, which pyarrow, Spark and DuckDB read as a "
            "hive-partitioned dataset. Needs the langid extra: pip install \"beam-curator[langid]\". Checkpointed: "
            "interrupt the run and rerun the same command to resume; a changed input file is identified again.", 80),
    )
    add_logging_flags(langid, top_level=False)
    data = langid.add_argument_group("data")
    data.add_argument("--input", required=True, help="folder, glob or file of the input data")
    data.add_argument("--output", required=True, help="where the documents go, with their language")
    data.add_argument("--checkpoint", help="where the checkpoint goes (default: --output/.checkpoint)")
    data.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"],
                      help="format of the input files, and of the output")
    data.add_argument("--text-field", default="text", help="the field holding the text to identify")
    data.add_argument("--on-bad-record", default="raise", choices=ON_BAD_RECORD,
                      help="a malformed record or one missing a field: stop naming it, or skip and count it")
    data.add_argument("--files-per-partition", type=int, default=1, help="input files per checkpointed partition")
    kept = langid.add_argument_group("languages")
    kept.add_argument("--languages", type=lambda text: [code.strip() for code in text.split(",") if code.strip()],
                      help="keep only these languages, comma-separated codes such as en,de (default: every language)")
    kept.add_argument("--min-score", type=float, default=0.0, help="keep only documents scored at least this")
    kept.add_argument("--split", action="store_true",
                      help="write one folder per language, output/language=<code>/ (the field then lives in the "
                           "folder name, not in the files; an empty text's folder is __HIVE_DEFAULT_PARTITION__)")
    add_runner_flags(langid)
    langid.set_defaults(handler=run_langid, parser=langid)


def run_langid(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator import Pipeline
    from beam_curator.stages.io import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
    from beam_curator.stages.text.language import LanguageIdentifier
    from beam_curator.stages.text.language.identify import cascade

    try:
        cascade()  # before any work: the models, or the error naming the extra
    except ImportError as error:
        raise CuratorError(str(error)) from error
    reader, writer = {"jsonl": (JsonlReader, JsonlWriter), "parquet": (ParquetReader, ParquetWriter)}[args.input_filetype]
    output = args.output.rstrip("/")
    checkpoint = args.checkpoint or f"{output}/.checkpoint"
    pipeline = Pipeline("langid", stages=[
        reader(args.input, files_per_partition=args.files_per_partition, on_bad_record=args.on_bad_record,
               fingerprint="stat"),
        LanguageIdentifier(args.text_field, args.languages, args.min_score, language_field=LANGUAGE),
        writer(output, partition_cols=LANGUAGE if args.split else None),
    ])
    summary = pipeline.run(checkpoint_path=checkpoint, **runner_settings(args, beam_args))
    counts = documents_per_language(checkpoint, output, args.split, args.input_filetype)
    print(langid_summary(summary.partitions_completed, summary.partitions_skipped, counts, output))
    return 0


def documents_per_language(checkpoint: str, output: str, split: bool, filetype: str) -> Counter:
    """The documents written by every complete partition, this run's and earlier runs', per language
    (None for an empty text's folder). Split, the checkpoint's records say it (the folder, the
    records of each file) without reading a file; otherwise each file's language column is read."""
    from beam_curator.checkpoint import open_store
    from beam_curator.stages.io import JsonlReaderStage, ParquetReaderStage
    from beam_curator.stages.io.hive import partition_values

    snapshot = open_store(checkpoint).snapshot()
    read = {"jsonl": JsonlReaderStage, "parquet": ParquetReaderStage}[filetype](fields=[LANGUAGE]).read_file
    counts: Counter = Counter()
    for key in snapshot.completed():
        for candidates in snapshot.outputs.get(key, {}).values():
            for name, _, records in candidates[-1]:  # the latest write of the task
                if split:
                    counts[partition_values(f"{output}/{name}", [output])[LANGUAGE]] += records
                else:
                    counts.update(read(f"{output}/{name}").table.column(LANGUAGE).to_pylist())
    return counts


def langid_summary(completed: int, skipped: int, counts: Counter, output: str) -> str:
    """What this run did, the documents written per language (most first), where they are."""
    lines = ["", "language identification summary"]

    def row(name: str, value: object) -> None:
        lines.append(f"  {name:<16} {value}")

    row("this run", f"{completed} partition(s) identified, {skipped} complete before" if completed else
        "nothing to do: every partition was complete with its outputs in place (the counts below are from then)")
    row("documents out", sum(counts.values()))
    for language, count in sorted(counts.items(), key=lambda item: (-item[1], item[0] or "")):
        row(f"  {language or '(empty text)'}", count)
    row("output", output)
    return "\n".join(lines)
