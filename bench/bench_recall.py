"""Benchmark: recall of the clustered SemDeDup search against brute force, on real text.

The first ``--n`` documents of the Debian corpus are embedded once with
all-MiniLM-L6-v2 (sentence-transformers, cached as .npy under /tmp), then for
each cluster count: k-means fit + assign (``dedup.semantic.kmeans``), the
global order (``ranking``), and ``recall.recall_report`` for plain SemDeDup
and for the cross-cluster pass with every document visiting its
second-nearest cluster and with only those within ``--margins`` of it. A
near-duplicate pair (cosine >= 1 - eps) counts as found when the clustered
search compares it; "removals" is the share of the documents brute force
would remove that the clustered search removes too.

Times are of the search itself on this sample (``pairwise`` per cluster plus
``cross_cluster`` and ``combine_scores``), median of interleaved rounds,
against the same kernel over all documents as one cluster (brute force).
The SemDeDup paper reports 89-95% recall for its clustered search.

    python bench/bench_recall.py                     # 5k docs, k = 10, 50, 200
    python bench/bench_recall.py --n 10000 --margins 0.01 0.05
    python bench/bench_recall.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
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

from beam_curator.dedup.semantic.cross_cluster import (  # noqa: E402
    combine_scores,
    cross_cluster_scores,
    visited_clusters,
)
from beam_curator.dedup.semantic.kmeans import Assignment, assign, fit_kmeans  # noqa: E402
from beam_curator.dedup.semantic.normalize import l2_normalize  # noqa: E402
from beam_curator.dedup.semantic.pairwise import semdedup_cluster_by_keys  # noqa: E402
from beam_curator.dedup.semantic.ranking import order_by_keys, rank_keys  # noqa: E402
from beam_curator.dedup.semantic.recall import EpsRecall, recall_report  # noqa: E402

WHICH, METRIC, SEED = "hard", "cosine", 42


def clustered_search(
    ids: np.ndarray, unit: np.ndarray, keys: np.ndarray, labels: np.ndarray, visited: np.ndarray | None, batch: int
) -> pd.DataFrame:
    """The per-cluster passes a pipeline would run, combined: one score row per document."""
    parts, cross = [], []
    for cluster in np.unique(labels):
        members = labels == cluster
        parts.append(semdedup_cluster_by_keys(ids[members], unit[members], keys[members], WHICH, batch, "cpu"))
        if visited is not None:
            guests = visited == cluster
            cross.append(
                cross_cluster_scores(
                    ids[members], unit[members], keys[members], ids[guests], unit[guests], keys[guests],
                    WHICH, batch, "cpu",
                )
            )
    return combine_scores(parts + cross, WHICH)


def compared_pairs(labels: np.ndarray, visited: np.ndarray | None) -> int:
    """Dot products the search computes: within clusters plus members x visitors."""
    sizes = np.bincount(labels)
    pairs = int((sizes * (sizes - 1) // 2).sum())
    if visited is not None:
        guests = np.bincount(visited[visited >= 0], minlength=len(sizes))
        pairs += int((sizes[: len(guests)] * guests).sum())
    return pairs


def recall_cell(r: EpsRecall) -> str:
    """Pair recall / share of brute-force removals made, or '-' when there is nothing to find."""
    if r.similar_pairs == 0:
        return "-"
    return f"{r.recall:.3f} / {r.removed_by_clustered / r.removed_by_brute_force:.3f}"


def modes(found: Assignment, margins: list[float]) -> dict[str, np.ndarray | None]:
    out: dict[str, np.ndarray | None] = {"plain": None}
    args = (found.second_labels, found.cosine_dist_to_cent, found.second_cosine_dist)
    out["cross, all visit"] = visited_clusters(*args, margin=None)
    for margin in margins:
        out[f"cross, margin {margin:g}"] = visited_clusters(*args, margin=margin)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="documents (the first n of the corpus)")
    parser.add_argument("--clusters", type=int, nargs="+", default=[10, 50, 200], help="k-means cluster counts")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.001, 0.01, 0.05, 0.1])
    parser.add_argument("--margins", type=float, nargs="+", default=[0.02, 0.05],
                        help="cross-cluster margins (cosine distance to the second centroid minus the first)")
    parser.add_argument("--batch", type=int, default=1024, help="pairwise batch size")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of each search; medians are reported")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: timed by CPU time, which stays steady on a shared machine)")
    parser.add_argument("--embed-max-chars", type=int, help="cut texts to this many characters before embedding")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    clock = "cpu" if args.threads == 1 else "wall"
    machine = machine_description()
    embedded = corpus_embeddings(args.n, args.embed_max_chars, args.data)
    vectors, how = embedded.vectors, embedded.note
    print(how, file=sys.stderr)
    ids = np.arange(args.n, dtype=np.int64)
    unit = l2_normalize(vectors, ids)
    brute_keys = np.zeros(args.n)  # one cluster: every document at distance 0, ties by id
    brute = {"brute force": lambda: semdedup_cluster_by_keys(ids, unit, brute_keys, WHICH, args.batch, "cpu")}
    brute_time = getattr(interleaved_timings(brute, args.repeats)["brute force"], clock)

    pair_rows, recall_rows = None, []
    all_pairs = args.n * (args.n - 1) / 2
    for k in args.clusters:
        model = fit_kmeans(unit, k, seed=SEED, backend="torch", device="cpu")
        found = assign(unit, model.centroids, device="cpu")
        keys = rank_keys(ids, found.cosine_dist_to_cent, found.l2_dist_to_cent, WHICH, METRIC, SEED)
        order = order_by_keys(ids, keys, WHICH)
        mode_visits = modes(found, args.margins)
        searches = {
            mode: (lambda v=visited: clustered_search(ids, unit, keys, found.labels, v, args.batch))
            for mode, visited in mode_visits.items()
        }
        times = {mode: getattr(t, clock) for mode, t in interleaved_timings(searches, args.repeats).items()}
        for mode, visited in mode_visits.items():
            report = recall_report(ids, unit, order, found.labels, args.eps, visited)
            if pair_rows is None:
                pair_rows = [[f"{r.eps:g}", r.similar_pairs, r.removed_by_brute_force] for r in report.per_eps]
            visiting = 0.0 if visited is None else float((visited >= 0).mean())
            recall_rows.append(
                [k, mode, f"{visiting:.0%}", f"{compared_pairs(found.labels, visited) / all_pairs:.1%}",
                 f"{times[mode]:.3f}", f"{times[mode] / brute_time:.2f}"]
                + [recall_cell(r) for r in report.per_eps]
            )
            print(" | ".join(str(c) for c in recall_rows[-1]), file=sys.stderr, flush=True)

    cut = "" if args.embed_max_chars is None else f" of texts cut to {args.embed_max_chars} chars"
    body = (
        f"Recall of the clustered search vs brute force: first {args.n} documents of the Debian corpus, "
        f"all-MiniLM-L6-v2 embeddings{cut} "
        f"({how}), which_to_keep={WHICH}, torch k-means on the CPU, {args.threads} torch thread(s). "
        f"Brute force (the same kernel over all {args.n} documents as one cluster): {brute_time:.3f} s.\n\n"
        "Near-duplicate pairs and removals by brute force:\n\n"
        + markdown_table(["eps", "pairs with cosine >= 1 - eps", "documents brute force removes"], pair_rows or [])
        + "\n\nEach eps cell: pair recall / share of brute-force removals also made ('-': no such pairs). "
        "'visiting': documents compared with their second-nearest cluster too; 'compared': dot products "
        f"computed, as a share of all pairs; times: median of {args.repeats} interleaved rounds "
        f"({'process CPU time, one thread' if clock == 'cpu' else 'wall'}).\n\n"
        + markdown_table(
            ["k", "mode", "visiting", "compared", "search s", "search / brute force"]
            + [f"eps {e:g}" for e in args.eps],
            recall_rows, "rlrrrr" + "r" * len(args.eps),
        )
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
