"""Benchmark: the resumable pipeline on Dask (Beam's DaskRunner) against the local runner.

The same pipeline (JsonlReader, one JSONL file per partition → a stage that
burns ``--work-ms`` of CPU per partition and adds a column → JsonlWriter, with
a checkpoint) runs on ``runner="local"`` and on ``runner="dask"`` against a
LocalCluster of ``--workers`` single-threaded worker processes started once
beforehand (its start-up is timed apart), alternating after a warm-up
(``common.interleaved_timings``). Every run starts from an empty checkpoint.
Wall time is reported beside CPU time (the driver's, plus on Dask the
workers'), which is the steadier figure on a loaded machine.

Also measured on Dask: a rerun with nothing to do, and when completion marks
appear during a run (the checkpoint is polled every 20 ms): with the
partitions listed in the driver, one per dask bag partition, against Beam's
own translation of the same transform (one root element, so one bag
partition holding every source partition).

    python bench/bench_dask.py
    python bench/bench_dask.py --partitions 100 --work-ms 50 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import apache_beam as beam
import dask
import distributed
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, interleaved_timings, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.checkpoint import open_store  # noqa: E402
from beam_curator.pipeline import Pipeline  # noqa: E402
from beam_curator.runners import pipeline_options  # noqa: E402
from beam_curator.runners.dask import run_on_dask  # noqa: E402
from beam_curator.stages import ProcessingStage  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.tasks import DocumentBatch  # noqa: E402


class BusyLength(ProcessingStage):
    """Burns ``work_ms`` of CPU (a stand-in for real per-partition work), then adds each text's length."""

    name = "busy_length"

    def __init__(self, work_ms: float) -> None:
        self.work_ms = work_ms

    def process(self, task: DocumentBatch) -> DocumentBatch:
        until = time.process_time() + self.work_ms / 1000
        while time.process_time() < until:
            pass
        table = task.to_pyarrow()
        return DocumentBatch(dataset_name=task.dataset_name, _metadata=task._metadata,
                             data=table.append_column("length", pc.utf8_length(table["text"])))


