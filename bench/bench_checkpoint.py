"""Benchmark: what checkpointing costs a run, and what reading it back costs.

1. The same pipeline (JsonlReader, one tiny file per partition → a light
   stage → JsonlWriter) with and without ``checkpoint_path``, alternating
   after a warm-up (``common.interleaved_medians``), medians of repeats.
   Each checkpointed run starts from an empty checkpoint, so it does all the
   work and writes every mark. Target: with / without ≤ 1.05.
2. Start-up: ``open_store(path).completed()`` (the union of all LMDB writer
   files a run reads before it starts) against the number of complete
   partitions and of writer files, which should grow no worse than linearly.
   Writer files are made by forked processes, each recording its share of
   partitions exactly as a worker does.

    python bench/bench_checkpoint.py                        # 100 and 1,000 partitions
    python bench/bench_checkpoint.py --partitions 10000 --repeats 3
    python bench/bench_checkpoint.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import apache_beam
import lmdb
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, interleaved_medians, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.checkpoint import open_store  # noqa: E402
from beam_curator.pipeline import Pipeline  # noqa: E402
from beam_curator.stages import ProcessingStage  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.tasks import DocumentBatch  # noqa: E402


class AddLength(ProcessingStage):
    """The light stage: one vectorised column."""

    name = "add_length"

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.to_pyarrow()
        return DocumentBatch(
            dataset_name=task.dataset_name, _metadata=task._metadata,
            data=table.append_column("length", pc.utf8_length(table["text"])),
        )


def write_corpus(folder: Path, partitions: int) -> None:
    folder.mkdir(parents=True)
    for index in range(partitions):
        (folder / f"part-{index:06d}.jsonl").write_text(json.dumps({"id": index, "text": f"document {index}"}) + "\n")


def run_pipeline(corpus: Path, output: Path, checkpoint: Path | None, runner: str) -> None:
    pipeline = Pipeline("bench", stages=[JsonlReader(str(corpus), files_per_partition=1), AddLength(),
                                         JsonlWriter(str(output))])
    summary = pipeline.run(str(checkpoint) if checkpoint else None, runner)
    if checkpoint and summary.partitions_completed != summary.partitions_pending:
        raise RuntimeError(f"only {summary.partitions_completed} of {summary.partitions_pending} partitions completed")


def measure_overhead(workdir: Path, partitions: int, repeats: int, runner: str) -> tuple[float, float]:
    """Median seconds without and with a checkpoint; every run writes to new
    folders, so each checkpointed run starts empty and marks every partition."""
    corpus = workdir / f"corpus-{partitions}"
    write_corpus(corpus, partitions)
    runs = itertools.count()

    def contender(checkpointed: bool):
        def run() -> None:
            folder = workdir / f"run-{next(runs)}"
            run_pipeline(corpus, folder / "out", folder / "checkpoint" if checkpointed else None, runner)
            shutil.rmtree(folder)
        return run

    medians = interleaved_medians({"without": contender(False), "with": contender(True)}, repeats)
    shutil.rmtree(corpus)
    return medians["without"], medians["with"]


def _record_share(path: str, sources: list[str]) -> None:
    """One writer process: return every partition's whole credit, as a sink does."""
    store = open_store(path)
    for source in sources:
        store.record(f"{source}_0", {source: Fraction(1)})


def make_checkpoint(path: Path, partitions: int, writers: int) -> None:
    sources = [f"p{index:08d}" for index in range(partitions)]
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_record_share, args=(str(path), sources[i::writers])) for i in range(writers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"a writer process failed with exit code {process.exitcode}")


def measure_startup(workdir: Path, partitions: int, writers: int, repeats: int) -> float:
    """Median seconds of ``completed()`` on a checkpoint of that shape."""
    path = workdir / f"startup-{partitions}-{writers}"
    make_checkpoint(path, partitions, writers)
    store = open_store(str(path))
    store.completed()  # warm-up: the first call also pays for imports and lazy set-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        found = store.completed()
        times.append(time.perf_counter() - start)
        if len(found) != partitions:
            raise RuntimeError(f"completed() found {len(found)} of {partitions} partitions")
    shutil.rmtree(path)
    return statistics.median(times)


def overhead_table(rows: list[tuple[int, float, float]]) -> str:
    return markdown_table(
        ["partitions", "without checkpoint (s)", "with checkpoint (s)", "with / without", "overhead per partition (ms)"],
        [[f"{n:,}", f"{without:.2f}", f"{with_:.2f}", f"{with_ / without:.3f}", f"{(with_ - without) / n * 1000:.2f}"]
         for n, without, with_ in rows],
        align="rrrrr",
    )


def startup_table(rows: list[tuple[int, int, float]]) -> str:
    return markdown_table(
        ["complete partitions", "writer files", "`completed()` (ms)", "µs per partition"],
        [[f"{n:,}", writers, f"{seconds * 1000:.1f}", f"{seconds / n * 1e6:.1f}"] for n, writers, seconds in rows],
        align="rrrr",
    )


def filesystem(path: Path) -> str:
    """The file system type of ``path``: fsync costs differ by orders of magnitude between them."""
    best, kind = "", "unknown file system"
    mounts = Path("/proc/mounts")
    for line in mounts.read_text().splitlines() if mounts.exists() else []:
        _, mount, fstype, *_ = line.split()
        if str(path.resolve()).startswith(mount) and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000], help="partition counts to run")
    parser.add_argument("--repeats", type=int, default=4, help="runs per variant after a warm-up; medians are reported")
    parser.add_argument("--runner", default="local", help="runner preset for the pipeline runs")
    parser.add_argument("--startup-partitions", type=int, nargs="*", default=[1000, 10000],
                        help="complete partitions in the checkpoints whose start-up read is timed (none: skip)")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 64], help="writer files for start-up reads")
    parser.add_argument("--workdir", type=Path, help="where to put corpora and checkpoints (default: a temp folder)")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="bench-checkpoint-", dir=args.workdir))
    machine = (
        f"{machine_description()}, data and checkpoints on {filesystem(workdir)}, "
        f"Apache Beam {apache_beam.__version__}, py-lmdb {lmdb.__version__}"
    )
    try:
        # Start-up first: it forks writer processes, best done before Beam starts threads.
        startup = [
            (partitions, writers, measure_startup(workdir, partitions, writers, args.repeats))
            for partitions in args.startup_partitions
            for writers in args.writers if writers <= partitions
        ]
        overhead = []
        for partitions in args.partitions:
            without, with_ = measure_overhead(workdir, partitions, args.repeats, args.runner)
            overhead.append((partitions, without, with_))
            print(f"{partitions} partitions: {without:.2f} s without, {with_:.2f} s with ({with_ / without:.3f})",
                  file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    body = (
        f"Checkpoint overhead: runner {args.runner}, one 1-record JSONL file per partition, "
        f"median of {args.repeats}\n\n{overhead_table(overhead)}\n"
    )
    if startup:
        body += (
            f"\nCheckpoint start-up read (`open_store(path).completed()`), median of {args.repeats}\n\n"
            f"{startup_table(startup)}\n"
        )
    publish(__file__, body, args.append, machine)
    worst = max(with_ / without for _, without, with_ in overhead)
    print(f"worst with/without ratio: {worst:.3f} (target ≤ 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
