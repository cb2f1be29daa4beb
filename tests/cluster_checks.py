"""The checks every engine's cluster passes, as a base class that
``test_cluster_flink.py`` and ``test_cluster_spark.py`` run against a Flink
and a Spark cluster (engine-specific steps are the subclasses' methods).

Beam's job servers are built with Maven on first use (or taken from
``BEAM_CURATOR_FLINK_JOB_SERVER_JAR`` / ``BEAM_CURATOR_SPARK_JOB_SERVER_JAR``);
the engines run as the embedded clusters of their job servers and as
standalone clusters of separate JVMs (a JobManager and a TaskManager; a
Spark master and worker) started from PyPI's engine jars. SDK workers come
from an EXTERNAL worker pool (no Docker here). Each test that interrupts a
run compares the rerun's output with an uninterrupted run's. One file per
engine, so that pytest-xdist (``--dist loadfile``) runs each engine's tests
in one worker process, which starts that engine's cluster once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import ContextManager, Iterator

import numpy as np
import pandas as pd
import pytest

from beam_curator.checkpoint import open_store
from beam_curator.runners import WorkerPool
from beam_curator.runners.job_server import JOB_SERVERS, job_server_jar
from beam_curator.runners.services import end_orphans
from beam_curator.workflows import ExactDeduplicationWorkflow
from stages_for_tests import killed_on_a_runner_and_resumed, run_and_resume, writer_pids

TESTS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS_DIR / "scripts"))
import curator_helpers  # noqa: E402  (tests/scripts: the driver script's stages)
import test_exact_workflow as exact_tests  # noqa: E402
import test_fuzzy_workflow as fuzzy_tests  # noqa: E402
from test_semdedup_workers import check_marks_from_workers, output_times, write_input  # noqa: E402


def missing(engine: str, package: str | None = None) -> str:
    """Why ``engine`` cannot run here, or "" when it can."""
    if not shutil.which("java"):
        return "no java on PATH to run the job server"
    named = os.environ.get(JOB_SERVERS[engine].variable)
    if not named and not shutil.which("mvn"):
        return f"no mvn on PATH to build the {engine} job server, and {JOB_SERVERS[engine].variable} is unset"
    if package:
        try:
            __import__(package)
        except ImportError:
            return f"{package} is not installed (the clusters extra) to start a standalone {engine} cluster"
    return ""


FILES = 10
DELAY = 1.0
# How a terminal's Ctrl-C and a scheduler's SIGTERM stop the submitting process, and its exit status then.
STOPS = {"ctrl-c": (signal.SIGINT, 130), "sigterm": (signal.SIGTERM, 143)}


def driver_command(tmp_path: Path, input_dir: Path, runner: dict, log: str, *extra: str) -> list[str]:
    """The resumable test pipeline's driver script on ``runner``, each partition taking ``DELAY`` s, logging
    the partitions it runs to ``log``."""
    settings = {key: value for key, value in runner.items() if key != "runner"}
    return [sys.executable, str(TESTS_DIR / "scripts" / "resume_pipeline.py"), str(input_dir), str(tmp_path / "out"),
            str(tmp_path / "ckpt"), "--log", str(tmp_path / log), "--delay", str(DELAY),
            "--runner", runner["runner"], "--settings", json.dumps(settings), *extra]


def driver_environment() -> dict[str, str]:
    """This environment, with the driver script's folder importable."""
    return dict(os.environ, PYTHONPATH=curator_helpers.scripts_pythonpath())


def reference_run(tmp_path: Path, input_dir: Path) -> Path:
    """The output folder of an uninterrupted run on the local runner."""
    reference = tmp_path / "reference"
    curator_helpers.resume_pipeline(str(input_dir), str(reference), str(tmp_path / "reference.log"), 0).run()
    return reference


def running_job(cluster: object) -> str | None:
    """The id of the engine's running job or application, if any."""
    if hasattr(cluster, "jobs"):
        return next((job["id"] for job in cluster.jobs() if job["status"] in ("RUNNING", "RESTARTING", "CREATED")), None)
    return next((app["id"] for app in cluster.state().get("activeapps", [])), None)