def write_corpus(folder: Path, partitions: int, records: int) -> None:
    folder.mkdir(parents=True)
    for index in range(partitions):
        rows = [{"id": f"{index}-{row}", "text": f"document {index} line {row} " * 4} for row in range(records)]
        (folder / f"part-{index:05d}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def stages(corpus: Path, output: Path, work_ms: float) -> list[ProcessingStage]:
    return [JsonlReader(str(corpus), files_per_partition=1), BusyLength(work_ms), JsonlWriter(str(output))]


def workers_cpu(client: distributed.Client) -> float:
    """CPU seconds the cluster's worker processes have used so far."""
    def used() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    return sum(client.run(used).values())


def mark_times(checkpoint: Path, run) -> tuple[float, list[float]]:
    """Run ``run()`` while polling the checkpoint; returns its seconds and
    the seconds from its start at which the count of marks first reached 1, 2, ..."""
    seen: list[float] = []
    stop = threading.Event()
    start = time.perf_counter()

    def poll() -> None:
        while not stop.is_set():
            count = len(open_store(str(checkpoint)).completed()) if checkpoint.exists() else 0
            seen.extend([time.perf_counter() - start] * (count - len(seen)))
            time.sleep(0.02)

    watcher = threading.Thread(target=poll)
    watcher.start()
    try:
        run()
    finally:
        elapsed = time.perf_counter() - start
        stop.set()
        watcher.join()
    return elapsed, seen


def beams_own_translation(corpus: Path, folder: Path, work_ms: float, address: str) -> None:
    """The same transform as Beam translates it without the listing in the driver."""
    from beam_curator.transforms import CuratorStages

    pipeline = beam.Pipeline(options=pipeline_options("dask", dask_address=address))
    _ = pipeline | CuratorStages(stages(corpus, folder / "out", work_ms), str(folder / "checkpoint"))
    run_on_dask(pipeline)


def granularity_row(label: str, elapsed: float, seen: list[float], partitions: int) -> list[str]:
    spread = seen[-1] - seen[0] if seen else 0.0
    return [label, f"{elapsed:.2f}", f"{len(seen)} of {partitions}", f"{seen[0]:.2f}" if seen else "-",
            f"{seen[len(seen) // 2]:.2f}" if seen else "-", f"{spread:.2f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=40, help="input files, one partition each")
    parser.add_argument("--records", type=int, default=200, help="records per file")
    parser.add_argument("--work-ms", type=float, default=20.0, help="CPU milliseconds of stage work per partition")
    parser.add_argument("--workers", type=int, default=2, help="dask worker processes")
    parser.add_argument("--repeats", type=int, default=3, help="runs per runner after a warm-up; medians are reported")
    parser.add_argument("--workdir", type=Path, help="where to put the corpus and outputs (default: a temp folder)")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    machine = (f"{machine_description()}, Apache Beam {beam.__version__}, dask {dask.__version__}, "
               f"distributed {distributed.__version__}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-dask-", dir=args.workdir))
    corpus = workdir / "corpus"
    write_corpus(corpus, args.partitions, args.records)
    runs = itertools.count()
    started = time.perf_counter()
    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    cluster_start = time.perf_counter() - started
    client = distributed.Client(cluster)
    worker_seconds: list[float] = []
    try:
        def contender(runner: str, **settings: object):
            def run() -> None:
                folder = workdir / f"run-{next(runs)}"
                before = workers_cpu(client) if runner == "dask" else 0.0
                summary = Pipeline("bench", stages=stages(corpus, folder / "out", args.work_ms)).run(
                    str(folder / "checkpoint"), runner, **settings)
                if runner == "dask":
                    worker_seconds.append(workers_cpu(client) - before)
                if summary.partitions_completed != args.partitions:
                    raise RuntimeError(f"{runner}: {summary}")
                shutil.rmtree(folder)
            return run

        timings = interleaved_timings(
            {"local": contender("local"), "dask": contender("dask", dask_address=cluster.scheduler_address)},
            args.repeats,
        )
        dask_workers_cpu = statistics.median(worker_seconds[1:])  # the first was the warm-up

        rerun_folder = workdir / "rerun"
        rerun = {}
        for runner, settings in (("local", {}), ("dask", {"dask_address": cluster.scheduler_address})):
            pipeline = Pipeline("bench", stages=stages(corpus, rerun_folder / runner / "out", args.work_ms))
            pipeline.run(str(rerun_folder / runner / "checkpoint"), runner, **settings)
            start = time.perf_counter()
            summary = pipeline.run(str(rerun_folder / runner / "checkpoint"), runner, **settings)
            rerun[runner] = time.perf_counter() - start
            if summary.partitions_skipped != args.partitions:
                raise RuntimeError(f"{runner} rerun: {summary}")

        per_partition = workdir / "marks-listed"
        listed = mark_times(per_partition / "checkpoint", lambda: Pipeline(
            "bench", stages=stages(corpus, per_partition / "out", args.work_ms)).run(
            str(per_partition / "checkpoint"), "dask", dask_address=cluster.scheduler_address))
        one_bundle = workdir / "marks-root"
        root = mark_times(one_bundle / "checkpoint", lambda: beams_own_translation(
            corpus, one_bundle, args.work_ms, cluster.scheduler_address))
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)

    local, on_dask = timings["local"], timings["dask"]
    dask_cpu = on_dask.cpu + dask_workers_cpu
    table = markdown_table(
        ["runner", "wall s", "CPU s (driver + workers)", "wall / local", "CPU / local", "rerun, nothing to do (s)"],
        [["local", f"{local.wall:.2f}", f"{local.cpu:.2f}", "1.00", "1.00", f"{rerun['local']:.2f}"],
         [f"dask, {args.workers} worker processes", f"{on_dask.wall:.2f}",
          f"{dask_cpu:.2f} ({on_dask.cpu:.2f} + {dask_workers_cpu:.2f})", f"{on_dask.wall / local.wall:.2f}",
          f"{dask_cpu / local.cpu:.2f}", f"{rerun['dask']:.2f}"]],
    )
    marks = markdown_table(
        ["translation on Dask", "run s", "marks seen", "first mark s", "median mark s", "first to last mark s"],
        [granularity_row("partitions listed in the driver (runner=\"dask\")", *listed, args.partitions),
         granularity_row("Beam's own (one root element, one bag partition)", *root, args.partitions)],
    )
    body = (
        f"Resumable pipeline, Dask vs local: {args.partitions} JSONL files of {args.records} records, one partition "
        f"each, {args.work_ms:g} ms of stage CPU per partition, checkpointed, median of {args.repeats} alternating "
        f"runs after a warm-up. The dask LocalCluster ({args.workers} single-threaded worker processes) was started "
        f"once beforehand, in {cluster_start:.1f} s, and is not in the figures.\n\n{table}\n\n"
        f"When completion marks appear on Dask (checkpoint polled every 20 ms, seconds from the run's start):\n\n"
        f"{marks}\n"
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
