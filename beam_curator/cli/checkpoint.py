"""``beam-curator checkpoint``: inspect or reset a checkpoint folder, or a job array's shards.

The workflows keep each phase's checkpoint in a subfolder named by a digest of
the phase's settings (``<cache>/checkpoints/embedding/<digest>``), so a path
holding no marks of its own stands for the checkpoints below it: ``status``
and ``reset`` act on each of those, naming it, rather than on an empty folder."""

from __future__ import annotations

import argparse
import sys
import textwrap

import fsspec

from beam_curator.cli.flags import HelpFormatter, add_logging_flags

# How deep below the given path checkpoints are looked for: <phase>/<digest> under <cache>/checkpoints.
_SEARCH_DEPTH = 2


def add_checkpoint(commands: argparse._SubParsersAction) -> None:
    checkpoint = commands.add_parser(
        "checkpoint", formatter_class=HelpFormatter, help="inspect or reset a checkpoint folder",
        description=textwrap.fill(
            "Show which partitions a checkpoint folder records as complete, or forget them all; for job arrays "
            "whose readers ran with shard=(index, count), show each shard's progress and which shards to submit "
            "again (exit status 1 while any is incomplete, 0 once all are complete). A folder holding no marks "
            "of its own (a workflow's <cache>/checkpoints/<phase>, whose checkpoint is in a subfolder named by "
            "its settings) stands for the checkpoints in its subfolders.", 80),
    )
    add_logging_flags(checkpoint, top_level=False)
    checkpoint.add_argument("action", choices=["status", "reset", "shards"],
                            help="status: what is recorded; reset: forget it; shards: progress per shard")
    checkpoint.add_argument("path", help="the checkpoint_path the pipeline ran with")
    checkpoint.add_argument("--force", action="store_true", help="reset even if a writer seems alive")
    shards = checkpoint.add_argument_group("shards (the input as the sharded runs read it)")
    shards.add_argument("--count", type=int, help="how many shards the runs were split into")
    shards.add_argument("--input", help="folder, glob or file of the input data")
    shards.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"], help="format of the input files")
    shards.add_argument("--files-per-partition", type=int, default=1, help="input files per checkpointed partition")
    shards.add_argument("--fingerprint", choices=["stat", "content"],
                        help="the readers' fingerprint, which is part of each partition's checkpoint key")
    checkpoint.set_defaults(handler=run_checkpoint, parser=checkpoint)


def run_checkpoint(args: argparse.Namespace, _: list[str]) -> int:
    shard_flags = {"--count": args.count, "--input": args.input, "--fingerprint": args.fingerprint}
    if args.action == "shards":
        needed = {"--count": "how many shards the runs were split into", "--input": "the input they read"}
        missing = [f"{flag} ({what})" for flag, what in needed.items() if shard_flags[flag] is None]
        if missing:
            args.parser.error(f"checkpoint shards needs {' and '.join(missing)}")
    elif any(value is not None for value in shard_flags.values()):
        given = [flag for flag, value in shard_flags.items() if value is not None]
        args.parser.error(f"{', '.join(given)}: only for checkpoint shards, not checkpoint {args.action}")
    fs, path = fsspec.core.url_to_fs(args.path)
    if not fs.exists(path):
        print(f"error: checkpoint {args.path} does not exist; pass the checkpoint_path a run used", file=sys.stderr)
        return 2
    if args.action == "shards":
        return _shards(args)
    found = checkpoints_at(args.path)
    if found != [args.path]:
        print(f"{args.path} holds no checkpoint marks of its own; it stands for the {len(found)} checkpoint(s) "
              "below it (a workflow's phase keeps its checkpoint in a subfolder named by a digest of its settings, "
              "and removes those of other settings when it runs):")
    if args.action == "status":
        for url in found:
            _print_status(url)
        return 0
    return max(_reset(url, args.force) for url in found)


def checkpoints_at(url: str) -> list[str]:
    """``url`` itself if it holds checkpoint marks or nothing holds them below it, else
    every folder up to ``_SEARCH_DEPTH`` levels below it that does (sorted)."""
    from beam_curator.checkpoint import METADATA_DIR

    fs, path = fsspec.core.url_to_fs(url)
    root = path.rstrip("/")
    if fs.exists(f"{root}/{METADATA_DIR}"):
        return [url]
    below = []
    for depth in range(1, _SEARCH_DEPTH + 1):
        pattern = "/".join([root, *["*"] * depth, METADATA_DIR])
        below += [found.rstrip("/")[len(root) + 1 : -len(METADATA_DIR) - 1] for found in fs.glob(pattern)]
    return [f"{url.rstrip('/')}/{relative}" for relative in sorted(below)] or [url]


def _print_status(url: str) -> None:
    from beam_curator.checkpoint import open_store

    status = open_store(url).status()
    print(f"checkpoint {status.path}")
    print(f"  completed partitions: {status.completed}")
    print(f"  writer files: {len(status.writer_files)}")
    for file in status.writer_files:
        print(f"    {file}")
    print(f"  unreadable files: {len(status.unreadable_files)}")
    for file in status.unreadable_files:
        print(f"    {file}")
    if status.live_writers:
        print(f"  live writers: {', '.join(status.live_writers)}")


def _reset(url: str, force: bool) -> int:
    from beam_curator.checkpoint import CheckpointBusyError, open_store

    try:
        open_store(url).reset(force=force)
    except CheckpointBusyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"checkpoint {url} reset")
    return 0


def _shards(args: argparse.Namespace) -> int:
    """Print each shard's progress and the shards to resubmit; 0 once all are
    complete, 1 while any is not, so that a job script can loop on it."""
    from beam_curator.checkpoint import shard_manifest
    from beam_curator.stages.io import JsonlReader, ParquetReader

    reader_class = JsonlReader if args.input_filetype == "jsonl" else ParquetReader
    try:
        reader = reader_class(args.input, files_per_partition=args.files_per_partition, fingerprint=args.fingerprint)
        manifest = shard_manifest(args.path, reader, args.count)
    except ValueError as error:  # bad count, or input matching no files (CuratorInputError)
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(manifest)
    return 0 if manifest.complete else 1