def wait_until_idle(cluster: object, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while running_job(cluster):
        assert time.monotonic() < deadline, "the engine's job never ended"
        time.sleep(0.5)


def rerun_and_compare(tmp_path: Path, input_dir: Path, runner: dict, reference: Path, *extra: str) -> None:
    """Rerun the same command: it redoes exactly the unmarked partitions and the output equals an
    uninterrupted run's; then every partition is marked."""
    every = {curator_helpers.source_id([file]) for file in input_dir.glob("*.jsonl")}
    marked = open_store(str(tmp_path / "ckpt")).completed()
    second = subprocess.run(driver_command(tmp_path, input_dir, runner, "second.log", *extra), capture_output=True, text=True,
                            timeout=300, env=driver_environment())
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary == {"pending": FILES - len(marked), "skipped": len(marked), "completed": FILES - len(marked)}
    log = tmp_path / "second.log"
    rerun = ["_".join(line.split("_")[:2]) for line in log.read_text().splitlines()] if log.exists() else []
    assert sorted(rerun) == sorted(every - marked), "each unmarked partition once, and only those"
    output = tmp_path / "out"
    assert sorted(p.name for p in output.iterdir() if not p.name.startswith(".")) == sorted(p.name for p in reference.iterdir())
    assert curator_helpers.output_rows(output) == curator_helpers.output_rows(reference)
    assert open_store(str(tmp_path / "ckpt")).completed() == every


def mark_times(tmp_path: Path, command: list[str]) -> tuple[list[float], float]:
    """Run ``command`` to its end, watching the checkpoint: when each partition's mark appeared and when
    the driver exited, in seconds from its start; its summary says every partition completed."""
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=driver_environment())
    start, seen = time.monotonic(), {}
    while first.poll() is None:
        for partition in open_store(str(tmp_path / "ckpt")).completed() - seen.keys():
            seen[partition] = time.monotonic() - start
        time.sleep(0.05)
    end = time.monotonic() - start
    out, err = first.communicate()
    assert first.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["completed"] == FILES
    return sorted(seen.values()), end


def check_marks_as_partitions_finish(times: list[float], end: float, what: str) -> None:
    print(f"{what}: first mark {times[0]:.1f} s, last {times[-1]:.1f} s, driver exit {end:.1f} s")
    assert len(times) >= FILES // 2 and times[0] < times[-1] - 2 * DELAY, \
        f"marks must appear as partitions finish, not all at the end: {times} (driver exit {end:.1f} s)"


def run_marks_from_workers(checkpoint: Path) -> bool:
    pids = writer_pids(checkpoint)
    return bool(pids) and os.getpid() not in pids


def command_duplicates(tmp_path: Path, name: str, runner: list[str]) -> tuple[set[str], str, int]:
    """``beam-curator semdedup`` on ``write_input``'s files in ``tmp_path / "input"``: the removed ids,
    the printed output and the command's pid."""
    command = [str(Path(sys.executable).parent / "beam-curator"), "semdedup", "--input", str(tmp_path / "input"),
               "--input-filetype", "jsonl", "--output", str(tmp_path / name), "--cache", str(tmp_path / f"{name}-cache"),
               "--id-field", "doc_id", "--n-clusters", "2", "--eps", "0.01", "--embedding-backend",
               "sentence-transformers", *runner]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=driver_environment()) as done:
        out, err = done.communicate(timeout=900)
    assert done.returncode == 0, err[-3000:]

    removed = pd.read_parquet(tmp_path / name / "duplicates" / "duplicates.parquet")
    return set(removed["id"].astype(str)), out + err, done.pid


def trigram_vector(text: str, dimensions: int = 32) -> list[float]:
    """A document's vector as it might come with the data: its character trigrams hashed into
    ``dimensions`` counts, of unit length (near-copies get near vectors)."""
    counts = np.zeros(dimensions)
    for start in range(len(text) - 2):
        counts[zlib.crc32(text[start:start + 3].encode()) % dimensions] += 1
    return (counts / max(np.linalg.norm(counts), 1e-12)).tolist()


STAR_ROUNDS = 1


