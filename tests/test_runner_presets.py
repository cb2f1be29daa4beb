"""Runner presets become the Beam options Beam itself reads back."""

from __future__ import annotations

import json
import logging
import re
import socket
from pathlib import Path
from typing import Iterator

import pytest
from apache_beam.options.pipeline_options import (
    DebugOptions,
    DirectOptions,
    FlinkRunnerOptions,
    PipelineOptions,
    PortableOptions,
    SparkRunnerOptions,
    StandardOptions,
)

from beam_curator.runners import RUNNERS, SETTINGS, pipeline_options, runner_args, usable_cores
from beam_curator.runners.dask import LocalDaskClusterOptions, is_dask


@pytest.fixture
def jar(tmp_path: Path) -> str:
    path = tmp_path / "job-server.jar"
    path.write_bytes(b"PK")
    return str(path)


@pytest.fixture
def listening() -> Iterator[str]:
    """``localhost:port`` of a socket that accepts connections, standing in for a job server or master."""
    with socket.socket() as server:
        server.bind(("localhost", 0))
        server.listen()
        yield f"localhost:{server.getsockname()[1]}"


def test_local_is_the_in_process_fn_api_runner() -> None:
    options = pipeline_options("local")
    assert options.view_as(StandardOptions).runner == "FnApiRunner"
    assert options.view_as(DirectOptions).direct_running_mode == "in_memory"
    assert options.view_as(DirectOptions).direct_num_workers == usable_cores()  # all the cores by default
    assert pipeline_options("local", num_workers=1).view_as(DirectOptions).direct_num_workers == 1


def test_local_runs_bundles_on_several_threads_without_beams_warning_that_it_would_not(caplog) -> None:
    """Beam warns that in_memory mode with several workers lacks parallelism;
    its bundles' parts do run on threads of their own, so the preset drops
    that warning, which every run would print."""
    import threading
    import time

    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    def thread_of(_: int) -> int:
        time.sleep(0.002)  # each part outlasts the other's start: two parts on one thread would be sequential
        return threading.get_ident()

    with caplog.at_level(logging.WARNING):
        with beam.Pipeline(options=pipeline_options("local", num_workers=2)) as pipeline:
            threads = (pipeline | beam.Create(range(200)) | beam.Reshuffle()
                       | beam.Map(thread_of) | beam.Distinct()
                       | beam.combiners.Count.Globally())
            assert_that(threads, equal_to([2]))
    assert not [record for record in caplog.records if "direct_num_workers" in record.getMessage()]


def test_local_multiprocess_runs_the_requested_worker_processes() -> None:
    direct = pipeline_options("local-multiprocess", num_workers=3).view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ("multi_processing", 3)
    assert pipeline_options("local-multiprocess").view_as(DirectOptions).direct_num_workers >= 1


def test_portable_embeds_a_job_service_with_loopback_workers_by_default() -> None:
    options = pipeline_options("portable")
    portable = options.view_as(PortableOptions)
    assert options.view_as(StandardOptions).runner == "PortableRunner"
    assert (portable.job_endpoint, portable.environment_type, portable.environment_config) == ("embed", "LOOPBACK", None)


def test_portable_sends_work_to_an_external_pool() -> None:
    portable = pipeline_options(
        "portable", job_endpoint="jobs:8099", environment_type="external",
        environment_config="pool.internal:50000", num_workers=4,
    ).view_as(PortableOptions)
    assert portable.job_endpoint == "jobs:8099"
    assert (portable.environment_type, portable.environment_config) == ("EXTERNAL", "pool.internal:50000")
    assert int(portable.sdk_worker_parallelism) == 4


def test_flink_with_a_local_job_server_jar(jar: str) -> None:
    options = pipeline_options("flink", flink_version="1.19", flink_job_server_jar=jar, parallelism=8)
    flink = options.view_as(FlinkRunnerOptions)
    assert options.view_as(StandardOptions).runner.endswith("FlinkRunner")
    assert (flink.flink_master, flink.flink_version, flink.flink_job_server_jar) == ("[local]", "1.19", jar)
    assert flink.parallelism == 8
    assert options.view_as(PortableOptions).environment_type == "LOOPBACK"  # a local master runs workers here


