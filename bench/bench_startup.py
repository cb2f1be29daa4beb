"""Benchmark: how much of a small run's ``run()`` is our own, outside Beam.

A first run (fresh output, cache and checkpoint folders) of each entry point
on the bundled sample corpus (614 documents), each in a fresh interpreter,
in rotating order, medians of repeats:

* ``Pipeline.run``: a resumable pipeline, JSONL reader to JSONL writer;
* the exact, fuzzy and semantic dedup workflows at their defaults (semantic
  with the static backend, so that no model dominates; its model is
  distilled once before the timings).

Inside the child, ``apache_beam.Pipeline.run`` is timed (each call until its
result is back, the pipeline's own work included), so that what remains of
``run()`` is ours: checks of inputs and settings, listings, fingerprints,
checkpoint and phase bookkeeping, building the pipelines, summaries. Reported:
``run()`` wall, time inside Beam's runs, our own (the difference; the goal is
under 1 s), the part of it before the first Beam run starts, and the number
of Beam pipelines. Imports happen before ``run()`` and are not counted,
torch's included: Beam's RunInference imports it, and so do the semantic
kernels, which a first run would otherwise import inside ``run()`` (its
import time is reported beside).

Then what a step costs whatever its work: 1, 2 and 4 steps of a trivial
resumable pipeline (3 JSONL files of 10 records, reader to writer) run as
that many Beam pipelines and as one (``run_in_order``, each step starting once
the one before is complete), medians in one interpreter after a warm-up. A
workflow runs several such steps (the semantic one seven), so this is the
floor of a small run, and it says whether running them as one Beam pipeline
would lower it.

    python bench/bench_startup.py
    python bench/bench_startup.py --repeats 5 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, add_append_argument, child_result, machine_description, markdown_table, publish  # noqa: E402

GOAL_S = 1.0
ENTRIES = ("Pipeline.run", "exact workflow", "fuzzy workflow", "semantic workflow (static)")

# Runs in the child: the entry's objects are built, then run() is timed, with Beam's runs timed inside it.
CHILD = r"""
import json, sys, tempfile, time
started = time.perf_counter()
import torch, apache_beam.ml.inference.base
torch_import = time.perf_counter() - started
import apache_beam as beam
from beam_curator import Pipeline
from beam_curator.data import sample_corpus_path
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.workflows import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from beam_curator.workflows.semantic import TextSemanticDeduplicationWorkflow

entry, work = sys.argv[1], tempfile.mkdtemp(prefix="bench-startup-")
sample = str(sample_corpus_path())
inside, firsts = [], []
original = beam.Pipeline.run

def timed_run(self, *args, **kwargs):
    started = time.perf_counter()
    firsts.append(started)
    try:
        result = original(self, *args, **kwargs)
        result.wait_until_finish()
        return result
    finally:
        inside.append(time.perf_counter() - started)

beam.Pipeline.run = timed_run
if entry == "Pipeline.run":
    job = Pipeline("copy", stages=[JsonlReader(sample), JsonlWriter(f"{work}/out")])
    go = lambda: job.run(checkpoint_path=f"{work}/ckpt")
elif entry == "exact workflow":
    go = ExactDeduplicationWorkflow(f"{work}/out", sample, "jsonl", cache_path=f"{work}/cache").run
elif entry == "fuzzy workflow":
    go = FuzzyDeduplicationWorkflow(f"{work}/cache", f"{work}/out", sample, "jsonl").run
else:
    go = TextSemanticDeduplicationWorkflow(sample, f"{work}/out", f"{work}/cache", "jsonl", id_field="doc_id",
                                           embedding_backend="static", n_clusters=20, eps=0.07).run
started = time.perf_counter()
go()
total = time.perf_counter() - started
print("RESULT " + json.dumps({"total": total, "inside_beam": sum(inside), "pipelines": len(inside),
                              "before_first": (firsts[0] if firsts else started + total) - started,
                              "torch_import": torch_import}))
