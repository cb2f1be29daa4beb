"""Run every benchmark at its default (small) size, one after another (``make bench``).

Each script runs in its own process, so one failing or running out of memory
does not stop the others; a summary of exit codes and durations comes last,
and the exit code is non-zero if any script failed. The GPU check runs only
where torch sees a CUDA device.

    python bench/run_all.py
    python bench/run_all.py --append BENCHMARKS.md     # every script appends its report
    python bench/run_all.py --only bench_pairwise bench_recall
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# Cheapest first, so a quick look needs no waiting for the embedding-bound ones.
SCRIPTS = (
    "bench_pairwise.py",
    "bench_kmeans.py",
    "bench_minhash.py",
    "bench_fuzzy.py",
    "bench_fuzzy_scale.py",  # 50k and 200k documents here; the recorded run is --documents 100000 1000000
    "bench_scale.py",
    "bench_checkpoint.py",
    "bench_in_order.py",
    "bench_rerun.py",
    "bench_startup.py",
    "bench_recall.py",
    "bench_e2e.py",
    "bench_embedding.py",
    "bench_embedding_backends.py",
    "bench_static.py",  # ~17 min the first time: the full model's vectors of the 10k sample are then cached
    "bench_transforms.py",
    "bench_star_components.py",  # 100k and 1M documents here; the recorded run adds 10M (~8 min)
    "bench_cascade.py",  # ~15 min: the full model embeds every candidate of all 63,905 documents
    "bench_clusters.py",  # needs Java and the clusters extra (pyflink, pyspark)
)


def commands(append: Path | None) -> dict[str, list[str]]:
    extra = [] if append is None else ["--append", str(append.resolve())]
    runs = {Path(script).stem: [sys.executable, str(BENCH / script), *extra] for script in SCRIPTS}
    import torch

    if torch.cuda.is_available():
        runs["gpu_check"] = ["bash", str(BENCH / "gpu_check.sh"), *extra]
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--append", type=Path, metavar="FILE", help="passed to every script: append its report to FILE")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these (script names without .py)")
    args = parser.parse_args(argv)

    runs = commands(args.append)
    unknown = sorted(set(args.only or []) - set(runs))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {sorted(runs)}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(
        [str(BENCH.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    summary = []
    for name, command in runs.items():
        if args.only and name not in args.only:
            continue
        print(f"\n=== {name}: {' '.join(command)}", flush=True)
        start = time.monotonic()
        code = subprocess.run(command, cwd=BENCH.parent, env=env).returncode
        summary.append((name, code, time.monotonic() - start))
    print("\n| benchmark | exit code | minutes |\n|---|---:|---:|")
    for name, code, seconds in summary:
        print(f"| {name} | {code} | {seconds / 60:.1f} |")
    return 1 if any(code for _, code, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
