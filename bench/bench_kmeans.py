"""Benchmark: beam_curator's torch k-means vs faiss-cpu vs scikit-learn.

All three run on the same L2-normalised vectors with the same k and the same
number of Lloyd iterations (early stopping off), on the same number of
threads. Inertia is recomputed for every result by one function (squared L2
distance of each row to its nearest returned centroid, summed in float64), so
it compares centroids rather than each library's own bookkeeping. Times
include initialisation, which differs: ours is greedy k-means++ on a
subsample, scikit-learn's greedy k-means++ on all rows, faiss's random rows.

    python bench/bench_kmeans.py                      # 50k x 384, k=200, 20 iters
    python bench/bench_kmeans.py --n 200000 --k 1000  # the issue's full size
    python bench/bench_kmeans.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import torch

from beam_curator.dedup.semantic.kmeans import assign, fit_kmeans


def mixture_of_gaussians(n: int, d: int, n_modes: int, seed: int) -> np.ndarray:
    """Unit vectors scattered around ``n_modes`` random directions, like
    embeddings of a corpus with topics."""
    rng = np.random.default_rng(seed)
    modes = rng.standard_normal((n_modes, d)).astype(np.float32)
    modes /= np.linalg.norm(modes, axis=1, keepdims=True)
    x = modes[rng.integers(n_modes, size=n)]
    x += rng.standard_normal((n, d), dtype=np.float32) * np.float32(0.6 / np.sqrt(d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def inertia(x: np.ndarray, centroids: np.ndarray) -> float:
    dist = assign(x, centroids, device="cpu").l2_dist_to_cent.astype(np.float64)
    return float((dist * dist).sum())


def run_ours(x: np.ndarray, k: int, iters: int, seed: int) -> tuple[np.ndarray, int]:
    model = fit_kmeans(x, k, max_iter=iters, tol=0, seed=seed, backend="torch", device="cpu")
    return model.centroids, model.n_iter


def run_faiss(x: np.ndarray, k: int, iters: int, seed: int) -> tuple[np.ndarray, int]:
    import faiss

    # No subsampling: faiss otherwise fits on 256 rows per centroid.
    km = faiss.Kmeans(x.shape[1], k, niter=iters, seed=seed, max_points_per_centroid=x.shape[0], verbose=False)
    km.train(x)
    return km.centroids, len(km.iteration_stats)


def run_sklearn(x: np.ndarray, k: int, iters: int, seed: int) -> tuple[np.ndarray, int]:
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, n_init=1, max_iter=iters, tol=0, algorithm="lloyd", random_state=seed)
    km.fit(x)
    return km.cluster_centers_.astype(np.float32), int(km.n_iter_)


OURS = "beam_curator (torch, cpu)"
RUNNERS: dict[str, Callable[[np.ndarray, int, int, int], tuple[np.ndarray, int]]] = {
    OURS: run_ours,
    "faiss-cpu": run_faiss,
    "scikit-learn": run_sklearn,
}


@dataclass(frozen=True)
class Row:
    name: str
    seconds: float
    inertia: float
    iters: float


def measure(x: np.ndarray, k: int, max_iters: dict[str, int], repeats: int) -> list[Row]:
    """Median seconds, inertia and iterations run per implementation (each
    stops early only at a fixed point). Repeat r uses seed r for every
    implementation, and implementations take turns, so drifts in the load of
    a shared machine hit all of them alike."""
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in max_iters}
    for rep in range(repeats):
        for name, max_iter in max_iters.items():
            run = RUNNERS[name.split(" @")[0]]
            start = time.perf_counter()
            centroids, n_iter = run(x, k, max_iter, rep)
            samples[name].append((time.perf_counter() - start, inertia(x, centroids), n_iter))
    return [
        Row(name, *(statistics.median(column) for column in zip(*runs, strict=True)))
        for name, runs in samples.items()
    ]


def iterations_to_reach(x: np.ndarray, k: int, target: float, most: int) -> int | None:
    """Fewest Lloyd iterations after which ours (seed 0) has inertia <= target.
    Inertia never rises from one Lloyd iteration to the next and a seed fixes
    the run, so a binary search over max_iter finds it."""
    def reaches(n_iter: int) -> bool:
        return inertia(x, run_ours(x, k, n_iter, 0)[0]) <= target

    if not reaches(most):
        return None
    low, high = 0, most
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    return low


def table(rows: list[Row]) -> str:
    base = next(row for row in rows if row.name == "faiss-cpu")
    lines = [
        "| implementation | iterations run | time (s, median) | inertia (median) | time / faiss | inertia / faiss |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {row.iters:g} | {row.seconds:.2f} | {row.inertia:.1f} | "
            f"{row.seconds / base.seconds:.2f} | {row.inertia / base.inertia:.4f} |"
        )
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or "unknown cpu"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    import faiss
    import sklearn

    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads, "
        f"faiss {faiss.__version__}, scikit-learn {sklearn.__version__}, Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50_000, help="rows")
    parser.add_argument("--d", type=int, default=384, help="dimensions")
    parser.add_argument("--k", type=int, default=200, help="clusters")
    parser.add_argument("--iters", type=int, default=20, help="Lloyd iterations for every implementation")
    parser.add_argument("--repeats", type=int, default=3, help="runs per implementation; medians are reported")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for all three")
    parser.add_argument("--data", type=Path, help="a (n, d) .npy of embeddings to use instead of random data")
    parser.add_argument("--append", type=Path, help="append the table and machine description to this file")
    args = parser.parse_args(argv)

    import faiss
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    if args.data:
        x = np.load(args.data).astype(np.float32)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        source = f"{args.data} ({x.shape[0]} x {x.shape[1]})"
    else:
        x = mixture_of_gaussians(args.n, args.d, n_modes=args.k, seed=0)
        source = f"{args.n} x {args.d} normalised mixture of {args.k} gaussians"
    with threadpool_limits(args.threads):
        rows = measure(x, args.k, {name: args.iters for name in RUNNERS}, args.repeats)
        faiss_inertia = next(row.inertia for row in rows if row.name == "faiss-cpu")
        needed = iterations_to_reach(x, args.k, faiss_inertia, args.iters)
        if needed is not None:
            rows += measure(x, args.k, {f"{OURS} @ faiss's inertia": needed}, args.repeats)

    heading = f"k-means: {source}, k={args.k}, {args.iters} iterations, median of {args.repeats}"
    report = f"### {heading}\n\n{table(rows)}\n\nMachine: {machine()} ({date.today()}).\n"
    print(report)
    ours, base = rows[0], rows[1]
    print(f"ours/faiss time: {ours.seconds / base.seconds:.2f}, ours/faiss inertia: {ours.inertia / base.inertia:.4f}")
    if needed is None:
        print(f"ours did not reach faiss's inertia within {args.iters} iterations")
    else:
        at = rows[-1]
        print(f"at faiss's inertia ({needed} iterations): ours/faiss time {at.seconds / base.seconds:.2f}")
    if args.append:
        with args.append.open("a", encoding="utf-8") as out:
            out.write("\n" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
