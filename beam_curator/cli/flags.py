"""What every ``beam-curator`` command shares: the parser class (short errors),
the help formatter, the examples, and the logging, data and runner flags."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import NoReturn, Sequence

from beam_curator.errors import ON_BAD_RECORD

EXAMPLES = """\
examples:
  beam-curator semdedup --input data/ --output results/ --cache cache/ --id-field doc_id --eps 0.01
  beam-curator semdedup --input data/ --output results/ --cache cache/      # no --eps: eps table only
  beam-curator semdedup ... --embedding-backend static   # a static model (beam-curator distill): fast on CPUs
  beam-curator semdedup ... --runner flink --flink-master host:8081 -- --parallelism=64
  beam-curator exact --input data/ --output results/ --id-field doc_id
  beam-curator fuzzy --input data/ --output results/ --id-field doc_id
  beam-curator filter --input data/ --output filtered/ --preset fineweb    # or --config filters.yaml
  beam-curator checkpoint status cache/checkpoints/embedding
  beam-curator checkpoint shards ckpt/ --count 4 --input data/   # a job array's progress; exit 1 until complete

Interrupt any run (Ctrl+C) and rerun the same command: finished work is skipped.
"""


class CommandParser(argparse.ArgumentParser):
    """A parser whose errors are a few lines (the problem, and where the full
    usage is) rather than the whole usage, which ``--help`` still prints.

    A command's options are checked before argparse parses them, so that a
    misspelt option is named with the closest valid ones even when it hides a
    required one (``--outptu`` for ``--output``): nothing is ignored."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nsee `{self.prog} --help` for every option\n")

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None):
        if self._subparsers is None and args is not None:  # a command's own options, not the top level's
            self._reject_unknown_options(args)
        return super().parse_known_args(args, namespace)

    def _reject_unknown_options(self, args: Sequence[str]) -> None:
        """Exit naming each ``--option`` this command lacks and the closest valid ones."""
        valid = [option for option in self._option_string_actions if option.startswith("--") and option != "--help"]
        problems = []
        for arg in args:
            name = arg.split("=", 1)[0]
            if name.startswith("--") and name not in self._option_string_actions:
                close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
                problems.append(f"{arg} (did you mean {' or '.join(close)}?)" if close else arg)
        if problems:
            command = self.prog.split()[-1]
            self.error(f"unrecognized arguments: {'; '.join(problems)}. Raw Apache Beam flags go after --, "
                       f"for example: beam-curator {command} ... -- --parallelism=64")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text already says
    what happens when it is unset) and keeps the examples' layout. Positional
    arguments and the command list have no default: they are always given."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.required or not action.option_strings
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        if action.nargs == 0:  # a flag
            return f"{text} (default: off)"
        return f"{text} (default: {'unset' if action.default is None else '%(default)s'})"


def add_logging_flags(parser: argparse.ArgumentParser, top_level: bool) -> None:
    # SUPPRESS keeps a subcommand's unset flag from overwriting the same flag given before it.
    default = False if top_level else argparse.SUPPRESS
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="warnings and errors only: no progress bars, no summary logs")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="also log Apache Beam, its workers and the model libraries at INFO")


def add_data_flags(parser: argparse.ArgumentParser, output: str, cache: str, text_use: str, ids: bool = True) -> None:
    """The logging flags and the data flags every command over a dataset has; ``ids=False`` leaves out
    ``--id-field``, which only the deduplication commands use."""
    add_logging_flags(parser, top_level=False)
    data = parser.add_argument_group("data")
    data.add_argument("--input", required=True, help="folder, glob or file of the input data")
    data.add_argument("--output", required=True, help=output)
    data.add_argument("--cache", help=cache)
    data.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"], help="format of the input files")
    data.add_argument("--text-field", default="text", help=f"the field holding the text {text_use}")
    if ids:
        data.add_argument("--id-field", help="your unique id field (default: generate ids into _curator_dedup_id)")
    data.add_argument("--on-bad-record", default="raise", choices=ON_BAD_RECORD,
                      help="a malformed record or one missing a field: stop naming it, or skip and count it")
    data.add_argument("--files-per-partition", type=int, default=1, help="input files per checkpointed partition")
    data.add_argument("--wait", action="store_true",
                      help="if another run uses --output or --cache, start when it ends instead of refusing")


def add_runner_flags(parser: argparse.ArgumentParser) -> None:
    from beam_curator.runners import RUNNERS

    group = parser.add_argument_group("runner (raw Apache Beam flags go after --)")
    group.add_argument("--runner", default="local", choices=RUNNERS, help="where the pipelines run")
    group.add_argument("--num-workers", type=int,
                       help="threads running bundles (local; default: one per core), worker processes (local-multiprocess, "
                       "a Dask LocalCluster; default one per CPU) or SDK workers per node")
    group.add_argument("--job-endpoint", help="host:port of a portable/Flink/Spark job service (default: embedded)")
    group.add_argument("--environment-type", choices=["LOOPBACK", "EXTERNAL", "PROCESS", "DOCKER"],
                       help="where the SDK workers run (default: LOOPBACK for local masters)")
    group.add_argument("--environment-config", help="host:port of an EXTERNAL worker pool, a PROCESS boot command, an image")
    group.add_argument("--flink-master", help="Flink REST address host:port (default: [local])")
    group.add_argument("--flink-version", help="Flink version of the job server")
    group.add_argument("--flink-job-server-jar", help="local Flink job-server jar (sites without internet)")
    group.add_argument("--spark-master-url", help="Spark master URL (default: local[*])")
    group.add_argument("--spark-job-server-jar", help="local Spark job-server jar (sites without internet)")
    group.add_argument("--dask-address", help="Dask scheduler tcp://host:8786 (default: a LocalCluster for the run)")
    group.add_argument("--completion", default="fused", choices=["fused", "stateful"],
                       help="how partitions are marked: in the sink's step (fused, marks as partitions finish on "
                            "every runner) or by a keyed stateful step (stateful: for Flink --streaming; see docs/pipelines.md, Stateful completion)")
    group.add_argument("--worker-start-timeout", type=float, default=60.0,
                       help="EXTERNAL/PROCESS environments: seconds from the job running to the first SDK worker before failing")


_RUNNER_KEYS = (
    "num_workers", "job_endpoint", "environment_type", "environment_config", "flink_master",
    "flink_version", "flink_job_server_jar", "spark_master_url", "spark_job_server_jar", "dask_address",
)


def runner_settings(args: argparse.Namespace, beam_args: list[str]) -> dict:
    """The workflows' runner keywords from the runner flags, and the raw Beam flags."""
    settings = {key: getattr(args, key) for key in _RUNNER_KEYS if getattr(args, key) is not None}
    return {"runner": args.runner, "beam_args": beam_args, "worker_start_timeout": args.worker_start_timeout,
            "completion": args.completion, **settings}


def with_flag_names(message: str, parser: argparse.ArgumentParser) -> str:
    """A workflow's message about its parameters, each parameter the command
    has a flag for named by that flag too (``num_bands`` -> ``num_bands (--num-bands)``)."""
    flags = {action.dest: action.option_strings[-1] for action in parser._actions
             if action.option_strings and "_" in action.dest}
    if not flags:
        return message
    named: set[str] = set()

    def flag_named(match: re.Match) -> str:
        name = match.group(1)
        if name in named:  # once is enough
            return name
        named.add(name)
        return f"{name} ({flags[name]})"

    return re.sub(rf"\b({'|'.join(map(re.escape, flags))})\b(?! \(--)", flag_named, message)
