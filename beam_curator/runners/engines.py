"""Standalone Flink and Spark clusters on this machine, for trying and testing the cluster runners.

A real cluster, each daemon its own JVM: a Flink JobManager and TaskManager,
or a Spark master and worker, started from the engine's own jars as PyPI
ships them (``apache-flink-libraries``, ``pyspark``: ``pip install
"beam-curator[clusters]"``), with the versions Beam's job servers here are
built for (:data:`~beam_curator.runners.job_server.JOB_SERVERS`). On a real
cluster use the engine's own distribution and scripts instead; the runner
settings are the same (``flink_master=`` the JobManager's REST address,
``spark_master_url=`` the master's ``spark://`` URL).

``with FlinkCluster() as flink: pipeline.run(..., runner="flink", **flink.settings())``
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from beam_curator.runners.flink_runner import cancel_job
from beam_curator.runners.job_server import require_java
from beam_curator.runners.services import Service, free_port, get_json

# Java 17 closes these to reflection; both engines' serializers and memory managers use them.
JAVA_OPENS = [f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
    "java.util.concurrent", "java.util.concurrent.atomic", "java.text", "java.time", "sun.nio.ch", "sun.nio.cs",
    "sun.security.action", "sun.util.calendar")] + ["--add-exports=java.base/sun.nio.ch=ALL-UNNAMED"]


def _package_dir(module: str, extra: str) -> Path:
    try:
        package = __import__(module)
    except ImportError as error:
        raise RuntimeError(f"{module} is not installed: pip install \"beam-curator[{extra}]\"") from error
    return Path(package.__file__).resolve().parent if package.__file__ else Path(list(package.__path__)[0])


class _Cluster:
    """Daemons started in order and stopped in reverse, in one scratch folder."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"beam-curator-{type(self).__name__.lower()}-"))
        self.daemons: list[Service] = []

    def _start(self, service: Service) -> Service:
        self.daemons.append(service)
        try:
            return service.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.stop()
        self.daemons.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def start(self) -> "_Cluster":
        """Start the daemons; each subclass knows its engine's."""
        raise NotImplementedError

    def __enter__(self) -> "_Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FlinkCluster(_Cluster):
    """A Flink session cluster: one JobManager, one TaskManager with ``slots`` slots.

    ``restart_attempts`` is Flink's fixed-delay restart strategy: a failed
    task is restarted that many times before the job fails. Each blocking
    shuffle a task writes takes ``SHUFFLE_BUFFERS`` network buffers, not
    Flink's 512 (16 MiB): with 512, a pipeline of many shuffles (the dedup
    transforms chained, ``FuzzyDedup``'s star rounds) failed here for want of
    buffers ("Insufficient number of network buffers").

    ``conf`` adds or overrides entries of the cluster's ``flink-conf.yaml``,
    e.g. ``{"taskmanager.memory.task.off-heap.size": "1g"}``.
    """

    SHUFFLE_BUFFERS = 64

    def __init__(self, slots: int = 2, restart_attempts: int = 3, taskmanager_memory: str = "1600m",
                 conf: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.home = _package_dir("pyflink", "clusters")
        self.slots, self.restart_attempts, self.taskmanager_memory = slots, restart_attempts, taskmanager_memory
        self.conf = dict(conf or {})
        self.rest_port, self.rpc_port = free_port(), free_port()
        self.jobmanager: Service | None = None
        self.taskmanager: Service | None = None

    @property
    def master(self) -> str:
        """The JobManager's REST address, Beam's ``flink_master``."""
        return f"localhost:{self.rest_port}"

    def settings(self) -> dict[str, object]:
        return {"flink_master": self.master, "parallelism": self.slots}

    def _configure(self) -> Path:
        conf = self.folder / "conf"
        conf.mkdir()
        settings = {
            "jobmanager.rpc.address": "localhost", "jobmanager.rpc.port": self.rpc_port,
            "jobmanager.bind-host": "localhost", "taskmanager.bind-host": "localhost", "taskmanager.host": "localhost",
            "rest.address": "localhost", "rest.bind-address": "localhost", "rest.port": self.rest_port,
            "jobmanager.memory.process.size": "1024m", "taskmanager.memory.process.size": self.taskmanager_memory,
            "taskmanager.numberOfTaskSlots": self.slots, "parallelism.default": self.slots,
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": self.restart_attempts,
            "restart-strategy.fixed-delay.delay": "1 s", "io.tmp.dirs": str(self.folder / "tmp"),
            "taskmanager.network.sort-shuffle.min-buffers": self.SHUFFLE_BUFFERS,
            "env.java.opts.all": " ".join(JAVA_OPENS),
            **self.conf,
        }
        (conf / "flink-conf.yaml").write_text("".join(f"{key}: {value}\n" for key, value in settings.items()))
        (conf / "log4j.properties").write_text(
            "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = FileAppender\n"
            "appender.file.name = FileAppender\nappender.file.type = FILE\nappender.file.fileName = ${sys:log.file}\n"
            "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = %d %-5p %c - %m%n\n")
        (self.folder / "tmp").mkdir()
        return conf

    def _daemon(self, name: str, entry_point: str, params: str, java: str, conf: Path) -> Service:
        """A Flink daemon with the memory flags Flink's own start scripts would give it (from BashJavaUtils)."""
        classpath = os.pathsep.join([str(self.home / "bin" / "bash-java-utils.jar"), str(self.home / "lib" / "*")])
        done = subprocess.run([java, "-cp", classpath, "org.apache.flink.runtime.util.bash.BashJavaUtils", params,
                               "--configDir", str(conf)], capture_output=True, text=True, check=True)
        results = [line.split(":", 1)[1] for line in done.stdout.splitlines() if line.startswith("BASH_JAVA_UTILS_EXEC_RESULT:")]
        jvm, dynamic = results[0].split(), results[-1].split() if len(results) > 1 else []
        log_file = self.folder / f"{name}.log"
        command = [java, *jvm, *JAVA_OPENS, f"-Dlog.file={log_file}",
                   f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}",
                   "-cp", str(self.home / "lib" / "*"), entry_point, "--configDir", str(conf), *dynamic]
        return Service(f"flink-{name}", command, None, folders=[self.folder])

    def start(self) -> "FlinkCluster":
        java = require_java("flink")
        conf = self._configure()
        jobmanager = self._daemon("jobmanager", "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
                                  "GET_JM_RESOURCE_PARAMS", java, conf)
        jobmanager.port, jobmanager.startup_timeout = self.rest_port, 90.0
        self.jobmanager = self._start(jobmanager)
        self._start_taskmanager()
        return self

    def _start_taskmanager(self) -> None:
        self.taskmanager = self._start(self._daemon("taskmanager", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
                                                    "GET_TM_RESOURCE_PARAMS", require_java("flink"), self.folder / "conf"))
        self.wait_for_slots()

    def wait_for_slots(self, timeout: float = 90.0) -> None:
        """Until the TaskManager has registered its slots with the JobManager."""

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.taskmanager and self.taskmanager.process and self.taskmanager.process.poll() is not None:
                raise RuntimeError(f"the TaskManager exited:\n{self.log('taskmanager')}")
            try:
                if get_json(f"http://{self.master}/overview").get("slots-total", 0) >= self.slots:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"no TaskManager registered within {timeout} s:\n{self.log('taskmanager')}")

    def jobs(self) -> list[dict]:
        """The cluster's jobs (``id``, ``status``), from the REST API."""
        return get_json(f"http://{self.master}/jobs")["jobs"]

    def cancel(self, job_id: str) -> None:
        """Cancel a job through the REST API (:func:`~beam_curator.runners.flink_runner.cancel_job`)."""
        cancel_job(self.master, job_id)

    def restart_taskmanager(self) -> None:
        """A new TaskManager after the old one died (a cluster manager would start it)."""
        assert self.taskmanager is not None
        self.taskmanager.stop()
        self.daemons.remove(self.taskmanager)
        self._start_taskmanager()

    def log(self, name: str, lines: int = 40) -> str:
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


