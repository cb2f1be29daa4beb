"""Benchmark: two steps that must follow one another, run by ``run_in_order``
as one Beam pipeline against one ``Pipeline.run`` per step.

The steps copy the bundled sample corpus (6 JSONL files), then copy the
copy: small work, so what is measured is what each Beam pipeline costs to
start, run and end, which the semantic dedup workflow pays per step of its
k-means phase. Each run starts from empty folders; runs rotate
(``common.interleaved_timings``), medians of wall and CPU seconds (CPU of
this process and the worker processes that ended meanwhile).

    python bench/bench_in_order.py
    python bench/bench_in_order.py --runners local local-multiprocess --repeats 5 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, interleaved_timings, machine_description, markdown_table, publish  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.data import sample_corpus_path  # noqa: E402
from beam_curator.pipeline import run_in_order  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402

SETTINGS = {"local": {}, "local-multiprocess": {"num_workers": 2}}


def steps(parent: Path) -> list[tuple[Pipeline, str]]:
    work = Path(tempfile.mkdtemp(dir=parent))  # a new folder per run: checkpoint writers stay open in this process
    first = Pipeline("copy", stages=[JsonlReader(sample_corpus_path()), JsonlWriter(str(work / "copied"))])
    second = Pipeline("copy-again", stages=[JsonlReader(str(work / "copied")), JsonlWriter(str(work / "again"))])
    return [(first, str(work / "ckpt-copy")), (second, str(work / "ckpt-again"))]


def in_one_pipeline(work: Path, runner: str) -> None:
    summaries = run_in_order(steps(work), runner, progress=False, **SETTINGS[runner])
    assert all(summary.partitions_completed == 6 for summary in summaries), summaries


def one_pipeline_each(work: Path, runner: str) -> None:
    for pipeline, checkpoint in steps(work):
        summary = pipeline.run(checkpoint, runner, progress=False, **SETTINGS[runner])
        assert summary.partitions_completed == 6, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runners", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--repeats", type=int, default=5)
    add_append_argument(parser)
    args = parser.parse_args(argv)
    machine = machine_description()
    work = Path(tempfile.mkdtemp(prefix="bench-in-order-"))
    rows = []
    try:
        for runner in args.runners:
            timings = interleaved_timings({
                "run_in_order": lambda: in_one_pipeline(work, runner),
                "one Pipeline.run per step": lambda: one_pipeline_each(work, runner),
            }, args.repeats)
            fused, separate = timings["run_in_order"], timings["one Pipeline.run per step"]
            rows.append([runner, f"{fused.wall:.2f}", f"{separate.wall:.2f}", f"{fused.wall / separate.wall:.2f}",
                         f"{fused.cpu:.2f}", f"{separate.cpu:.2f}", f"{fused.cpu / separate.cpu:.2f}"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    headers = ["runner", "run_in_order wall s", "per step wall s", "wall ratio", "run_in_order CPU s",
               "per step CPU s", "CPU ratio"]
    body = (
        f"Two steps (copy the 6-file sample corpus, then copy the copy), as one Beam pipeline by run_in_order "
        f"against one Pipeline.run per step; medians of {args.repeats} rotating runs after a warm-up.\n\n"
        f"{markdown_table(headers, rows)}\n"
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
