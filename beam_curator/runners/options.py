"""Short runner choices turned into Beam pipeline options.

Every entry point (``Pipeline.run``, the workflows, the ``beam-curator``
command) goes through ``pipeline_options`` so that a runner is chosen the
same way everywhere, and raw Beam flags always pass straight through.
Settings are checked here, before anything starts, because Beam reports a
misspelt environment or a missing job-server jar only after minutes of
start-up on a cluster, or by trying to download it on a site without internet.
"""

from __future__ import annotations

import json
import logging
import os
import re

from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions

from beam_curator.cores import usable_cores
from beam_curator.logs import worker_log_level
from beam_curator.runners.dask import dask_flags
from beam_curator.runners.flink_runner import SharedJobServerFlinkRunner, rest_url, run_job_name
from beam_curator.runners.job_server import JOB_SERVERS, job_server_jar, require_java
from beam_curator.runners.local_workers import LocalMultiProcessRunner
from beam_curator.runners.services import answers, get_json

IN_PROCESS = "in-process"  # runs no Beam pipeline: beam_curator.running.in_process
RUNNERS = ("local", "local-multiprocess", "portable", "flink", "spark", "dask", IN_PROCESS)
ENVIRONMENT_TYPES = ("LOOPBACK", "EXTERNAL", "PROCESS", "DOCKER")

_ENVIRONMENT = {"num_workers", "environment_type", "environment_config"}
SETTINGS: dict[str, frozenset[str]] = {
    "local": frozenset({"num_workers"}),
    "local-multiprocess": frozenset({"num_workers"}),
    "portable": frozenset(_ENVIRONMENT | {"job_endpoint"}),
    "flink": frozenset(_ENVIRONMENT | {"job_endpoint", "flink_master", "flink_version", "flink_job_server_jar",
                                       "parallelism"}),
    "spark": frozenset(_ENVIRONMENT | {"job_endpoint", "spark_master_url", "spark_job_server_jar"}),
    "dask": frozenset({"dask_address", "num_workers"}),
    IN_PROCESS: frozenset(),
}
_HOST_PORT = re.compile(r"^[\w.\-\[\]:]+:\d+$")


def _flags(**values: object) -> list[str]:
    return [f"--{key}={value}" for key, value in values.items() if value is not None]


def _check_settings(runner: str, given: dict[str, object]) -> None:
    if runner not in SETTINGS:
        raise ValueError(f"unknown runner {runner!r}; choose one of {', '.join(RUNNERS)} or pass raw Beam flags")
    stray = sorted(name for name, value in given.items() if value is not None and name not in SETTINGS[runner])
    if stray:
        allowed = ", ".join(sorted(SETTINGS[runner])) or "no settings"
        raise ValueError(
            f"{', '.join(stray)} {'does' if len(stray) == 1 else 'do'} not apply to runner {runner!r} "
            f"(it takes {allowed}); choose the runner the setting belongs to or drop it"
        )


def _check_jar(flag: str, jar: str | None) -> None:
    """A local jar must exist: otherwise Beam would silently try to download one."""
    if jar and "://" not in jar and not os.path.isfile(jar):
        raise FileNotFoundError(f"--{flag} {jar!r} is not a file; give the path (or URL) of the job-server jar")


def _check_answers(flag: str, address: str, what: str) -> None:
    """Something must listen at ``address`` (``host:port``, with or without a scheme): a job server
    or cluster that is not there would otherwise show as a wait of minutes, then a gRPC or REST error."""
    host_port = re.sub(r"^[a-z]+://", "", address).split("/")[0]
    host, _, port = host_port.rpartition(":")
    if not (host and port.isdigit()):
        raise ValueError(f"--{flag} {address!r} is not host:port")
    if not answers(host.strip("[]"), int(port), timeout=3.0):
        raise ConnectionError(f"nothing answers at --{flag} {address} ({what}); start it, or correct the address")


def _job_server(runner: str, jar: str | None, job_endpoint: str | None, master: str, master_flag: str,
                local: bool, reach: bool) -> str | None:
    """The job-server jar to start (None: use the running one at ``job_endpoint``), after checking
    that the endpoint or Java, and a remote master, are there (with ``reach``)."""
    if not reach:
        _check_jar(f"{runner}_job_server_jar", jar)
        return jar
    if job_endpoint:
        _check_answers("job_endpoint", job_endpoint, f"a running {runner} job server")
        return None
    if not local:
        _check_answers(master_flag, master, f"the {runner} cluster's {'REST endpoint' if runner == 'flink' else 'master'}")
    require_java(runner)
    if jar:
        _check_jar(f"{runner}_job_server_jar", jar)
        return jar
    if runner == "flink" and not local:
        _check_flink_version(master)
    return job_server_jar(runner)


