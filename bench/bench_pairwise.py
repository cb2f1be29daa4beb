"""Benchmark: achieved GFLOP/s of the within-cluster SemDeDup kernel against
this machine's own float32 matmul rate, on realistic cluster-size mixes.

Scenarios: the first ``--real`` documents of the Debian corpus (real
all-MiniLM-L6-v2 embeddings, cached; see ``common.corpus_embeddings``) in the
clusters torch k-means gives them with k = N / ``--mean-cluster``;
``--docs`` random documents split into clusters whose sizes follow a
lognormal law (many small clusters, a few large ones; mean
``--mean-cluster``); and one giant cluster of ``--giant`` documents. For each batch size, four things run side by side, in
rotating order, and medians are kept:

* ``kernel``: ``pairwise.max_similarity_to_earlier_many`` over every cluster
  at once, as the pairwise phase runs it (small clusters many per call);
* ``kernel+frame``: ``pairwise.semdedup_clusters`` (one sort and one gather
  for all clusters, the score frame) around the kernel;
* ``matmul``: the reference, ``torch.mm`` over each cluster's full n x n
  similarity in the same block shapes (row blocks of the batch size, column
  blocks of at most 2**25 elements), into a reused buffer, nothing else;
* ``large sgemm``: one 4096 x 4096 product, the machine's top rate.

FLOP accounting: the kernel only needs the lower triangle, n(n-1)/2 dot
products of 2d FLOPs per cluster ("useful"); the full-square figure 2 n^2 d
("full") is given too. The matmul reference always does and is credited with
the full square. ``kernel / matmul`` compares *useful* kernel GFLOP/s with
matmul GFLOP/s: 100% means the kernel runs as fast as a plain matmul over
the half of the matrix it needs.

    python bench/bench_pairwise.py                            # 20k docs + a 10k cluster, 1 thread
    python bench/bench_pairwise.py --giant 20000 --threads 1 2
    python bench/bench_pairwise.py --baseline /tmp/pairwise_old.py   # before/after
    python bench/bench_pairwise.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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

from beam_curator.dedup.semantic import pairwise  # noqa: E402
from beam_curator.dedup.semantic.kmeans import assign, fit_kmeans  # noqa: E402
from beam_curator.dedup.semantic.normalize import l2_normalize  # noqa: E402

# The reference's column blocks: the kernel's historical block budget, so both
# multiply blocks of the same shapes.
_REFERENCE_BLOCK_ELEMENTS = 1 << 25
# Rows of the large-matrix reference: the machine's top float32 matmul rate.
_LARGE_SGEMM = 4096


@dataclass
class Scenario:
    name: str
    clusters: list[np.ndarray]  # unit float32 rows, one array per cluster

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(c) for c in self.clusters])

    def useful_flops(self) -> float:
        n = self.sizes.astype(np.float64)
        d = self.clusters[0].shape[1]
        return float((n * (n - 1) * d).sum())

    def full_flops(self) -> float:
        n = self.sizes.astype(np.float64)
        d = self.clusters[0].shape[1]
        return float((2 * n * n * d).sum())


def lognormal_sizes(docs: int, mean_size: float, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Cluster sizes summing to ``docs``: lognormal around ``mean_size``."""
    k = max(1, round(docs / mean_size))
    raw = rng.lognormal(mean=0.0, sigma=sigma, size=k)
    sizes = np.maximum(1, np.floor(raw / raw.sum() * docs)).astype(np.int64)
    sizes[np.argmax(sizes)] += docs - sizes.sum()
    return np.sort(sizes)[::-1]


