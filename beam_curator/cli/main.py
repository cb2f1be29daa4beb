"""The ``beam-curator`` command: resumable text curation on Apache Beam.

Each command lives in a module of its own (``semdedup``, ``exact``,
``fuzzy``, ``filter``, ``checkpoint``, ``job_server``, ``distill``) with its parser, handler and
summary; this module builds the parser from them and dispatches. Every
option is checked: a misspelt one is an error that names the closest valid
options, never silently ignored. Raw Apache Beam flags go after ``--``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from beam_curator import interrupts
from beam_curator.cli.checkpoint import add_checkpoint
from beam_curator.cli.distill import add_distill
from beam_curator.cli.exact import add_exact
from beam_curator.cli.filter import add_filter
from beam_curator.cli.flags import EXAMPLES, CommandParser, HelpFormatter, add_logging_flags, with_flag_names
from beam_curator.cli.fuzzy import add_fuzzy
from beam_curator.cli.install import ShowInstall
from beam_curator.cli.job_server import add_job_server
from beam_curator.cli.langid import add_langid
from beam_curator.cli.semdedup import add_semdedup
from beam_curator.errors import CuratorError, CuratorSettingsError, user_error_in
from beam_curator.logs import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="beam-curator", description="Resumable text curation on Apache Beam: semantic deduplication "
        "(NeMo Curator's SemDeDup), exact and fuzzy deduplication, heuristic filtering and checkpoint tools.",
        epilog=EXAMPLES, formatter_class=HelpFormatter, allow_abbrev=False,
    )
    parser.add_argument("--version", action=ShowInstall, help="show the version, the torch build and the "
                        "embedding engines installed, and exit")
    add_logging_flags(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_semdedup(commands)
    add_exact(commands)
    add_fuzzy(commands)
    add_langid(commands)
    add_filter(commands)
    add_checkpoint(commands)
    add_job_server(commands)
    add_distill(commands)
    for sub in commands.choices.values():
        sub.allow_abbrev = False  # a prefix of one option must not silently mean it
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, beam_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    configure_logging()  # before Beam is imported, so that its import-time notes are filtered
    args = build_parser().parse_args(ours)
    configure_logging(quiet=args.quiet, verbose=args.verbose)
    handler: Callable[[argparse.Namespace, list[str]], int] = args.handler
    try:
        with interrupts.stops_unwind_runs():  # also between a workflow's runs
            return handler(args, beam_args)
    except Exception as error:  # the package's errors, also when a library raised them: their message says what to do
        found = error if isinstance(error, CuratorError) else user_error_in(error)
        if found is None or args.verbose:
            raise
        message = with_flag_names(str(found), args.parser) if isinstance(found, CuratorSettingsError) else str(found)
        print(f"error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:  # one line, 130 or 143, and no native abort from threads left running
        print(interrupts.message(error), file=sys.stderr)
        interrupts.exit_now(interrupts.status_of(error))
        raise  # not reached


def command() -> None:
    """The ``beam-curator`` executable: :func:`main`, then leave without finalising the
    interpreter beside native threads (see :mod:`beam_curator.interrupts`)."""
    interrupts.exit_now(main())


if __name__ == "__main__":
    command()