def _check_flink_version(master: str) -> None:
    """The cluster at ``master`` runs the Flink minor version of the job server built here: Flink's
    client and cluster must agree on it, or the job fails at submission with a serialization error."""
    served = JOB_SERVERS["flink"].engine_version
    url = f"{rest_url(master)}/config"
    try:
        version = get_json(url, timeout=5).get("flink-version", "")
    except (OSError, ValueError) as error:
        raise ConnectionError(f"--flink_master {master} answers, but not as Flink's REST API ({url}: {error}); "
                              "give the JobManager's REST address (rest.port, 8081 by default)") from error
    if not version.startswith(served + "."):
        raise ValueError(f"the Flink cluster at {master} runs Flink {version}, and the job server built here is for "
                         f"Flink {served}; give flink_job_server_jar= Beam's job server for Flink "
                         f"{'.'.join(version.split('.')[:2])} (and flink_version=)")


def _environment(
    runner: str, environment_type: str | None, environment_config: str | None, local_master: bool
) -> tuple[str | None, str | None]:
    """Where user code runs. Embedded and local masters default to LOOPBACK
    (workers in this process, nothing to install); a remote cluster keeps
    Beam's own default (DOCKER) unless told otherwise."""
    if environment_type is None:
        if environment_config is not None:
            raise ValueError(
                f"environment_config {environment_config!r} needs an environment_type: EXTERNAL for the "
                "host:port of a worker pool, PROCESS for a worker boot command, DOCKER for an image"
            )
        return ("LOOPBACK" if runner == "portable" or local_master else None), None
    kind = environment_type.upper()
    if kind not in ENVIRONMENT_TYPES:
        raise ValueError(f"unknown environment_type {environment_type!r}; choose one of {', '.join(ENVIRONMENT_TYPES)}")
    if kind == "EXTERNAL" and not (environment_config and _HOST_PORT.match(environment_config)):
        raise ValueError(
            f"environment_type EXTERNAL needs environment_config='host:port' of a running worker pool "
            f"(/path/to/venv/bin/python -m beam_curator.runners.worker_pool --port PORT), not {environment_config!r}"
        )
    if kind == "PROCESS":
        if not environment_config:
            raise ValueError("environment_type PROCESS needs environment_config: the worker boot command or its JSON")
        if not environment_config.lstrip().startswith("{"):
            environment_config = json.dumps({"command": environment_config})
    return kind, environment_config