"""


# Runs in the child: k trivial steps as k Beam pipelines and as one, timed after a warm-up.
STEPS_CHILD = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
import torch, apache_beam.ml.inference.base
from beam_curator import Pipeline
from beam_curator.pipeline import run_in_order
from beam_curator.stages.io import JsonlReader, JsonlWriter

repeats, work = int(sys.argv[1]), Path(tempfile.mkdtemp(prefix="bench-steps-"))
(work / "in").mkdir()
for part in range(3):
    (work / "in" / f"{part}.jsonl").write_text("".join(json.dumps({"id": part * 10 + row, "text": "x"}) + "\n"
                                                       for row in range(10)))
made = iter(range(10**6))

def steps(count):
    return [(Pipeline(f"step{index}", stages=[JsonlReader(str(work / "in")), JsonlWriter(str(work / f"out{n}"))]),
             str(work / f"ckpt{n}")) for index, n in zip(range(count), made)]

def seconds(go):
    started = time.perf_counter()
    go()
    return time.perf_counter() - started

seconds(lambda: run_in_order(steps(1)))  # warm-up
found = {}
for count in (1, 2, 4):
    together = [seconds(lambda: run_in_order(steps(count))) for _ in range(repeats)]
    apart = [seconds(lambda: [run_in_order([step]) for step in steps(count)]) for _ in range(repeats)]
    found[count] = {"one": statistics.median(together), "apart": statistics.median(apart)}
print("RESULT " + json.dumps(found))
"""


def measure(entry: str) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return child_result([sys.executable, "-c", CHILD, entry], entry, env=env, cwd=REPO)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each after a warm-up; medians are reported")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    machine = machine_description()
    runs: dict[str, list[dict]] = {entry: [] for entry in ENTRIES}
    for entry in ENTRIES:  # warm-up: the static model is distilled and cached, files reach the page cache
        measure(entry)
    for round_ in range(args.repeats):
        shift = round_ % len(ENTRIES)
        for entry in ENTRIES[shift:] + ENTRIES[:shift]:
            runs[entry].append(measure(entry))

    def median(entry: str, name: str) -> float:
        return statistics.median(run[name] for run in runs[entry])

    rows = []
    for entry in ENTRIES:
        ours = statistics.median(run["total"] - run["inside_beam"] for run in runs[entry])
        rows.append([entry, f"{median(entry, 'total'):.2f}", f"{median(entry, 'inside_beam'):.2f}", f"{ours:.2f}",
                     f"{median(entry, 'before_first'):.2f}", f"{median(entry, 'pipelines'):.0f}",
                     "yes" if ours < GOAL_S else "no"])
    body = (
        "A first run of each entry point on the bundled sample (614 documents; fresh folders; semantic with "
        "the static backend, n_clusters=20, eps=0.07), each in a fresh interpreter, imports done before `run()`. "
        f"Median of {args.repeats} in rotating order, after a warm-up. torch and Beam's RunInference are imported "
        f"before `run()` too (median {statistics.median(run['torch_import'] for found in runs.values() for run in found):.2f} s; "
        "the semantic workflow needs them for its kernels and embedding). 'inside Beam' = the time in "
        "`apache_beam.Pipeline.run` until each result is back (the stages' work included); 'ours' = `run()` "
        f"minus that (goal: under {GOAL_S:g} s); 'before the first Beam run' is part of it.\n\n"
        + markdown_table(["entry point", "run() wall s", "inside Beam s", "ours s", "before the first Beam run s",
                          "Beam pipelines", f"ours < {GOAL_S:g} s"], rows, align="lrrrrrl")
    )
    steps = child_result([sys.executable, "-c", STEPS_CHILD, str(max(args.repeats, 3))], "steps",
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    step_rows = [[count, f"{found['apart']:.2f}", f"{found['one']:.2f}", f"{found['one'] / int(count):.2f}",
                  f"{found['one'] / found['apart']:.2f}×"] for count, found in steps.items()]
    body += (
        "\n\nWhat a step costs whatever its work: steps of a trivial resumable pipeline (3 JSONL files of 10 "
        "records, reader to writer) as that many Beam pipelines and as one (`run_in_order`), medians of "
        f"{max(args.repeats, 3)} in one interpreter after a warm-up.\n\n"
        + markdown_table(["steps", "as separate pipelines s", "as one pipeline s", "per step, one pipeline s",
                          "one / separate"], step_rows)
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