def unit_rows(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def real_clusters(n: int, mean_cluster: float, data: Path | None, seed: int) -> Scenario:
    """The corpus's first ``n`` documents as k-means puts them, largest cluster first."""
    vectors = corpus_embeddings(n, path=data).vectors
    unit = l2_normalize(vectors, range(n))
    k = max(1, round(n / mean_cluster))
    labels = assign(unit, fit_kmeans(unit, k, seed=seed, device="cpu").centroids, device="cpu").labels
    clusters = sorted((unit[labels == c] for c in np.unique(labels)), key=len, reverse=True)
    return Scenario(f"{n} real docs, k-means k={k}{describe_sizes(clusters)}", clusters)


def describe_sizes(clusters: list[np.ndarray]) -> str:
    sizes = [len(c) for c in clusters]
    return f" ({len(sizes)} clusters, median {int(np.median(sizes))}, max {max(sizes)})"


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    rng = np.random.default_rng(args.seed)
    out = [real_clusters(args.real, args.mean_cluster, args.data, args.seed)] if args.real else []
    if args.docs:
        sizes = lognormal_sizes(args.docs, args.mean_cluster, args.sigma, rng)
        clusters = [unit_rows(int(n), args.d, rng) for n in sizes]
        out.append(Scenario(f"{args.docs} random docs, lognormal sizes{describe_sizes(clusters)}", clusters))
    if args.giant:
        out.append(Scenario(f"one cluster of {args.giant}", [unit_rows(args.giant, args.d, rng)]))
    return out


def matmul_reference(clusters: list[torch.Tensor], batch: int) -> None:
    """The full n x n similarity of every cluster as plain blocked matmuls, on
    the clusters' device (the caller synchronises a GPU before reading a clock)."""
    chunk = max(batch, _REFERENCE_BLOCK_ELEMENTS // batch)
    biggest = max(len(c) for c in clusters)
    buffer = torch.empty(min(batch, biggest) * min(chunk, biggest), device=clusters[0].device)
    for x in clusters:
        n = len(x)
        for r0 in range(0, n, batch):
            rows = x[r0 : r0 + batch]
            for c0 in range(0, n, chunk):
                cols = x[c0 : c0 + chunk]
                torch.mm(rows, cols.T, out=buffer[: len(rows) * len(cols)].view(len(rows), len(cols)))


def load_module(path: Path) -> ModuleType:
    """Another version of pairwise.py (e.g. ``git show HEAD:...``) to time side by side."""
    spec = importlib.util.spec_from_file_location("pairwise_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def contenders(scenario: Scenario, batch: int, baseline: ModuleType | None) -> dict:
    every = np.concatenate(scenario.clusters)
    starts = np.concatenate([[0], np.cumsum(scenario.sizes)[:-1]])
    ids = np.arange(len(every), dtype=np.int64)
    keys = np.concatenate([np.linspace(0.0, 1.0, len(c)) for c in scenario.clusters])
    tensors = [torch.from_numpy(c) for c in scenario.clusters]
    square = torch.from_numpy(unit_rows(_LARGE_SGEMM, every.shape[1], np.random.default_rng(1)))
    runs = {
        "kernel": lambda: pairwise.max_similarity_to_earlier_many(every, starts, batch, "cpu"),
        "kernel+frame": lambda: pairwise.semdedup_clusters(ids, every, keys, starts, "easy", batch, "cpu"),
        "matmul": lambda: matmul_reference(tensors, batch),
        "large sgemm": lambda: torch.mm(square, square.T),
    }
    if baseline is not None:
        runs["baseline kernel"] = lambda: [
            baseline.max_similarity_to_earlier(c, batch, "cpu") for c in scenario.clusters
        ]
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=int, default=5_000,
                        help="real corpus documents to cluster (0: none; embeddings are cached, the first run "
                        "of a size embeds them, ~30 docs/s on a 2-core CPU)")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    parser.add_argument("--docs", type=int, default=20_000, help="documents in the random lognormal mix (0: none)")
    parser.add_argument("--mean-cluster", type=float, default=200.0,
                        help="mean cluster size of the real clustering and of the random mix")
    parser.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of the cluster sizes")
    parser.add_argument("--giant", type=int, default=10_000, help="size of the single giant cluster (0: none)")
    parser.add_argument("--d", type=int, default=384, help="embedding dimensions")
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096], help="pairwise batch sizes")
    parser.add_argument("--threads", type=int, nargs="+", default=[1],
                        help="torch thread counts to run with, each in its own rows (default 1: per-core "
                        "efficiency, timed by CPU time, which stays steady on a shared machine)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds; medians are reported")
    parser.add_argument("--baseline", type=Path, help="another pairwise.py to time beside the current one")
    parser.add_argument("--seed", type=int, default=0)
    add_append_argument(parser)
    args = parser.parse_args(argv)

    machine = machine_description()
    baseline = load_module(args.baseline) if args.baseline else None
    rows = []
    for scenario in scenarios(args):
        useful, full = scenario.useful_flops(), scenario.full_flops()
        for threads in args.threads:
            torch.set_num_threads(threads)
            for batch in args.batches:
                t = interleaved_timings(contenders(scenario, batch, baseline), args.repeats)
                # One thread: CPU time leaves out waits for a core on a busy machine.
                clock = "cpu" if threads == 1 else "wall"
                secs = {name: getattr(timing, clock) for name, timing in t.items()}
                mm_rate = full / secs["matmul"] / 1e9
                sgemm_rate = 2 * _LARGE_SGEMM**2 * args.d / secs["large sgemm"] / 1e9
                kernel_rate = useful / secs["kernel"] / 1e9
                row = [
                    scenario.name, batch, threads, clock, f"{secs['kernel']:.3f}", f"{kernel_rate:.1f}",
                    f"{full / secs['kernel'] / 1e9:.1f}", f"{mm_rate:.1f}", f"{kernel_rate / mm_rate:.0%}",
                    f"{sgemm_rate:.1f}", f"{kernel_rate / sgemm_rate:.0%}", f"{secs['kernel+frame'] / secs['kernel']:.2f}",
                ]
                if baseline is not None:
                    base_rate = useful / secs["baseline kernel"] / 1e9
                    row += [f"{base_rate / mm_rate:.0%}", f"{secs['baseline kernel'] / secs['kernel']:.2f}x"]
                rows.append(row)
                print(" | ".join(str(c) for c in row), file=sys.stderr, flush=True)
    headers = [
        "scenario", "batch", "threads", "clock", "kernel s", "kernel GFLOP/s (useful)", "kernel GFLOP/s (full n²)",
        "matmul GFLOP/s", "kernel / matmul", "large sgemm GFLOP/s", "kernel / large sgemm", "kernel+frame / kernel",
    ]
    if baseline is not None:
        headers += ["baseline / matmul", "speed-up vs baseline"]
    body = (
        f"Within-cluster kernel vs plain float32 matmul, d={args.d} (real: 384), CPU, median of {args.repeats} interleaved rounds. "
        "'useful' counts the lower triangle, n(n-1)/2 dot products of 2d FLOPs per cluster; 'full n²' counts 2n²d "
        "(the matmul reference does and is credited with the full square). kernel / matmul = useful kernel "
        f"GFLOP/s over matmul GFLOP/s; kernel / large sgemm = the same over one {_LARGE_SGEMM} x {_LARGE_SGEMM} "
        "product (target >= 70%). Clock: process CPU time with one thread (steady under load), else wall time. "
        "kernel = max_similarity_to_earlier_many over every cluster at once (small ones many per call), as the "
        "pairwise phase runs it; kernel+frame = semdedup_clusters (order, gather, score frame) around it."
        + (f" Baseline: {args.baseline}." if baseline is not None else "")
        + "\n\n" + markdown_table(headers, rows)
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
