"""Benchmark: the memory of FuzzyDedup's connected components (``StarComponents``)
per worker process, at 100,000 to 10,000,000 documents.

The graph is what LSH gives on a corpus with near-duplicates: ``--documents``
ids, 30% of them drawn (with repeats, so groups join into larger components:
the largest holds 2.5% of the documents at 10M) into groups of 2 to 6 joined
by random trees, and a random tree of 1% more.
It is generated inside the pipeline in shards of 5,000 documents, so neither
the driver nor a worker ever holds it whole.

Each size runs in a process of its own on the ``--runner`` (default
local-multiprocess: two SDK worker processes, the driver running Beam's
FnApiRunner; ``flink`` and ``spark``: a standalone cluster of that engine with
two slots / cores, started here, sending its work to an SDK worker pool),
twice: ``StarComponents`` with FuzzyDedup's default 10 rounds, and, for
comparison, one ``GroupByKey`` of the same rows (each edge both ways), which
is what any grouping of the edges costs on that runner. Reported: wall and CPU
time (driver and workers), the driver's peak RSS, how many SDK workers ran,
the largest one's peak RSS (``VmHWM``, which starts afresh when a process
starts a program) and the most threads one had (a bundle each, see
``WorkerPeaks``), on a cluster also the peak of the Java processes' resident
sets together (the engine's daemons and executors and Beam's job server,
sampled), and what came out: the components and the size of the largest, or
the ids grouped and the largest degree.

    python bench/bench_star_components.py                                   # 100,000 and 1,000,000
    python bench/bench_star_components.py --documents 100000 1000000 10000000 --append BENCHMARKS.md
    python bench/bench_star_components.py --runner flink        # also spark (needs beam-curator[clusters])
    python bench/bench_star_components.py --runner spark --engine-memory 6g --documents 10000000
    python bench/bench_star_components.py --runner flink --beam-arg=--execution_mode_for_batch=BATCH_FORCED \
        --engine-memory 4g --flink-conf taskmanager.memory.task.off-heap.size=1g --documents 10000000
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# common (which imports torch) is imported by the parent only: the measured process loads what a user's does.

SHARD = 5000  # documents whose edges one generating step makes
GROUPED, GIANT = 0.3, 0.01  # shares of the documents in small groups, and in the giant component
SAMPLE_SECONDS = 0.05


def peak_rss(pid: int | str = "self") -> int:
    """A process's peak resident set since it last started a program (``VmHWM``, in bytes); ``getrusage``
    would count the pages a child shared with its parent between fork and exec."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


class WorkerPeaks:
    """The peak resident set (``VmHWM``) and thread count of each SDK worker
    process below this one or below ``roots`` (a worker pool, a cluster's
    daemons), and the largest sum of the Java processes' resident sets there,
    read every 50 ms while the pipeline runs. A worker runs each bundle on a
    thread of its own and keeps idle threads, so its threads tell how many
    bundles it ran at once, on top of the two dozen or so every worker has."""

    def __init__(self, roots: Iterable[int] = ()) -> None:
        import psutil

        self.processes = [psutil.Process(), *map(psutil.Process, roots)]
        self.peaks: dict[int, int] = {}
        self.threads: dict[int, int] = {}
        self.java_peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            java = 0
            for process in {p for root in self.processes for p in [root, *root.children(recursive=True)]}:
                try:
                    command = " ".join(process.cmdline())
                    if "sdk_worker" in command:
                        self.peaks[process.pid] = max(self.peaks.get(process.pid, 0), peak_rss(process.pid))
                        self.threads[process.pid] = max(self.threads.get(process.pid, 0), process.num_threads())
                    elif "java" in process.name():
                        java += process.memory_info().rss
                except Exception:  # gone meanwhile
                    continue
            self.java_peak = max(self.java_peak, java)

    def close(self) -> tuple[int, int, int, int]:
        """The largest worker's peak and the Java processes' peak, in bytes, how many workers ran, and the
        most threads one had."""
        self.stop.set()
        self.thread.join()
        return (max(self.peaks.values(), default=0), self.java_peak, len(self.peaks),
                max(self.threads.values(), default=0))


