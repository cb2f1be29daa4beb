"""Benchmark: beam_curator's torch k-means vs faiss-cpu vs scikit-learn, side by side.

All three run on the same L2-normalised vectors with the same k, the same
``--iters`` cap and the same number of threads; each stops early only at a
fixed point (no label changes, or for faiss an unchanged objective), and the
iterations each actually ran are reported. Inertia is recomputed for every
result by one function (squared L2 distance of each row to its nearest
returned centroid, summed in float64), so it compares centroids rather than
each library's own bookkeeping. Times include initialisation, which differs:
ours is k-means|| (NeMo Curator's default) on a projected subsample,
scikit-learn's greedy k-means++ on all rows, faiss's random rows. A last row gives ours stopped at
the fewest iterations that reach faiss's inertia ("at equal inertia").

Rounds rotate the order of the contenders; round r uses seed r (seed 0 is
the untimed warm-up);
medians are reported. Clock: process CPU time with one thread (steady on a
loaded machine), else wall time.

    python bench/bench_kmeans.py                      # 50k x 384, k=200, 20 iterations
    python bench/bench_kmeans.py --n 200000 --k 1000  # the issue's full size
    python bench/bench_kmeans.py --corpus 5000 --k 50 # real MiniLM embeddings of the Debian corpus
    python bench/bench_kmeans.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    add_append_argument,
    corpus_embeddings,
    interleaved_timings,
    machine_description,
    markdown_table,
    publish,
)

from beam_curator.dedup.semantic.kmeans import assign, fit_kmeans  # noqa: E402

Fit = Callable[[np.ndarray, int, int, int], tuple[np.ndarray, int]]  # (x, k, max_iter, seed) -> centroids, iterations


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


def fit_ours(x: np.ndarray, k: int, max_iter: int, seed: int) -> tuple[np.ndarray, int]:
    model = fit_kmeans(x, k, max_iter=max_iter, tol=0, seed=seed, backend="torch", device="cpu")
    return model.centroids, model.n_iter


def fit_faiss(x: np.ndarray, k: int, max_iter: int, seed: int) -> tuple[np.ndarray, int]:
    import faiss

    # No subsampling: faiss otherwise fits on 256 rows per centroid.
    km = faiss.Kmeans(x.shape[1], k, niter=max_iter, seed=seed, max_points_per_centroid=len(x), verbose=False)
    km.train(x)
    return km.centroids, len(km.iteration_stats)


def fit_sklearn(x: np.ndarray, k: int, max_iter: int, seed: int) -> tuple[np.ndarray, int]:
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, n_init=1, max_iter=max_iter, tol=0, algorithm="lloyd", random_state=seed).fit(x)
    return km.cluster_centers_.astype(np.float32), int(km.n_iter_)


OURS, FAISS = "beam_curator (torch, cpu)", "faiss-cpu"
FITS: dict[str, Fit] = {OURS: fit_ours, FAISS: fit_faiss, "scikit-learn": fit_sklearn}


def measure(x: np.ndarray, k: int, runs: dict[str, tuple[Fit, int]], repeats: int, clock: str) -> dict[str, list]:
    """[iterations run, seconds, inertia] per contender, each a median over
    rounds; contender ``name`` runs ``fit`` with ``max_iter`` from ``runs``."""
    results: dict[str, list[tuple[int, float]]] = {name: [] for name in runs}

    def contender(name: str) -> Callable[[], None]:
        fit, max_iter = runs[name]
        seeds = itertools.count()

        def run() -> None:
            centroids, n_iter = fit(x, k, max_iter, next(seeds))
            results[name].append((n_iter, inertia(x, centroids)))

        return run

    timings = interleaved_timings({name: contender(name) for name in runs}, repeats)
    return {
        name: [
            statistics.median(n for n, _ in results[name][1:]),  # [0] is the warm-up
            getattr(timings[name], clock),
            statistics.median(value for _, value in results[name][1:]),
        ]
        for name in runs
    }


def iterations_to_reach(x: np.ndarray, k: int, target: float, most: int) -> int | None:
    """Fewest Lloyd iterations after which ours (seed 1, the first timed
    round's) has inertia <= target. Inertia never rises from one Lloyd
    iteration to the next and a seed fixes the run, so a binary search over
    max_iter finds it."""

    def reaches(max_iter: int) -> bool:
        return inertia(x, fit_ours(x, k, max_iter, 1)[0]) <= target

    if not reaches(most):
        return None
    low, high = 0, most
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    return low


def vectors(args: argparse.Namespace) -> tuple[np.ndarray, str]:
    if args.data:
        x, source = np.load(args.data).astype(np.float32), str(args.data)
    elif args.corpus:
        embedded = corpus_embeddings(args.corpus)
        x, source = embedded.vectors, f"all-MiniLM-L6-v2 embeddings of the first {args.corpus} Debian corpus documents"
    else:
        x = mixture_of_gaussians(args.n, args.d, n_modes=args.k, seed=0)
        source = f"mixture of {args.k} gaussians around random directions"
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(x), source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50_000, help="rows of random data")
    parser.add_argument("--d", type=int, default=384, help="dimensions of random data")
    parser.add_argument("--k", type=int, default=200, help="clusters")
    parser.add_argument("--iters", type=int, default=20, help="Lloyd iteration cap for every implementation")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds; medians are reported")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="threads for all three")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", type=Path, help="a (rows, d) .npy of embeddings instead of random data")
    source.add_argument("--corpus", type=int, metavar="N", help="real embeddings of the first N corpus documents")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    import faiss
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    machine = machine_description()
    x, source = vectors(args)
    clock = "cpu" if args.threads == 1 else "wall"
    with threadpool_limits(args.threads):  # scikit-learn's OpenMP and BLAS
        rows = measure(x, args.k, {name: (fit, args.iters) for name, fit in FITS.items()}, args.repeats, clock)
        needed = iterations_to_reach(x, args.k, rows[FAISS][2], args.iters)
        if needed is not None:
            at_faiss = f"{OURS}, stopped at faiss's inertia"
            rows |= measure(x, args.k, {at_faiss: (fit_ours, needed)}, args.repeats, clock)

    base_iters, base_secs, base_inertia = rows[FAISS]
    table = [
        [name, f"{n_iter:g}", f"{secs:.2f}", f"{value:.1f}", f"{secs / base_secs:.2f}", f"{value / base_inertia:.4f}"]
        for name, (n_iter, secs, value) in rows.items()
    ]
    _, ours_secs, ours_inertia = rows[OURS]
    body = (
        f"k-means on {len(x)} x {x.shape[1]} unit vectors ({source}), k={args.k}, at most {args.iters} iterations, "
        f"{args.threads} threads for all, median of {args.repeats} interleaved rounds, clock: {clock} time. "
        f"ours / faiss: time {ours_secs / base_secs:.2f}, inertia {ours_inertia / base_inertia:.4f}"
        + ("" if needed is None else f"; at faiss's inertia ({needed} iterations) time "
           f"{rows[at_faiss][1] / base_secs:.2f}")
        + ".\n\n"
        + markdown_table(
            ["implementation", "iterations run", "time (s)", "inertia", "time / faiss", "inertia / faiss"], table
        )
    )
    if needed is None:
        body += f"\n\nOurs did not reach faiss's inertia within {args.iters} iterations."
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
