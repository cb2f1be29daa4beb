"""Benchmark: the resumable pipeline and semantic dedup on Flink and Spark clusters against the local runner.

The engines run as standalone clusters on this machine, each daemon its own
JVM (:mod:`beam_curator.runners.engines`: a Flink JobManager and TaskManager
with ``--slots`` slots; a Spark master and a worker with ``--slots`` cores),
started once beforehand with their start-up timed apart. User code runs in
SDK workers of one EXTERNAL worker pool (:class:`~beam_curator.runners.WorkerPool`).
Beam's FlinkRunner and SparkRunner start their Java job server from the
Python process that submits, so the job-server start-up (``java -jar``
until its job port accepts connections) is timed apart too.

1. The resumable pipeline of ``bench_dask.py`` (one JSONL file per partition
   → ``BusyLength``, ``--work-ms`` of CPU per partition → JsonlWriter, with a
   checkpoint), every run from an empty checkpoint, on ``runner="local"``,
   ``"flink"`` and ``"spark"`` in rotating order
   (``common.interleaved_timings``). The first run of each runner in the
   process (the warm-up: on Flink and Spark it includes starting the job
   server) is reported apart from the median of the ``--repeats`` later ones.
2. The semantic dedup workflow on the bundled sample corpus, once per
   runner, checking that every runner keeps the same documents.

CPU time includes the JVMs: this process (and its ended children), plus on
Flink and Spark every process of that engine's daemons' process groups
(executors included), of the worker pool's group (the SDK workers) and the
engine's job-server JVMs that this process started, read from ``/proc``
before and after each run.

    python bench/bench_clusters.py
    python bench/bench_clusters.py --partitions 40 --repeats 3 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apache_beam as beam

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_dask import stages, write_corpus  # noqa: E402  (BusyLength's pipeline; the SDK workers import it too)
from common import (  # noqa: E402
    add_append_argument, interleaved_timings, machine_description, markdown_table, publish, unwind_on_sigterm)

from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.pipeline import Pipeline  # noqa: E402
from beam_curator.runners import WorkerPool  # noqa: E402
from beam_curator.runners.engines import FlinkCluster, SparkCluster  # noqa: E402
from beam_curator.runners.job_server import JOB_SERVERS, job_server_jar, require_java  # noqa: E402
from beam_curator.runners.services import Service, free_port  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


# ---- CPU time of other processes, from /proc ------------------------------------------------------

def _processes() -> dict[int, tuple[int, int, float]]:
    """pid -> (parent pid, process group, CPU seconds) of every process now, the CPU
    seconds including those of its children that ended and were waited for."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                text = stat.read().decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        fields = text[text.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
        ppid, pgrp = int(fields[1]), int(fields[2])
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        found[int(entry.name)] = (ppid, pgrp, (utime + stime + cutime + cstime) / _TICK)
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def group_cpu(groups: set[int], children_matching: str | None = None) -> float:
    """CPU seconds used so far by every process in the process groups ``groups``
    (a :class:`Service` is its group's leader), plus this process's live children
    whose command line contains ``children_matching`` (Beam's job-server JVMs)."""
    total = 0.0
    me = os.getpid()
    for pid, (ppid, pgrp, seconds) in _processes().items():
        if pgrp in groups and pid != me:
            total += seconds
        elif children_matching and ppid == me and children_matching in _command_line(pid):
            total += seconds
    return total


def job_server_children(jar: str) -> list[int]:
    """The job-server JVMs started by this process (Beam's runners) from ``jar``, alive now."""
    me = os.getpid()
    return [pid for pid, (ppid, _, _) in _processes().items() if ppid == me and jar in _command_line(pid)]


def resident_gib(pids: list[int]) -> float:
    """Resident memory of ``pids`` together, in GiB."""
    pages = 0
    for pid in pids:
        try:
            pages += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**30


