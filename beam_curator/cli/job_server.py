"""``beam-curator job-server``: build (once) and print Beam's Flink or Spark job server jar."""

from __future__ import annotations

import argparse
import sys
import textwrap

from beam_curator.cli.flags import HelpFormatter, add_logging_flags


def add_job_server(commands: argparse._SubParsersAction) -> None:
    server = commands.add_parser(
        "job-server", formatter_class=HelpFormatter, help="build (once) and print the path of Beam's Flink or Spark job server jar",
        description=textwrap.fill(
            "Print the jar that runner=flink / runner=spark start their job server from: the one named in "
            "BEAM_CURATOR_FLINK_JOB_SERVER_JAR / BEAM_CURATOR_SPARK_JOB_SERVER_JAR, else one built with Maven from "
            "Beam's runner artifact on first use and cached. Copy it to machines without Maven and name it there "
            "in that variable.", 80),
    )
    add_logging_flags(server, top_level=False)
    server.add_argument("engine", choices=["flink", "spark"], help="which runner's job server")
    server.set_defaults(handler=run_job_server, parser=server)


def run_job_server(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.runners.job_server import JOB_SERVERS, JobServerError, job_server_jar

    try:
        jar = job_server_jar(args.engine)
    except JobServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    build = JOB_SERVERS[args.engine]
    print(jar)
    print(f"Beam {build.beam_version} job server for {args.engine.capitalize()} {build.engine_version}", file=sys.stderr)
    return 0