def shard_edges(shard: int, documents: int, seed: int) -> list[tuple[int, int]]:
    """The edges of one shard: its share of the small groups (ids drawn from all
    documents) and of the giant component (ids past ``documents``, each joined to
    a random earlier one of the component)."""
    rng = np.random.default_rng([seed, shard])
    edges: list[tuple[int, int]] = []
    drawn = rng.integers(0, documents, int(SHARD * GROUPED)).tolist()
    start = 0
    while start < len(drawn):
        members = drawn[start:start + int(rng.integers(2, 7))]
        edges += [(members[k], members[int(rng.integers(0, k))]) for k in range(1, len(members))]
        start += len(members)
    first = shard * int(SHARD * GIANT)
    for number in range(first, first + int(SHARD * GIANT)):
        if number:
            edges.append((documents + number, documents + int(rng.integers(0, number))))
    return edges


def measure(documents: int, runner: str, contender: str, seed: int, settings: dict, roots: list[int],
            beam_args: list[str]) -> dict:
    """Run one contender on the graph of ``documents`` with the runner preset's
    ``settings`` and raw ``beam_args``, SDK workers and engine processes also
    sought below ``roots``; its figures."""
    import apache_beam as beam

    from beam_curator.runners import pipeline_options
    from beam_curator.transforms.star_components import StarComponents

    out = Path(tempfile.mkdtemp(prefix="bench_star_components_")) / "sizes.json"
    workers = WorkerPeaks(roots)
    start = time.perf_counter()
    with beam.Pipeline(options=pipeline_options(runner, beam_args, **settings)) as pipeline:
        edges = (pipeline
                 | beam.Create(range(-(-documents // SHARD)), reshuffle=False) | beam.Reshuffle()
                 | beam.FlatMap(shard_edges, documents=documents, seed=seed))
        if contender == "star":
            sizes = (edges | StarComponents(10, "bench")
                     | beam.Map(lambda labelled: (labelled[1], 1)) | beam.CombinePerKey(sum) | beam.Values())
        else:
            sizes = (edges | beam.FlatMap(lambda edge: [edge, edge[::-1]]) | beam.GroupByKey()
                     | beam.MapTuple(lambda key, neighbors: sum(1 for _ in neighbors)))
        summary = sizes | beam.combiners.ToList() | beam.Map(lambda all_sizes: (len(all_sizes), max(all_sizes)))
        summary | beam.Map(lambda pair: out.write_text(json.dumps(pair)))
    wall = time.perf_counter() - start
    worker_peak, java_peak, worker_count, worker_threads = workers.close()
    groups, largest = json.loads(out.read_text())
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    driver_peak = peak_rss()
    return {"wall": wall, "cpu": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
            "driver_peak_mb": driver_peak / 2**20, "worker_peak_mb": worker_peak / 2**20, "workers": worker_count,
            "worker_threads": worker_threads,
            "java_peak_mb": java_peak / 2**20, "groups": groups, "largest": largest}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runner", default="local-multiprocess", help="a preset; flink and spark start a cluster here")
    parser.add_argument("--engine-memory", metavar="SIZE",
                        help="flink: the TaskManager's process size; spark: the worker's memory, all of it given to "
                             "its executor (default: the engine's, 1600m / 2g with a 1g executor)")
    parser.add_argument("--flink-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an entry for the Flink cluster's flink-conf.yaml, "
                             "e.g. --flink-conf taskmanager.memory.task.off-heap.size=1g")
    parser.add_argument("--beam-arg", action="append", default=[], metavar="FLAG",
                        help="a raw Beam flag for the pipelines, e.g. --beam-arg=--execution_mode_for_batch=BATCH_FORCED")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("DOCUMENTS", "CONTENDER"), help=argparse.SUPPRESS)
    parser.add_argument("--settings", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--roots", type=int, nargs="*", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--append", type=Path, metavar="FILE", help="also append the report to FILE")
    args = parser.parse_args(argv)
    if args.child:
        # As common.unwind_on_sigterm (common is not imported here): Beam stops the job server it started at exit.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        figures = measure(int(args.child[0]), args.runner, args.child[1], args.seed, json.loads(args.settings),
                          args.roots, args.beam_arg)
        print("RESULT " + json.dumps(figures), flush=True)
        return 0
    from common import child_result, machine_description, markdown_table, publish, unwind_on_sigterm

    unwind_on_sigterm()
    machine = machine_description()
    with ExitStack() as services:
        conf = dict(entry.split("=", 1) for entry in args.flink_conf)
        settings, roots, where = cluster(args.runner, services, args.engine_memory, conf)
        beam_args = list(args.beam_arg)
        if args.engine_memory and args.runner == "spark":  # the job server Beam starts is the application's driver
            beam_args.append(f"--job_server_jvm_property=-Dspark.executor.memory={args.engine_memory}")
        rows = []
        for documents in args.documents:
            for contender, label in (("star", "StarComponents (10 rounds)"), ("gbk", "one GroupByKey of the rows")):
                command = [sys.executable, __file__, "--child", str(documents), contender, "--runner", args.runner,
                           "--seed", str(args.seed), "--settings", json.dumps(settings),
                           *(f"--beam-arg={flag}" for flag in beam_args), "--roots", *map(str, roots)]
                figures = child_result(command, f"{contender} at {documents:,} documents")
                rows.append([f"{documents:,}", label, f"{figures['wall']:.0f}", f"{figures['cpu']:.0f}",
                             f"{figures['driver_peak_mb']:,.0f}", figures["workers"], figures["worker_threads"],
                             f"{figures['worker_peak_mb']:,.0f}",
                             *([f"{figures['java_peak_mb']:,.0f}"] if roots else []),
                             f"{figures['groups']:,}", f"{figures['largest']:,}"])
    table = markdown_table(["documents", "what runs", "wall s", "CPU s", "driver peak MB", "SDK workers",
                            "most threads in a worker", "largest worker peak MB",
                            *(["Java processes' peak MB"] if roots else []),
                            "components / ids", "largest component / degree"], rows)
    flags = f" Beam flags: {' '.join(beam_args)}." if beam_args else ""
    cpu = " CPU counts the driver and the processes it started (Beam's job server), not the cluster's." if roots else ""
    publish(__file__, f"""Runner: {where}. Graph: {GROUPED:.0%} of the documents drawn into groups of 2–6 (with repeats, so
groups join into larger components) and a tree of {GIANT:.0%} more; generated in the pipeline, {SHARD:,}
documents a shard. The worker peaks include the worker's own start (about 200 MB).{flags}{cpu}

{table}
""", args.append, machine)
    return 0


def cluster(runner: str, services: ExitStack, memory: str | None = None,
            flink_conf: dict[str, str] | None = None) -> tuple[dict, list[int], str]:
    """For ``flink`` and ``spark``: start that engine's cluster (``memory`` and
    ``flink_conf``: see ``--engine-memory`` and ``--flink-conf``) and an SDK
    worker pool (stopped with ``services``); the preset's settings, the
    processes below which workers and the engine run, and a description. Other
    runners: none."""
    if runner not in ("flink", "spark"):
        return {}, [], runner
    from beam_curator.runners import WorkerPool
    from beam_curator.runners.engines import FlinkCluster, SparkCluster

    if flink_conf and runner != "flink":
        raise SystemExit("--flink-conf is for --runner flink")
    sized = {"taskmanager_memory" if runner == "flink" else "memory": memory} if memory else {}
    engine = services.enter_context(FlinkCluster(**sized, conf=flink_conf) if runner == "flink"
                                    else SparkCluster(**sized))
    pool = services.enter_context(WorkerPool(pythonpath=[str(Path(__file__).resolve().parent)]))
    if runner == "flink":
        daemons = [engine.jobmanager, engine.taskmanager]
        extra = "".join(f", {key}: {value}" for key, value in engine.conf.items())
        where = f"a Flink cluster (one TaskManager, {engine.slots} slots, {engine.taskmanager_memory}{extra})"
    else:
        daemons = [engine.master_daemon, engine.worker]
        executor = f", an executor of {memory}" if memory else ", an executor of 1g (Spark's default)"
        where = f"a Spark standalone cluster (one worker, {engine.cores} cores, {engine.memory}{executor})"
    return ({**engine.settings(), **pool.settings()}, [pool.process.pid, *(d.pid for d in daemons)],
            f"{where}, SDK workers from a worker pool")


if __name__ == "__main__":
    sys.exit(main())