def chained_dedup(folder: Path, runner: dict) -> dict[str, list[str]]:
    """``ExactDedup`` → ``FuzzyDedup`` → ``SemanticDedup`` (on vectors the documents carry) over the bundled
    sample in one pipeline on ``runner``: the ids kept, and each removed id with the transform that removed
    it and the id it duplicates."""
    import apache_beam as beam

    from beam_curator.data import sample_corpus_path
    from beam_curator.runners import pipeline_options
    from beam_curator.transforms import ExactDedup, FuzzyDedup, SemanticDedup

    documents = [dict(record, vector=trigram_vector(record["text"]))
                 for path in sorted(Path(sample_corpus_path()).glob("*.jsonl"))
                 for record in map(json.loads, path.read_text().splitlines())]
    with beam.Pipeline(options=pipeline_options(**runner)) as pipeline:
        exact = pipeline | beam.Create(documents) | ExactDedup(id_field="doc_id")
        # The sample's groups and chains settle in one round: fewer rounds, fewer stages for the engine to run.
        fuzzy = exact.kept | FuzzyDedup(id_field="doc_id", star_rounds=STAR_ROUNDS)
        semantic = fuzzy.kept | SemanticDedup(id_field="doc_id", embedding_field="vector", n_clusters=4, eps=0.02,
                                              star_rounds=STAR_ROUNDS)
        _ = (semantic.kept | "KeptIds" >> beam.Map(lambda document: document["doc_id"])
             | "WriteKept" >> beam.io.WriteToText(str(folder / "kept")))
        removed = [result.removed | f"{name}Ids" >> beam.Map(
                       lambda document, name=name: f"{name} {document['doc_id']} {document['duplicate_of']}")
                   for name, result in (("exact", exact), ("fuzzy", fuzzy), ("semantic", semantic))]
        _ = removed | beam.Flatten() | "WriteRemoved" >> beam.io.WriteToText(str(folder / "removed"))
    return {name: sorted(line for path in folder.glob(f"{name}*") for line in path.read_text().splitlines())
            for name in ("kept", "removed")}