class _ThreadsDoRunInMemory(logging.Filter):
    """Drops the FnApiRunner's warning that ``in_memory`` mode with several
    workers lacks parallelism, which every local run would print: it splits
    each bundle's input into that many parts, each run on a thread of its own
    (``multi_threading`` would send every element through gRPC instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "direct_num_workers is not equal to 1" not in record.getMessage()


_FN_API_RUNNER_LOG = logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner")


def _quiet_in_memory_threads_warning() -> None:
    if not any(isinstance(known, _ThreadsDoRunInMemory) for known in _FN_API_RUNNER_LOG.filters):
        _FN_API_RUNNER_LOG.addFilter(_ThreadsDoRunInMemory())


def runner_args(
    runner: str = "local",
    *,
    num_workers: int | None = None,
    job_endpoint: str | None = None,
    environment_type: str | None = None,
    environment_config: str | None = None,
    flink_master: str | None = None,
    flink_version: str | None = None,
    flink_job_server_jar: str | None = None,
    parallelism: int | None = None,
    spark_master_url: str | None = None,
    spark_job_server_jar: str | None = None,
    dask_address: str | None = None,
    reach: bool = True,
) -> list[str]:
    """The Beam command-line flags for a runner preset.

    ``local`` is Beam's FnApiRunner, in this process, named explicitly: the
    DirectRunner of recent Beam releases first tries to download a Prism
    binary, which fails on machines without internet; ``num_workers`` threads
    run its bundles (default: one per usable core). ``local-multiprocess``
    runs ``num_workers`` SDK worker processes (default: one per usable core), through
    :class:`~beam_curator.runners.local_workers.LocalMultiProcessRunner` so
    that their logs follow ours.
    ``portable`` with no ``job_endpoint`` starts an embedded job service.
    ``flink`` and ``spark`` start a job server from ``*_job_server_jar``, by
    default the one :func:`~beam_curator.runners.job_server.job_server_jar`
    builds with Maven (Flink 1.19, Spark 3.5), or use the running one at
    ``job_endpoint``; a job endpoint or remote master that does not answer,
    or no Java, is an error here, before anything starts (``reach=False``
    checks the settings alone: no network, no Java, no build). ``num_workers`` is the SDK
    worker processes per worker node for the portable runners, ``parallelism``
    Flink's task parallelism. ``dask`` runs on Beam's DaskRunner: on the
    scheduler at ``dask_address`` (``tcp://host:8786``), or on a LocalCluster
    of ``num_workers`` worker processes started for the run. ``in-process`` runs no Beam pipeline:
    the stages run in this thread, one partition after another, which saves Beam's fixed costs
    (about half a second per chain) on small inputs (:mod:`beam_curator.running.in_process`). A PROCESS
    ``environment_config`` may be just the boot command. Settings that do not belong to ``runner`` are an error
    rather than silently ignored.
    """
    settings = {
        "num_workers": num_workers, "job_endpoint": job_endpoint, "environment_type": environment_type,
        "environment_config": environment_config, "flink_master": flink_master, "flink_version": flink_version,
        "flink_job_server_jar": flink_job_server_jar, "parallelism": parallelism,
        "spark_master_url": spark_master_url, "spark_job_server_jar": spark_job_server_jar,
        "dask_address": dask_address,
    }
    _check_settings(runner, settings)
    if num_workers is not None and int(num_workers) < 1:
        raise ValueError(f"num_workers must be at least 1, not {num_workers}")
    if runner == IN_PROCESS:
        return []
    if runner == "local":
        # Threads of this process, each running bundles: stages that spend their time in Arrow,
        # numpy or torch (which release the GIL) use that many cores, and a task's reads and
        # writes overlap another's compute.
        _quiet_in_memory_threads_warning()
        return ["--runner=FnApiRunner", "--direct_running_mode=in_memory",
                f"--direct_num_workers={num_workers or usable_cores()}"]
    if runner == "local-multiprocess":
        workers = num_workers or usable_cores()
        return [f"--runner={LocalMultiProcessRunner.__module__}.{LocalMultiProcessRunner.__name__}",
                "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    if runner == "dask":
        return dask_flags(dask_address, num_workers)
    if runner == "portable":
        kind, config = _environment(runner, environment_type, environment_config, local_master=True)
        return ["--runner=PortableRunner", f"--job_endpoint={job_endpoint or 'embed'}", *_flags(
            environment_type=kind, environment_config=config, sdk_worker_parallelism=num_workers,
        )]
    if runner == "flink":
        master = flink_master or "[local]"
        served = JOB_SERVERS["flink"].engine_version
        if flink_job_server_jar is None and job_endpoint is None:
            if flink_version is not None and str(flink_version) != served:
                raise ValueError(
                    f"flink_version {flink_version!r}: the job server beam-curator builds is for Flink {served}; "
                    f"for Flink {flink_version} give flink_job_server_jar= (Beam's beam-runners-flink-"
                    f"{flink_version}-job-server jar) or job_endpoint= of a job server you started")
            flink_version = served
        elif flink_version is not None and str(flink_version) not in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS:
            raise ValueError(f"flink_version {flink_version!r} has no Beam job server; choose one of "
                             f"{', '.join(FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS)}")
        local = master in ("[local]", "[auto]")
        jar = _job_server("flink", flink_job_server_jar, job_endpoint, master, "flink_master", local, reach)
        kind, config = _environment(runner, environment_type, environment_config, local_master=local)
        return [f"--runner={SharedJobServerFlinkRunner.__module__}.{SharedJobServerFlinkRunner.__name__}", *_flags(
            flink_master=master, flink_version=flink_version, flink_job_server_jar=jar,
            job_endpoint=job_endpoint, parallelism=parallelism, job_name=None if local else run_job_name(),
            environment_type=kind, environment_config=config, sdk_worker_parallelism=num_workers,
        )]
    master = spark_master_url or "local[*]"
    local = master.startswith("local")
    jar = _job_server("spark", spark_job_server_jar, job_endpoint, master, "spark_master_url", local, reach)
    kind, config = _environment(runner, environment_type, environment_config, local_master=local)
    return ["--runner=SparkRunner", *_flags(
        spark_master_url=master, spark_job_server_jar=jar, job_endpoint=job_endpoint,
        environment_type=kind, environment_config=config, sdk_worker_parallelism=num_workers,
    )]


def pipeline_options(runner: str | None = "local", beam_args: list[str] | None = None, **preset: object) -> PipelineOptions:
    """Options for ``runner`` (None: only ``beam_args``), then raw ``beam_args`` (later flags win).

    SDK workers log at :func:`beam_curator.logs.worker_log_level` (WARNING
    unless logging was set up verbose): at INFO, every worker process of a
    multi-process run reports each bundle it starts. Raw flags for the
    in-process runner, which runs no Beam pipeline, are an error, not ignored.
    """
    if runner == IN_PROCESS and beam_args:
        raise ValueError(f"beam_args do not apply to runner {IN_PROCESS!r}, which runs no Beam pipeline "
                         f"(given: {' '.join(beam_args)}); drop them or choose a Beam runner")
    args = runner_args(runner, **preset) if runner else []
    quiet_workers = f"--default_sdk_harness_log_level={worker_log_level()}"
    return PipelineOptions([quiet_workers, *args, *(beam_args or [])])