def own_cpu() -> float:
    """CPU seconds of this process and of its children that ended."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


class Engine:
    """What a run needs and what it is charged with: runner settings, and the processes
    (daemons, SDK worker pool, job servers) whose CPU counts for it."""

    def __init__(self, label: str, runner: str, settings: dict[str, object], groups: set[int], jar: str | None,
                 jobs: Callable[[], int] | None = None) -> None:
        self.label, self.runner, self.settings, self.groups, self.jar = label, runner, settings, groups, jar
        self.jobs = jobs  # count of jobs the engine has run so far
        self.runs: list[tuple[float, float]] = []  # (wall, CPU) of each pipeline run, in order

    def cpu(self) -> float:
        return own_cpu() + (group_cpu(self.groups, self.jar) if self.groups else 0.0)

    def measure(self, work: Callable[[], object]) -> tuple[float, float, object]:
        start, start_cpu = time.perf_counter(), self.cpu()
        result = work()
        wall = time.perf_counter() - start
        return wall, self.cpu() - start_cpu, result


# ---- job-server start-up --------------------------------------------------------------------------

def job_server_startup(runner: str, master: str, repeats: int) -> tuple[float, float]:
    """Median seconds from ``java -jar`` until the job server's job port accepts
    connections, and median CPU seconds it used meanwhile (all its threads)."""
    flag = {"flink": "--flink-master", "spark": "--spark-master-url"}[runner]
    walls, cpus = [], []
    for _ in range(repeats):
        port = free_port()
        command = [require_java(runner), "-jar", job_server_jar(runner), flag, master, "--job-port", str(port),
                   "--artifact-port", "0", "--expansion-port", "0"]
        service = Service(f"{runner}-job-server", command, port, startup_timeout=120.0)
        start = time.perf_counter()
        service.start()
        walls.append(time.perf_counter() - start)
        try:
            cpus.append(group_cpu({service.pid}))
        finally:
            service.stop()
    return statistics.median(walls), statistics.median(cpus)


# ---- semantic dedup -------------------------------------------------------------------------------

def semdedup(engine: Engine, folder: Path, clusters: int, eps: float) -> tuple[float, float, int, list[str], int]:
    """One run of the text workflow from scratch: wall, CPU, duplicates, the kept ids, engine jobs."""
    from beam_curator.workflows import TextSemanticDeduplicationWorkflow

    workflow = TextSemanticDeduplicationWorkflow(
        sample_corpus_path(), str(folder / "output"), str(folder / "cache"), id_field="doc_id",
        input_filetype="jsonl", output_filetype="jsonl", embedding_backend="sentence-transformers",
        n_clusters=clusters, eps=eps, verbose=False, runner=engine.runner, **engine.settings,
    )
    jobs_before = engine.jobs() if engine.jobs else 0
    wall, cpu, result = engine.measure(workflow.run)
    jobs = (engine.jobs() - jobs_before) if engine.jobs else 0
    kept = sorted(json.loads(line)["doc_id"] for path in (folder / "output" / "deduplicated").glob("*.jsonl")
                  for line in path.read_text().splitlines() if line.strip())
    return wall, cpu, int(result.metadata["num_duplicates"]), kept, jobs


def _missing() -> str:
    """Why the clusters cannot run here, or "" when they can."""
    if not shutil.which("java"):
        return "no java on PATH (the engines and Beam's job servers are Java programs)"
    for package in ("pyflink", "pyspark"):
        try:
            __import__(package)
        except ImportError:
            return f'{package} is not installed: pip install "beam-curator[clusters]"'
    return ""


def _java_version() -> str:
    done = subprocess.run([require_java("flink"), "-version"], capture_output=True, text=True)
    return (done.stderr or done.stdout).splitlines()[0].replace('"', "")


def _versions() -> str:
    import pyflink.version
    import pyspark

    flink, spark = JOB_SERVERS["flink"], JOB_SERVERS["spark"]
    return (f"Apache Beam {beam.__version__} (job servers built from Beam {flink.beam_version}), "
            f"Flink {pyflink.version.__version__}, Spark {pyspark.__version__}, {_java_version()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=20, help="input files, one partition each")
    parser.add_argument("--records", type=int, default=100, help="records per file")
    parser.add_argument("--work-ms", type=float, default=50.0, help="CPU milliseconds of stage work per partition")
    parser.add_argument("--slots", type=int, default=2,
                        help="Flink task slots and Spark worker cores (also Flink's parallelism)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="pipeline runs per runner after the first; medians are reported")
    parser.add_argument("--startup-repeats", type=int, default=3, help="job-server start-ups timed per engine")
    parser.add_argument("--clusters", type=int, default=20, help="semantic dedup: k-means clusters")
    parser.add_argument("--eps", type=float, default=0.07, help="semantic dedup: eps")
    parser.add_argument("--no-semdedup", action="store_true", help="leave out the semantic dedup workflow")
    parser.add_argument("--workdir", type=Path, help="where to put the corpus and outputs (default: a temp folder)")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    unwind_on_sigterm()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the worker pool's SDK workers inherit it
    if _missing():
        raise SystemExit(f"bench_clusters: {_missing()}")

    machine = f"{machine_description()}, {_versions()}"
    jars = {runner: job_server_jar(runner) for runner in ("flink", "spark")}  # built (once) before any timing
    workdir = Path(tempfile.mkdtemp(prefix="bench-clusters-", dir=args.workdir))
    corpus = workdir / "corpus"
    write_corpus(corpus, args.partitions, args.records)
    runs = itertools.count()
    startup: dict[str, tuple[float, float]] = {}  # wall and CPU seconds
    flink, spark, pool = FlinkCluster(slots=args.slots), SparkCluster(cores=args.slots), \
        WorkerPool(pythonpath=[str(BENCH)])
    try:
        for name, service, groups in (
                ("Flink cluster (JobManager + TaskManager, until its slots registered)", flink,
                 lambda: {flink.jobmanager.pid, flink.taskmanager.pid}),
                ("Spark cluster (master + worker, until the worker registered)", spark,
                 lambda: {spark.master_daemon.pid, spark.worker.pid}),
                ("SDK worker pool (until its port answers)", pool, lambda: {pool.process.pid})):
            start, start_cpu = time.perf_counter(), own_cpu()
            service.start()
            startup[name] = (time.perf_counter() - start, own_cpu() - start_cpu + group_cpu(groups()))
        print("started: " + ", ".join(f"{name} {wall:.1f} s" for name, (wall, _) in startup.items()),
              file=sys.stderr, flush=True)
        job_servers = {
            "flink": job_server_startup("flink", flink.master, args.startup_repeats),
            "spark": job_server_startup("spark", spark.master_url, args.startup_repeats),
        }
        print(f"job-server start-up: {job_servers}", file=sys.stderr, flush=True)

        pool_group = pool.process.pid
        engines = {
            "local": Engine("local (in-process, 1 worker thread)", "local", {}, set(), None),
            "flink": Engine(f"Flink, {args.slots} slots", "flink", {**flink.settings(), **pool.settings()},
                            {flink.jobmanager.pid, flink.taskmanager.pid, pool_group}, jars["flink"],
                            lambda: len(flink.jobs())),
            "spark": Engine(f"Spark, {args.slots} worker cores", "spark", {**spark.settings(), **pool.settings()},
                            {spark.master_daemon.pid, spark.worker.pid, pool_group}, jars["spark"],
                            lambda: len(spark.state().get("completedapps", []))),
        }
        alive: dict[str, list[int]] = {}  # job-server JVMs alive after each run, per runner
        seen: dict[str, set[int]] = {}  # every job-server JVM seen after a run, per runner

        def count_job_servers(engine: Engine) -> None:
            pids = job_server_children(engine.jar)
            alive.setdefault(engine.runner, []).append(len(pids))
            seen.setdefault(engine.runner, set()).update(pids)

        def contender(engine: Engine):
            def run() -> None:
                folder = workdir / f"run-{next(runs)}"
                wall, cpu, summary = engine.measure(lambda: Pipeline(
                    "bench", stages=stages(corpus, folder / "out", args.work_ms)).run(
                    str(folder / "checkpoint"), engine.runner, **engine.settings))
                if summary.partitions_completed != args.partitions:
                    raise RuntimeError(f"{engine.runner}: {summary}")
                engine.runs.append((wall, cpu))
                if engine.jar:
                    count_job_servers(engine)
                print(f"{engine.runner} run {len(engine.runs)}: {wall:.1f} s, {cpu:.1f} CPU s",
                      file=sys.stderr, flush=True)
                shutil.rmtree(folder)
            return run

        interleaved_timings({name: contender(engine) for name, engine in engines.items()}, args.repeats)

        dedup: dict[str, tuple[float, float, int, list[str], int]] = {}
        at_end: dict[str, tuple[int, float]] = {}  # job-server JVMs alive at the end, and their resident GiB
        if not args.no_semdedup:
            for name, engine in engines.items():
                dedup[name] = semdedup(engine, workdir / f"semdedup-{name}", args.clusters, args.eps)
                if engine.jar:
                    count_job_servers(engine)
                print(f"{name} semantic dedup: {dedup[name][0]:.1f} s, {dedup[name][2]} duplicates",
                      file=sys.stderr, flush=True)
        for engine in engines.values():
            if engine.jar:
                pids = job_server_children(engine.jar)
                at_end[engine.runner] = (len(pids), resident_gib(pids))
    finally:
        for service in (pool, spark, flink):
            service.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    def steady(engine: Engine) -> tuple[float, float]:
        later = engine.runs[1:]
        return statistics.median(w for w, _ in later), statistics.median(c for _, c in later)

    local_wall, local_cpu = steady(engines["local"])
    first_local_wall, first_local_cpu = engines["local"].runs[0]
    rows = []
    for name, engine in engines.items():
        wall, cpu = steady(engine)
        first_wall, first_cpu = engine.runs[0]
        rows.append([engine.label, f"{first_wall:.1f}", f"{first_cpu:.1f}", f"{wall:.1f}", f"{cpu:.1f}",
                     f"{wall / local_wall:.1f}", f"{cpu / local_cpu:.1f}",
                     f"{first_wall / first_local_wall:.1f}", f"{first_cpu / first_local_cpu:.1f}"])
    pipeline_table = markdown_table(
        ["runner", "first run wall s", "first run CPU s", "later runs wall s", "later runs CPU s",
         "wall / local", "CPU / local", "first run wall / local", "first run CPU / local"], rows)

    start_rows = [[name, f"{wall:.1f}", f"{cpu:.1f}"] for name, (wall, cpu) in startup.items()]
    start_rows += [[f"{runner.capitalize()} job server (java -jar until its job port answers), "
                    f"median of {args.startup_repeats}", f"{wall:.1f}", f"{cpu:.1f}"]
                   for runner, (wall, cpu) in job_servers.items()]
    start_table = markdown_table(["start-up", "wall s", "CPU s"], start_rows)

    def beam_jobs(runner: str) -> int:
        return len(engines[runner].runs) + (dedup[runner][4] if runner in dedup else 0)

    reuse = "; ".join(
        f"{runner.capitalize()}: {len(seen[runner])} for {beam_jobs(runner)} Beam jobs, alive after each run "
        f"{', '.join(map(str, counts))}, at the end {at_end[runner][0]} holding {at_end[runner][1]:.1f} GiB resident"
        for runner, counts in alive.items())
    body = (
        f"Resumable pipeline and semantic dedup on standalone Flink and Spark clusters (each daemon its own JVM) "
        f"against the local runner; SDK workers from one EXTERNAL worker pool. CPU time includes the JVMs: "
        f"this process, plus on Flink and Spark that engine's daemons and executors, the worker pool and its SDK "
        f"workers, and the job-server JVMs Beam started from this process.\n\n"
        f"Start-up, timed apart from the runs:\n\n{start_table}\n\n"
        f"Resumable pipeline: {args.partitions} JSONL files of {args.records} records, one partition each, "
        f"{args.work_ms:g} ms of stage CPU per partition, checkpointed, every run from an empty checkpoint; runners "
        f"in rotating order. The first run of each runner in the process is shown apart from the median of the "
        f"{args.repeats} later runs; ratios are against the local runner's same figure.\n\n{pipeline_table}\n\n"
        f"Job-server JVMs Beam started from this process ({len(engines['flink'].runs)} pipeline runs per "
        f"runner{', then the semantic dedup workflow' if dedup else ''}; Beam's SparkRunner caches its job server "
        f"per process, its FlinkRunner starts one per run and stops them at exit): {reuse}.\n"
    )
    if dedup:
        local = dedup["local"]
        dedup_rows = [[engines[name].label, f"{wall:.1f}", f"{cpu:.1f}", f"{wall / local[0]:.1f}",
                       f"{cpu / local[1]:.1f}", str(jobs) if engines[name].jobs else "-", str(duplicates),
                       "yes" if kept == local[3] else f"no ({len(kept)} kept, local {len(local[3])})"]
                      for name, (wall, cpu, duplicates, kept, jobs) in dedup.items()]
        body += (
            f"\nSemantic dedup workflow (TextSemanticDeduplicationWorkflow, sentence-transformers on the CPU) on the "
            f"bundled sample corpus, {args.clusters} clusters, eps {args.eps:g}, from scratch, one run each, after "
            f"the pipeline runs (so Spark's job server had started; Flink's runner starts one per engine job):\n\n"
            + markdown_table(["runner", "wall s", "CPU s", "wall / local", "CPU / local", "engine jobs",
                              "duplicates", "same kept documents as local"], dedup_rows) + "\n"
        )
        counts = {duplicates for _, _, duplicates, _, _ in dedup.values()}
        if len(counts) != 1 or any(kept != local[3] for _, _, _, kept, _ in dedup.values()):
            print(f"the runners disagree on the duplicates: {counts}", file=sys.stderr)
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