class ClusterChecks:
    """What a run on an engine's standalone cluster (the subclass's ``cluster``
    fixture) and on its job server's embedded cluster must do."""

    engine: str
    package: str  # the Python package the standalone cluster is started from
    embedded: dict  # runner settings of the job server's embedded cluster
    # The phase in which the fuzzy workflow's check kills a run on the engine (each engine another one; every
    # phase is killed in turn on the local runners with workers).
    killed_phase = "identification"

    # ---- engine-specific steps ----------------------------------------------------------------------

    def standalone_cluster(self) -> ContextManager[object]:
        """The engine's standalone cluster, stopped when the context ends."""
        raise NotImplementedError

    def cli_flags(self, cluster: object) -> list[str]:
        """The command's flags that name the cluster."""
        raise NotImplementedError

    def cancel(self, cluster: object, job: str) -> None:
        """Cancel ``job`` through the engine."""
        raise NotImplementedError

    def kill_worker(self, cluster: object) -> None:
        """SIGKILL the cluster's worker and what it runs."""
        raise NotImplementedError

    def restart_worker(self, cluster: object) -> None:
        """Start a new worker in the killed one's place."""
        raise NotImplementedError

    def job_servers(self) -> int:
        """How many job servers this process's runs keep for later pipelines."""
        return 0

    # ---- fixtures ------------------------------------------------------------------------------------

    @pytest.fixture(scope="class")
    def pool(self) -> Iterator[WorkerPool]:
        """SDK workers that can import both the test stages and the driver script's."""
        with WorkerPool(pythonpath=[str(TESTS_DIR), str(TESTS_DIR / "scripts")]) as workers:
            yield workers

    @pytest.fixture(scope="class", autouse=True)
    def job_servers_stopped(self) -> Iterator[None]:
        """The job servers this class's runs started (one per settings, kept by
        the runners for the process's later pipelines) stopped with the class,
        while pytest still captures what their stopping logs."""
        yield
        from apache_beam.runners.portability.spark_runner import JOB_SERVER_CACHE

        from beam_curator.runners.flink_runner import _JOB_SERVERS

        for servers in (_JOB_SERVERS, JOB_SERVER_CACHE):
            for server in servers.values():
                server.stop()
            servers.clear()

    @pytest.fixture(scope="class")
    def cluster(self) -> Iterator[object]:
        if missing(self.engine, self.package):
            pytest.skip(missing(self.engine, self.package))
        job_server_jar(self.engine)  # built before the cluster starts, not inside a test's timing
        with self.standalone_cluster() as cluster:
            yield cluster

    def runner(self, cluster: object, pool: WorkerPool) -> dict:
        return {"runner": self.engine, **cluster.settings(), **pool.settings()}

    # ---- the checks ----------------------------------------------------------------------------------

    def test_the_embedded_cluster_marks_from_workers_and_resumes(self, tmp_path: Path, pool: WorkerPool) -> None:
        if missing(self.engine):
            pytest.skip(missing(self.engine))
        pids, _ = run_and_resume(tmp_path, self.engine, **self.embedded, **pool.settings())
        assert pool.process.pid not in pids

    def test_cluster_marks_as_partitions_finish_from_the_engines_workers(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        input_dir = curator_helpers.write_corpus(tmp_path / "in", FILES)
        reference = reference_run(tmp_path, input_dir)
        times, end = mark_times(tmp_path, driver_command(tmp_path, input_dir, self.runner(cluster, pool), "first.log"))
        check_marks_as_partitions_finish(times, end, self.engine)
        assert curator_helpers.output_rows(tmp_path / "out") == curator_helpers.output_rows(reference)
        assert run_marks_from_workers(tmp_path / "ckpt")

    @pytest.mark.parametrize("hows", [("sigterm", "ctrl-c", "kill-driver"), ("kill-worker",)],
                             ids=["sigterm-ctrl-c-kill-driver", "kill-worker"])
    def test_an_interrupted_cluster_run_resumes_to_the_uninterrupted_output(
        self, tmp_path: Path, pool: WorkerPool, cluster: object, hows: tuple[str, ...],
    ) -> None:
        """Stop the submitting process as a scheduler's SIGTERM does, then its rerun as a terminal's
        Ctrl-C does (its whole process group, Beam's job server with it), then SIGKILL the next rerun's
        submitting process; or SIGKILL the engine's worker (TaskManager / Spark worker and its
        executors), whose tasks the engine reruns: each once some partitions more are marked; then
        rerun. (A job cancelled through the engine: ``test_fuzzy_dedup_killed_on_the_engine...``.)"""
        self.interrupt_and_rerun(tmp_path, pool, cluster, hows)

    def check_stopped(self, cluster: object, jobs_before: set[str], console: str) -> None:
        """After a stop the driver said one line, and the engine runs nothing of the run: each of its
        jobs ended cancelled (Flink), its application ended (Spark)."""
        (line,) = console.splitlines()
        assert re.fullmatch(r"(interrupted|stopped by SIGTERM); \d+ partitions of 'resume' complete: "
                            r"rerun the same command to resume", line), console[-3000:]
        self.check_cancelled(cluster, jobs_before)

    def check_cancelled(self, cluster: object, jobs_before: set[str]) -> None:
        """The run's jobs on the engine, those not in ``jobs_before``, ended without running on."""
        raise NotImplementedError

    def job_ids(self, cluster: object) -> set[str]:
        """Every job or application the engine knows, running or ended."""
        raise NotImplementedError

    def interrupt_and_rerun(self, tmp_path: Path, pool: WorkerPool, cluster: object, hows: tuple[str, ...],
                            *extra: str) -> None:
        """Run the driver with ``extra`` flags and interrupt it as each of ``hows`` says, in turn (each
        stop a rerun of the run stopped before), once the run marks a partition more; then rerun it to
        the end (``rerun_and_compare``)."""
        runner = self.runner(cluster, pool)
        input_dir = curator_helpers.write_corpus(tmp_path / "in", FILES)
        reference = reference_run(tmp_path, input_dir)
        every = {curator_helpers.source_id([file]) for file in input_dir.glob("*.jsonl")}
        for number, how in enumerate(hows):
            self.interrupt(tmp_path, cluster, how, driver_command(tmp_path, input_dir, runner, f"stopped-{number}.log",
                                                                  *extra), every)
        rerun_and_compare(tmp_path, input_dir, runner, reference, *extra)

    def interrupt(self, tmp_path: Path, cluster: object, how: str, command: list[str], every: set[str]) -> None:
        """Start ``command``, and once the checkpoint marks a partition more than before, interrupt it as
        ``how`` says; the engine is idle after, and (but for a killed worker, whose tasks the engine
        reruns) some partitions are left for the next run."""
        console, jobs_before = tmp_path / "console.out", self.job_ids(cluster)
        marked_before = open_store(str(tmp_path / "ckpt")).completed() if (tmp_path / "ckpt").exists() else set()
        with console.open("w") as sink:
            run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink, env=driver_environment(),
                                   start_new_session=True)
            try:
                deadline = time.monotonic() + 240
                while not open_store(str(tmp_path / "ckpt")).completed() - marked_before:
                    assert run.poll() is None, f"the run ended before it could be interrupted:\n{console.read_text()[-3000:]}"
                    assert time.monotonic() < deadline, f"no partition was marked:\n{console.read_text()[-3000:]}"
                    time.sleep(0.05)
                if how in STOPS:
                    os.killpg(run.pid, STOPS[how][0])
                    assert run.wait(timeout=120) == STOPS[how][1], console.read_text()[-3000:]
                    self.check_stopped(cluster, jobs_before, console.read_text())
                elif how == "kill-worker":
                    self.kill_worker(cluster)
                    assert open_store(str(tmp_path / "ckpt")).completed() < every, \
                        "every partition was marked before the worker was killed"
                    self.restart_worker(cluster)
                    run.wait(timeout=240)  # the engine restarts the lost tasks on the new worker, or fails the job
                else:
                    run.send_signal(signal.SIGKILL)
                    run.wait(timeout=30)
                    # The job server it started lives on, and is what the next run's start ends.
                    assert "job-server" in end_orphans(), "the killed driver's job server was not found"
                    wait_until_idle(cluster)
            finally:
                try:
                    os.killpg(run.pid, signal.SIGKILL)  # the job server it started, if it outlived it
                except ProcessLookupError:
                    pass
        wait_until_idle(cluster)
        if how != "kill-worker":
            assert open_store(str(tmp_path / "ckpt")).completed() < every or how == "kill-driver", \
                "every partition was marked before the interruption took effect"

    def test_a_task_that_fails_once_is_retried_by_the_engine(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """Flink's restart strategy / Spark's task retries rerun a failed task: the run completes,
        credits stay exact (every partition marked once complete) and no row is written twice."""
        files = 4
        input_dir = curator_helpers.write_corpus(tmp_path / "in", files)
        reference = reference_run(tmp_path, input_dir)
        command = [*driver_command(tmp_path, input_dir, self.runner(cluster, pool), "first.log"),
                   "--fail-once-dir", str(tmp_path / "attempts")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=400, env=driver_environment())
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary == {"pending": files, "skipped": 0, "completed": files}, (summary, done.stderr[-3000:])
        assert len(list((tmp_path / "attempts").iterdir())) == files, "every partition failed once first"
        assert curator_helpers.output_rows(tmp_path / "out") == curator_helpers.output_rows(reference)
        assert open_store(str(tmp_path / "ckpt")).completed() == {curator_helpers.source_id([f]) for f in input_dir.glob("*.jsonl")}

    def test_semantic_dedup_command_on_the_cluster_removes_one_of_each_planted_pair(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """``beam-curator semdedup`` with the model loaded in the engine's workers: one of each planted pair
        removed; every phase marked from the workers; a rerun writes nothing and
        says so. Summaries come from the job servers' metrics."""
        write_input(tmp_path / "input")
        flags = ["--runner", self.engine, *self.cli_flags(cluster), "--environment-type", "EXTERNAL",
                 "--environment-config", pool.address]
        on_cluster, out, driver = command_duplicates(tmp_path, "out", flags)
        assert "semantic deduplication summary" in out
        assert len(on_cluster) == 2 and len(on_cluster & {"d1", "copy-1"}) == len(on_cluster & {"d4", "copy-4"}) == 1
        check_marks_from_workers(tmp_path / "out-cache", driver)
        written = output_times(tmp_path / "out")
        again, out, _ = command_duplicates(tmp_path, "out", flags)
        assert again == on_cluster and output_times(tmp_path / "out") == written, "the rerun wrote output again"
        assert "embedding: inputs and settings unchanged" in out and "removal: inputs and settings unchanged" in out, \
            out[-2000:]

    def test_an_input_error_on_the_engines_workers_reaches_the_api_as_itself(self, tmp_path: Path, pool: WorkerPool) -> None:
        """Beam hands the driver a worker's error as the job's failure text; the
        package's own error is found in it and raised as itself, message alone.
        (On the embedded cluster, which fails the job at once: the standalone
        ones retry a failed task, as ``test_a_task_that_fails_once...`` checks.)"""
        if missing(self.engine):
            pytest.skip(missing(self.engine))
        from beam_curator import Pipeline
        from beam_curator.stages.io import CuratorInputError, JsonlReader, JsonlWriter

        input_dir = curator_helpers.write_corpus(tmp_path / "in", 2)
        bad = input_dir / "part-001.jsonl"
        bad.write_text('{"id": "a", "n": 1, "text": "fine"}\n{"id": "b", n: 2}\n')
        pipeline = Pipeline("bad-input", stages=[JsonlReader(str(input_dir)), JsonlWriter(str(tmp_path / "out"))])
        with pytest.raises(CuratorInputError) as raised:
            pipeline.run(str(tmp_path / "ckpt"), runner=self.engine, **self.embedded, **pool.settings())
        assert str(raised.value).startswith(f"{bad}, line 2: malformed JSON"), str(raised.value)[:500]
        assert "Traceback" not in str(raised.value) and "while running" not in str(raised.value)

    def test_exact_dedup_on_s3_from_workers_without_credentials_matches_the_local_runner(
        self, tmp_path: Path, pool: WorkerPool, cluster: object, s3_server: object, s3_bucket: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Input, output, cache and checkpoints on S3, the credentials given to the workflow alone (NeMo's
        ``storage_options``): the worker pool, started before with no AWS settings, reads and writes through
        the driver's fsspec settings carried in the pipeline; ids and clean data are the local runner's."""
        import fsspec.config

        credentials = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                       "FSSPEC_S3")
        assert not [name for name in credentials if name in os.environ], "the workers must start without them"
        monkeypatch.setattr(fsspec.config, "conf", {})  # the workflow's settings stay in this test
        monkeypatch.setenv("FSSPEC_S3", "{}")
        exact_tests.write_corpus(tmp_path / "input", files=3, per_file=6)
        s3_server.filesystem().put(f"{tmp_path / 'input'}/", f"{s3_bucket[5:]}/input/", recursive=True)
        storage = {"storage_options": s3_server.storage_options()}
        settings = {"input_filetype": "jsonl", "assign_id": False, "id_field": "doc_id", "perform_removal": True}
        ExactDeduplicationWorkflow(f"{s3_bucket}/out", f"{s3_bucket}/input", read_kwargs=storage,
                                   write_kwargs=storage, **settings, **self.runner(cluster, pool)).run()
        exact_tests.exact(tmp_path, "local", **settings)

        fs = s3_server.filesystem()
        kept = [json.loads(line) for name in fs.find(f"{s3_bucket[5:]}/out/deduplicated")
                for line in fs.cat(name).decode().splitlines()]
        assert curator_helpers.canonical(kept) == curator_helpers.output_rows(tmp_path / "local" / "deduplicated")
        with fs.open(f"{s3_bucket[5:]}/out/ExactDuplicateIds/part.0.parquet") as handle:
            assert sorted(pd.read_parquet(handle)["doc_id"]) == exact_tests.removed(tmp_path / "local", "doc_id")
        assert list(fs.find(f"{s3_bucket[5:]}/out/checkpoints")), "the checkpoints are on S3"

    def test_the_dedup_transforms_in_one_pipeline_remove_what_the_local_runner_removes(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """A user's pipeline chaining the three dedup transforms runs on the engine's workers: the same
        documents kept, the same removed, each naming the same document it duplicates."""
        local = chained_dedup(tmp_path / "local", {"runner": "local"})
        on_cluster = chained_dedup(tmp_path / "cluster", self.runner(cluster, pool))
        assert on_cluster == local
        assert len(local["kept"]) + len(local["removed"]) == 614
        assert {line.split()[0] for line in local["removed"]} == {"exact", "fuzzy", "semantic"}

    def test_fuzzy_dedup_killed_on_the_engine_resumes_to_the_local_runners_ids(
        self, tmp_path: Path, pool: WorkerPool, cluster: object,
    ) -> None:
        """SIGKILL of the driver and the job server it started while the fuzzy workflow's
        ``killed_phase`` runs on the engine, whose job is then cancelled, as a crash of the
        submitting machine would leave it; the rerun on the same cluster starts in that phase or
        the next and lists the local runner's ids (the planted ones). On Flink the rerun's
        pipelines share one job server (``SharedJobServerFlinkRunner``)."""
        runner, servers = self.runner(cluster, pool), self.job_servers()

        def cancel_the_job() -> None:
            job = running_job(cluster)
            if job:
                self.cancel(cluster, job)
            wait_until_idle(cluster)

        planted = fuzzy_tests.expected(fuzzy_tests.write_corpus(tmp_path / "input", files=3, per_file=9))
        kills = [kill for kill in fuzzy_tests.KILLED_IN_EACH_PHASE if kill[0] == self.killed_phase]
        killed_on_a_runner_and_resumed(tmp_path, fuzzy_tests.KILLED_RUN, kills, list(fuzzy_tests.PHASES[:-1]),
                                       lambda name, **settings: fuzzy_tests.fuzzy(tmp_path, name, **settings),
                                       lambda name: fuzzy_tests.removed(tmp_path / name),
                                       runner, cancel_the_job)
        assert fuzzy_tests.removed(tmp_path / "local") == planted
        assert self.job_servers() - servers <= 1, "each pipeline of the rerun started a job server"