def test_flink_cluster_keeps_beams_environment_default_unless_told(jar: str, listening: str) -> None:
    remote = pipeline_options("flink", flink_master=listening, flink_job_server_jar=jar)
    assert remote.view_as(FlinkRunnerOptions).flink_master == listening
    assert remote.view_as(PortableOptions).environment_type is None
    process = pipeline_options(
        "flink", flink_master=listening, flink_job_server_jar=jar, environment_type="PROCESS",
        environment_config="/opt/apache/beam/boot", num_workers=2,
    ).view_as(PortableOptions)
    assert process.environment_type == "PROCESS"
    assert json.loads(process.environment_config) == {"command": "/opt/apache/beam/boot"}
    assert int(process.sdk_worker_parallelism) == 2
    config = '{"command": "/opt/apache/beam/boot", "env": {"BEAM_CURATOR_GPUS": "0,1"}}'
    given = pipeline_options("flink", flink_job_server_jar=jar, environment_type="PROCESS", environment_config=config)
    assert given.view_as(PortableOptions).environment_config == config  # JSON is Beam's own form: kept as is


def test_spark_with_a_local_job_server_jar(jar: str, listening: str) -> None:
    options = pipeline_options("spark", spark_master_url=f"spark://{listening}", spark_job_server_jar=jar)
    spark = options.view_as(SparkRunnerOptions)
    assert options.view_as(StandardOptions).runner == "SparkRunner"
    assert (spark.spark_master_url, spark.spark_job_server_jar) == (f"spark://{listening}", jar)
    assert pipeline_options("spark", spark_job_server_jar=jar).view_as(SparkRunnerOptions).spark_master_url == "local[*]"


def test_dask_names_a_scheduler_or_sizes_a_cluster_started_for_the_run() -> None:
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    from apache_beam.runners.dask.dask_runner import DaskOptions

    remote = pipeline_options("dask", dask_address="tcp://scheduler:8786")
    assert is_dask(remote)
    assert remote.view_as(DaskOptions).address == "tcp://scheduler:8786"
    local = pipeline_options("dask", num_workers=3)
    assert local.view_as(DaskOptions).address is None
    assert local.view_as(LocalDaskClusterOptions).dask_local_workers == 3
    assert is_dask(pipeline_options(None, ["--runner=DaskRunner"]))
    assert not is_dask(pipeline_options("local"))


def test_raw_beam_flags_pass_through_and_win() -> None:
    options = pipeline_options(
        "local-multiprocess", ["--direct_num_workers=5", "--experiments=use_runner_v2", "--job_name=curate"],
        num_workers=2,
    )
    assert options.view_as(DirectOptions).direct_num_workers == 5
    assert "use_runner_v2" in options.view_as(DebugOptions).experiments
    assert options.get_all_options()["job_name"] == "curate"


def test_no_preset_means_only_the_raw_flags() -> None:
    options = pipeline_options(None, ["--runner=FnApiRunner"])
    assert options.view_as(StandardOptions).runner == "FnApiRunner"
    assert isinstance(options, PipelineOptions)


def test_every_setting_of_every_preset_is_accepted(jar: str, listening: str) -> None:
    values = {
        "num_workers": 2, "job_endpoint": listening, "environment_type": "EXTERNAL",
        "environment_config": "localhost:50000", "flink_master": "[local]", "flink_version": "1.20",
        "flink_job_server_jar": jar, "parallelism": 2, "spark_master_url": "local[2]", "spark_job_server_jar": jar,
        "dask_address": "tcp://scheduler:8786",
    }
    alternatives = {"dask": [{"dask_address"}, {"num_workers"}]}  # a running scheduler, or a cluster of this size
    for runner in RUNNERS:
        for chosen in alternatives.get(runner, [SETTINGS[runner]]):
            args = runner_args(runner, **{name: values[name] for name in chosen})
            # in-process runs no Beam pipeline, and takes no setting
            assert args[0].startswith("--runner=") if runner != "in-process" else args == []


