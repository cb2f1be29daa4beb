"""Beam's Flink and Spark job servers as jars on disk, built once with Maven.

Beam's FlinkRunner and SparkRunner start a Java job server; without a jar
they download Beam's published one, which fails (or hangs) on a site whose
Maven mirror serves only part of Central, and on one with no internet. The
job server's main class ships in the runner artifact itself
(``beam-runners-flink-1.19``, ``beam-runners-spark-3``), so shading that
artifact with its dependencies (``job_server_pom.xml`` beside this module)
gives an equivalent jar. It is built on first use into a cache folder,
recorded with its checksum and the settings that built it, and checked
against that record before each use; Maven keeps what it downloaded in its
local repository, so a rebuild downloads nothing.

``BEAM_CURATOR_FLINK_JOB_SERVER_JAR`` / ``BEAM_CURATOR_SPARK_JOB_SERVER_JAR``
name a jar to use instead (copied from a machine that built one, or Beam's
own), for machines without Maven.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from beam_curator.stages.io.fingerprint import file_digest

log = logging.getLogger(__name__)

POM = Path(__file__).with_name("job_server_pom.xml")
# Jars this process verified, with the size and modification time they had then: every pipeline run
# asks for its jar, and hashing 150-300 MB each time would cost a second per run for nothing.
_verified_here: dict[str, tuple[int, int]] = {}


class JobServerError(RuntimeError):
    """A job server cannot be had: no Java, no Maven, a failed build, a missing jar."""


@dataclass(frozen=True)
class JobServerBuild:
    """What one job-server jar is built from: the runner artifact on Maven
    Central at ``beam_version``, its main class, and the engine version its
    client libraries speak (a cluster must run the same minor version)."""

    runner: str
    artifact: str
    beam_version: str
    main_class: str
    engine_version: str

    @property
    def variable(self) -> str:
        return f"BEAM_CURATOR_{self.runner.upper()}_JOB_SERVER_JAR"

    @property
    def jar_name(self) -> str:
        return f"beam-{self.runner}-{self.engine_version}-job-server-{self.beam_version}.jar"


# Beam 2.62.0 is the newest release whose runner artifacts and job-service module the registry
# here serves together; the Python SDK (2.77, 2.78) submits to these job servers (tested).
JOB_SERVERS = {
    "flink": JobServerBuild("flink", "beam-runners-flink-1.19", "2.62.0",
                            "org.apache.beam.runners.flink.FlinkJobServerDriver", "1.19"),
    "spark": JobServerBuild("spark", "beam-runners-spark-3", "2.62.0",
                            "org.apache.beam.runners.spark.SparkJobServerDriver", "3.5.7"),
}


def cache_dir() -> Path:
    """``$BEAM_CURATOR_CACHE/job-servers``, else ``~/.cache/beam_curator/job-servers``."""
    root = os.environ.get("BEAM_CURATOR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "beam_curator")
    return Path(root) / "job-servers"


def require_java(runner: str) -> str:
    java = shutil.which("java")
    if not java:
        raise JobServerError(
            f"no `java` on PATH: Beam's {runner} job server is a Java program. Install a Java 11 or 17 runtime "
            "(for example `apt-get install openjdk-17-jre-headless`), or give job_endpoint= of a job server "
            "that is already running"
        )
    return java


def _record(build: JobServerBuild, jar: Path) -> dict:
    return {"build": asdict(build), "pom_sha256": file_digest(POM), "size": jar.stat().st_size, "sha256": file_digest(jar)}


def _verified(build: JobServerBuild, jar: Path) -> bool:
    """The cached jar is the one this build made: same settings, same pom, same bytes."""
    record_path = jar.with_suffix(".json")
    if not (jar.is_file() and record_path.is_file()):
        return False
    try:
        record = json.loads(record_path.read_text())
    except ValueError:
        return False
    if record.get("build") != asdict(build) or record.get("pom_sha256") != file_digest(POM):
        return False
    return record.get("size") == jar.stat().st_size and record.get("sha256") == file_digest(jar)


def build_job_server(runner: str, folder: Path | None = None) -> Path:
    """Build the job-server jar for ``runner`` with Maven into ``folder`` (the cache by default)."""
    build = JOB_SERVERS[runner]
    require_java(runner)
    mvn = shutil.which("mvn")
    if not mvn:
        raise JobServerError(
            f"no `mvn` on PATH to build Beam's {runner} job server. Install Maven, or build the jar on a machine "
            f"that has it (`beam-curator job-server {runner}` prints its path), copy it here and name it in "
            f"{build.variable}"
        )
    folder = folder or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    jar = folder / build.jar_name
    log.info("building Beam's %s job server (%s:%s) with Maven into %s; once, then cached",
             runner, build.artifact, build.beam_version, jar)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as work:
        shutil.copyfile(POM, Path(work) / "pom.xml")
        command = [mvn, "-B", "-q", "package", f"-P{runner}", f"-Drunner.artifact={build.artifact}",
                   f"-Dbeam.version={build.beam_version}", f"-Dmain.class={build.main_class}",
                   "-Djar.name=job-server"]
        if runner == "spark":
            command.append(f"-Dspark.version={build.engine_version}")
        done = subprocess.run(command, cwd=work, capture_output=True, text=True)
        built = Path(work) / "target" / "job-server.jar"
        if done.returncode != 0 or not built.is_file():
            raise JobServerError(
                f"Maven could not build Beam's {runner} job server ({' '.join(command)}):\n"
                f"{(done.stdout + done.stderr)[-3000:]}\nIf this machine cannot reach Maven Central, copy "
                f"{build.jar_name} from one that can and name it in {build.variable}"
            )
        record = _record(build, built)
        os.replace(built, jar)  # same folder: the final name appears whole or not at all
    jar.with_suffix(".json").write_text(json.dumps(record, indent=1))
    return jar


def job_server_jar(runner: str) -> str:
    """The jar to start ``runner``'s job server from: ``$BEAM_CURATOR_<RUNNER>_JOB_SERVER_JAR``
    when set, else the verified cached build, built now if missing or not what it should be."""
    build = JOB_SERVERS[runner]
    named = os.environ.get(build.variable)
    if named:
        if not os.path.isfile(named):
            raise JobServerError(f"{build.variable}={named!r} is not a file; give the path of a {runner} job-server jar "
                                 "or unset it to build one with Maven")
        return named
    jar = cache_dir() / build.jar_name
    if jar.is_file() and _verified_here.get(str(jar)) == _stamp(jar):
        return str(jar)
    if not _verified(build, jar):
        if jar.exists():
            log.warning("the cached %s does not match its build record; building it again", jar)
        jar = build_job_server(runner)
    _verified_here[str(jar)] = _stamp(jar)
    return str(jar)


def _stamp(jar: Path) -> tuple[int, int]:
    info = jar.stat()
    return info.st_size, info.st_mtime_ns