class SparkCluster(_Cluster):
    """A Spark standalone cluster: one master, one worker with ``cores`` cores."""

    def __init__(self, cores: int = 2, memory: str = "2g") -> None:
        super().__init__()
        self.home = _package_dir("pyspark", "clusters")
        self.cores, self.memory = cores, memory
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.master_daemon: Service | None = None
        self.worker: Service | None = None

    @property
    def master_url(self) -> str:
        return f"spark://localhost:{self.port}"

    def settings(self) -> dict[str, object]:
        return {"spark_master_url": self.master_url}

    def _daemon(self, name: str, arguments: list[str], port: int | None) -> Service:
        env = dict(os.environ, SPARK_HOME=str(self.home), SPARK_WORKER_DIR=str(self.folder / "work"),
                   SPARK_LOCAL_DIRS=str(self.folder / "local"), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_SCALA_VERSION="2.12")  # what load-spark-env.sh would set; executors need it
        command = [require_java("spark"), "-Xmx512m", *JAVA_OPENS, "-cp", str(self.home / "jars" / "*"), *arguments]
        return Service(f"spark-{name}", command, port, env=env, cwd=str(self.folder), startup_timeout=90.0,
                       folders=[self.folder])

    def start(self) -> "SparkCluster":
        self.master_daemon = self._start(self._daemon("master", [
            "org.apache.spark.deploy.master.Master", "--host", "localhost", "--port", str(self.port),
            "--webui-port", str(self.ui_port)], self.port))
        self.start_worker()
        return self

    def start_worker(self, timeout: float = 90.0) -> None:

        self.worker = self._start(self._daemon("worker", [
            "org.apache.spark.deploy.worker.Worker", "--host", "localhost", "--cores", str(self.cores),
            "--memory", self.memory, "--webui-port", str(self.worker_ui_port), self.master_url], self.worker_ui_port))
        deadline = time.monotonic() + timeout
        while not any(worker.get("state") == "ALIVE" for worker in self.state().get("workers", [])):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Spark worker registered within {timeout} s:\n{self.worker.log_tail()}")
            time.sleep(0.5)

    def state(self) -> dict:
        """The master's view (``workers``, ``activeapps``...), from its web UI's JSON."""
        return get_json(f"http://localhost:{self.ui_port}/json/")

    def kill_application(self, app_id: str) -> None:
        """Kill an application from the master, as its web UI's kill link does."""
        request = urllib.request.Request(f"http://localhost:{self.ui_port}/app/kill/?id={app_id}&terminate=true",
                                         data=b"", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def restart_worker(self) -> None:
        """A new worker after the old one died."""
        assert self.worker is not None
        self.worker.stop()
        self.daemons.remove(self.worker)
        self.start_worker()