@pytest.mark.parametrize(
    ("runner", "settings", "error", "message"),
    [
        ("dataflow-ish", {}, ValueError, "unknown runner 'dataflow-ish'; choose one of local, local-multiprocess"),
        ("spark", {"flink_master": "jm:8081"}, ValueError, "flink_master does not apply to runner 'spark'"),
        ("local", {"job_endpoint": "localhost:8099"}, ValueError, "job_endpoint does not apply to runner 'local'"),
        ("local-multiprocess", {"num_workers": 0}, ValueError, "num_workers must be at least 1"),
        ("portable", {"environment_type": "EXTERNAL"}, ValueError, "EXTERNAL needs environment_config='host:port'"),
        ("portable", {"environment_type": "THREADS"}, ValueError, "unknown environment_type 'THREADS'"),
        ("portable", {"environment_config": "localhost:5000"}, ValueError, "needs an environment_type"),
        ("flink", {"environment_type": "PROCESS"}, ValueError, "PROCESS needs environment_config"),
        ("flink", {"flink_version": "1.4", "flink_job_server_jar": __file__}, ValueError,
         "flink_version '1.4' has no Beam job server"),
        ("flink", {"flink_version": "1.20"}, ValueError, "the job server beam-curator builds is for Flink 1.19"),
        ("flink", {"job_endpoint": "localhost:1"}, ConnectionError, "nothing answers at --job_endpoint localhost:1"),
        ("flink", {"flink_master": "localhost:1"}, ConnectionError, "nothing answers at --flink_master localhost:1"),
        ("spark", {"spark_master_url": "spark://localhost:1"}, ConnectionError, "--spark_master_url spark://localhost:1"),
        ("flink", {"flink_job_server_jar": "/nowhere/flink.jar"}, FileNotFoundError, "--flink_job_server_jar"),
        ("spark", {"spark_job_server_jar": "/nowhere/spark.jar"}, FileNotFoundError, "--spark_job_server_jar"),
        ("dask", {"dask_address": "tcp://s:8786", "num_workers": 2}, ValueError, "num_workers sizes the LocalCluster"),
        ("dask", {"num_workers": 0}, ValueError, "num_workers must be at least 1"),
        ("dask", {"environment_type": "EXTERNAL"}, ValueError, "environment_type does not apply to runner 'dask'"),
    ],
)
def test_bad_settings_fail_before_anything_starts(runner: str, settings: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        pipeline_options(runner, **settings)


def test_no_java_on_path_is_named_before_anything_starts(monkeypatch: pytest.MonkeyPatch, jar: str) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    for runner, jar_setting in (("flink", "flink_job_server_jar"), ("spark", "spark_job_server_jar")):
        with pytest.raises(RuntimeError, match=f"no `java` on PATH: Beam's {runner} job server is a Java program"):
            pipeline_options(runner, **{jar_setting: jar})


def test_a_jar_url_is_left_for_beam_to_fetch() -> None:
    url = "https://repo.example/beam-runners-flink-job-server.jar"
    assert f"--flink_job_server_jar={url}" in runner_args("flink", flink_job_server_jar=url)


def test_a_cached_job_server_jar_is_checked_against_its_record_and_rebuilt_when_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from beam_curator.runners import job_server

    monkeypatch.setenv("BEAM_CURATOR_CACHE", str(tmp_path))
    monkeypatch.delenv("BEAM_CURATOR_FLINK_JOB_SERVER_JAR", raising=False)
    build = job_server.JOB_SERVERS["flink"]
    jar = job_server.cache_dir() / build.jar_name
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK jar bytes")
    jar.with_suffix(".json").write_text(json.dumps(job_server._record(build, jar)))
    builds: list[str] = []

    def build_again(runner: str) -> Path:
        builds.append(runner)
        jar.write_bytes(b"PK rebuilt")
        jar.with_suffix(".json").write_text(json.dumps(job_server._record(build, jar)))
        return jar

    monkeypatch.setattr(job_server, "build_job_server", build_again)
    assert job_server.job_server_jar("flink") == str(jar) and builds == []
    assert job_server.job_server_jar("flink") == str(jar) and builds == []   # verified once, remembered
    jar.write_bytes(b"PK damaged, another size")
    assert job_server.job_server_jar("flink") == str(jar) and builds == ["flink"]
    assert jar.read_bytes() == b"PK rebuilt"
