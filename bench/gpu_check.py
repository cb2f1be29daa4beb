"""Check the GPU paths of semantic dedup against the CPU reference, then time them.

Run through ``bench/gpu_check.sh`` on an NVIDIA machine with PyTorch (only
torch, numpy and pandas are needed; Apache Beam is never imported).

Checks, on fresh random data (seed printed, ``--seed`` to repeat):

* k-means: ``fit_kmeans(backend="torch")`` on the device and on the CPU with
  the same seed and iteration count, on well-separated clusters: centroids
  must pair up one-to-one and agree to ``1e-3`` relative; inertia to ``1e-4``.
* ``assign`` of the same rows to the same centroids: labels agree on all but
  near-tied rows, distances to ``1e-4``.
* pairwise: ``semdedup_cluster_by_keys`` and ``cross_cluster_scores`` on
  clusters with planted near-duplicates: scores agree to ``1e-5`` and the
  duplicate sets at eps 0.001 / 0.01 / 0.05 / 0.1 are identical, except
  documents whose score lies within ``1e-5`` of a threshold (counted).

Then, timed on ``--rows`` x ``--dims`` vectors (1M x 768): the k-means fit on a
sample of ``--fit-sample-gib`` (``--fit-iters`` Lloyd iterations, timed apart
from seeding) plus the assignment of every row, and the
pairwise kernel on a lognormal mix of cluster sizes and on one giant cluster,
each beside the card's own float32 matmul rate, TF32 off and on. Prints
markdown tables; exits 1 if a check fails.

    bash bench/gpu_check.sh                      # on the GPU box
    bash bench/gpu_check.sh --device cpu --small # smoke test of this script anywhere
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pairwise import lognormal_sizes, matmul_reference  # noqa: E402
from common import add_append_argument, interleaved_medians, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.dedup.semantic.cross_cluster import cross_cluster_scores  # noqa: E402
from beam_curator.dedup.semantic.kmeans import assign, fit_kmeans  # noqa: E402
from beam_curator.dedup.semantic.pairwise import (  # noqa: E402
    SCORE,
    identify_duplicates,
    max_similarity_to_earlier,
    semdedup_cluster_by_keys,
)

EPS = (0.001, 0.01, 0.05, 0.1)
BORDER = 1e-5  # float32 and float32-on-another-device may differ this close to a threshold


@dataclass(frozen=True)
class Sizes:
    check_rows: int
    check_k: int
    check_iters: int
    pair_docs: int
    pair_mean: int
    pair_giant: int
    rows: int
    k: int
    mean_cluster: int
    giant: int
    batches: tuple[int, ...]


FULL = Sizes(50_000, 100, 30, 20_000, 300, 5_000, 1_000_000, 1_000, 1_000, 100_000, (1024, 4096))
SMALL = Sizes(4_000, 20, 10, 3_000, 200, 1_500, 20_000, 50, 400, 4_000, (1024,))


class Checks:
    """Rows of the correctness table; remembers whether any failed."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.failed = False

    def add(self, name: str, value: str, want: str, ok: bool) -> None:
        self.rows.append([name, value, want, "ok" if ok else "FAIL"])
        self.failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {value} (want {want})", file=sys.stderr, flush=True)


def mixture(n: int, d: int, modes: int, spread: float, seed: int, device: torch.device) -> np.ndarray:
    """Unit rows around ``modes`` random directions, drawn on ``device`` (fast for 1M rows)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    centres = torch.randn(modes, d, generator=gen, device=device)
    centres /= centres.norm(dim=1, keepdim=True)
    x = centres[torch.randint(modes, (n,), generator=gen, device=device)]
    x += torch.randn(n, d, generator=gen, device=device) * (spread / d**0.5)
    x /= x.norm(dim=1, keepdim=True)
    return x.cpu().numpy()


def with_near_duplicates(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """Unit rows of which half are noisy copies of others, at cosines from ~0.99995 to ~0.85."""
    x = rng.standard_normal((n, d)).astype(np.float32)
    half = n // 2
    noise = rng.choice([0.0, 0.01, 0.03, 0.1, 0.2, 0.3, 0.6], size=(half, 1)).astype(np.float32)
    x[n - half :] = x[rng.integers(0, n - half, half)] + noise * rng.standard_normal((half, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def check_kmeans(checks: Checks, sizes: Sizes, d: int, dev: torch.device, seed: int) -> None:
    x = mixture(sizes.check_rows, d, sizes.check_k, 0.5, seed, torch.device("cpu"))
    fits = {
        name: fit_kmeans(x, sizes.check_k, max_iter=sizes.check_iters, tol=0, seed=seed, backend="torch", device=where)
        for name, where in (("cpu", "cpu"), ("dev", dev))
    }
    cpu, gpu = fits["cpu"].centroids, fits["dev"].centroids
    # Pair each device centroid with its nearest CPU one: a reordering is fine, a different solution is not.
    nearest = np.argmin(((gpu[:, None, :] - cpu[None, :, :]) ** 2).sum(-1), axis=1)
    one_to_one = len(np.unique(nearest)) == len(cpu)
    rel = float((np.linalg.norm(gpu - cpu[nearest], axis=1) / np.linalg.norm(cpu[nearest], axis=1)).max())
    checks.add(f"k-means centroids ({sizes.check_rows}x{d}, k={sizes.check_k}): max relative error",
               f"{rel:.2e}, one-to-one {one_to_one}", "< 1e-3, one-to-one True", one_to_one and rel < 1e-3)
    inertia = abs(fits["dev"].inertia - fits["cpu"].inertia) / fits["cpu"].inertia
    checks.add("k-means inertia: relative error", f"{inertia:.2e}", "< 1e-4", inertia < 1e-4)

    ref, got = assign(x, cpu, device="cpu"), assign(x, cpu, device=dev)
    # A row whose two nearest centroids are (almost) equally far may go either way.
    tied = np.abs(ref.second_l2_dist - ref.l2_dist_to_cent) < 1e-5
    wrong = int(((ref.labels != got.labels) & ~tied).sum())
    checks.add("assign: labels differing (rows not near-tied)", f"{wrong} of {len(x)} ({int(tied.sum())} near-tied)",
               "0", wrong == 0)
    same = ref.labels == got.labels
    err = max(float(np.abs(ref.l2_dist_to_cent - got.l2_dist_to_cent)[same].max()),
              float(np.abs(ref.cosine_dist_to_cent - got.cosine_dist_to_cent)[same].max()))
    checks.add("assign: max distance difference", f"{err:.2e}", "< 1e-4", err < 1e-4)


def duplicate_mismatches(reference: np.ndarray, other: np.ndarray) -> tuple[int, int]:
    """(documents flagged differently at some eps, documents within BORDER of a threshold)."""
    wrong = border = 0
    for eps in EPS:
        near = np.abs(reference - (1 - eps)) < BORDER
        differ = identify_duplicates(reference, eps) != identify_duplicates(other, eps)
        wrong += int((differ & ~near).sum())
        border += int(near.sum())
    return wrong, border


def check_pairwise(checks: Checks, sizes: Sizes, d: int, dev: torch.device, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cluster_sizes = [*lognormal_sizes(sizes.pair_docs, sizes.pair_mean, 1.0, rng), sizes.pair_giant]
    clusters = [with_near_duplicates(int(n), d, rng) for n in cluster_sizes]
    keys = [rng.random(len(c)) for c in clusters]
    ids, start = [], 0
    for c in clusters:
        ids.append(np.arange(start, start + len(c)))
        start += len(c)
    for batch in sizes.batches:
        score_err, wrong, border, index_same, total = 0.0, 0, 0, 0, 0
        for i, c, k in zip(ids, clusters, keys):
            ref = semdedup_cluster_by_keys(i, c, k, "hard", batch, "cpu")
            got = semdedup_cluster_by_keys(i, c, k, "hard", batch, dev)
            score_err = max(score_err, float(np.abs(ref[SCORE] - got[SCORE]).max()))
            w, b = duplicate_mismatches(ref[SCORE].to_numpy(), got[SCORE].to_numpy())
            wrong, border = wrong + w, border + b
            index_same += int((ref["max_id"] == got["max_id"]).sum())
            total += len(ref)
        name = f"pairwise, {len(clusters)} clusters ({sizes.pair_docs} docs + {sizes.pair_giant}), batch {batch}"
        checks.add(f"{name}: max score difference", f"{score_err:.2e}", f"< {BORDER:g}", score_err < BORDER)
        checks.add(f"{name}: duplicates differing at eps {'/'.join(map(str, EPS))}",
                   f"{wrong} ({border} within {BORDER:g} of a threshold; max_id same for {index_same / total:.4%})",
                   "0", wrong == 0)
    # Cross-cluster: each cluster's members against the next cluster's documents as visitors.
    score_err, wrong = 0.0, 0
    for a in range(min(len(clusters) - 1, 8)):
        b = a + 1
        args = (ids[a], clusters[a], keys[a], ids[b], clusters[b], keys[b], "hard", sizes.batches[0])
        ref, got = cross_cluster_scores(*args, "cpu"), cross_cluster_scores(*args, dev)
        same_rows = len(ref) == len(got) and (ref["id"].to_numpy() == got["id"].to_numpy()).all()
        if not same_rows:
            wrong += abs(len(ref) - len(got)) or 1
            continue
        score_err = max(score_err, float(np.abs(ref[SCORE] - got[SCORE]).max()) if len(ref) else 0.0)
        wrong += duplicate_mismatches(ref[SCORE].to_numpy(), got[SCORE].to_numpy())[0]
    checks.add("cross-cluster scores: max difference / duplicates differing", f"{score_err:.2e} / {wrong}",
               f"< {BORDER:g} / 0", score_err < BORDER and wrong == 0)


def synced(fn: Callable[[], object], dev: torch.device) -> Callable[[], None]:
    def run() -> None:
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    return run


def matmul_rates(d: int, dev: torch.device, repeats: int) -> dict[str, float]:
    """The card's float32 GFLOP/s on a (4096 x d) @ (d x 8192) block, TF32 off and on."""
    a = torch.randn(4096, d, device=dev)
    b = torch.randn(8192, d, device=dev)
    flops = 2 * 4096 * 8192 * d * 8
    settings = {"fp32, TF32 off": False} | ({"fp32, TF32 on": True} if dev.type == "cuda" else {})
    rates = {}
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, tf32 in settings.items():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            t = interleaved_medians({name: synced(lambda: [a @ b.T for _ in range(8)], dev)}, repeats)[name]
            rates[name] = flops / t / 1e9
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return rates


def performance(
    sizes: Sizes, d: int, dev: torch.device, seed: int, repeats: int, sample_gib: float, fit_iters: int
) -> list[list[str]]:
    rates = matmul_rates(d, dev, repeats)
    peak = rates["fp32, TF32 off"]
    tf32 = rates.get("fp32, TF32 on")

    def row(what: str, secs: float | None, rate: float, note: str = "") -> list[str]:
        shares = [f"{rate / peak:.0%}", "-" if tf32 is None else f"{rate / tf32:.0%}"]
        return [what, "-" if secs is None else f"{secs:.3f}", f"{rate:,.0f}", *shares, note]

    rows = [row(f"matmul {name}, (4096x{d})@({d}x8192)", None, value) for name, value in rates.items()]
    x = mixture(sizes.rows, d, sizes.k, 0.8, seed + 1, dev)
    # Fitted on rows with fewer, wider modes than k, as real embeddings are:
    # on x (k tight modes) Lloyd reaches a fixed point after one iteration.
    wide = mixture(sizes.rows, d, max(1, sizes.k // 4), 2.0, seed + 2, dev)
    models = {}

    def fitter(iters: int) -> Callable[[], None]:
        def fit() -> None:
            models[iters] = fit_kmeans(wide, sizes.k, max_iter=iters, tol=0, seed=seed, backend="torch", device=dev,
                                       max_sample_bytes=int(sample_gib * 2**30))
        return synced(fit, dev)

    # The difference is the Lloyd iterations alone; medians after a warm-up,
    # since a first fit on a GPU also pays for CUDA's and cuBLAS's start.
    times = interleaved_medians({str(iters): fitter(iters) for iters in (0, fit_iters)}, repeats)
    fits = {iters: times[str(iters)] for iters in (0, fit_iters)}
    model = models[fit_iters]
    lloyd_s = max(fits[fit_iters] - fits[0], 1e-9)
    # Rate: what the iterations that ran would cost as plain Lloyd passes
    # (one full rows x k product each). Hamerly's bounds skip most of that
    # work, so this equivalent rate may pass the card's matmul rate.
    rows.append(row(f"k-means fit, {model.n_fit_rows:,} sampled rows, k={sizes.k}", fits[fit_iters],
                    2 * model.n_fit_rows * sizes.k * d * max(model.n_iter, 1) / 1e9 / lloyd_s,
                    f"{model.n_iter} Lloyd iterations ran of at most {fit_iters} (a fixed point ends them) in "
                    f"{lloyd_s:.3f} s, rate as plain Lloyd passes; seeding and sampling {fits[0]:.3f} s"))
    found = synced(lambda: assign(x, model.centroids, device=dev), dev)
    assign_s = interleaved_medians({"assign": found}, repeats)["assign"]
    rows.append(row(f"assign all {sizes.rows:,} rows", assign_s, 2 * sizes.rows * sizes.k * d / 1e9 / assign_s,
                    f"host->device {x.nbytes / assign_s / 1e9:.1f} GB/s incl. compute"))

    rng = np.random.default_rng(seed)
    mix_sizes = lognormal_sizes(min(sizes.rows, len(x)), sizes.mean_cluster, 1.0, rng)
    bounds = np.concatenate([[0], np.cumsum(mix_sizes)])
    scenarios = {
        f"{len(mix_sizes)} lognormal clusters (max {mix_sizes.max():,})": [x[a:b] for a, b in zip(bounds, bounds[1:])],
        f"one cluster of {sizes.giant:,}": [x[: sizes.giant]],
    }
    for name, clusters in scenarios.items():
        n = np.array([len(c) for c in clusters], dtype=np.float64)
        useful = float((n * (n - 1) * d).sum()) / 1e9
        on_device = [torch.from_numpy(c).to(dev) for c in clusters]
        for batch in sizes.batches:
            t = interleaved_medians({
                "kernel": synced(lambda: [max_similarity_to_earlier(c, batch, dev) for c in clusters], dev),
                "matmul": synced(lambda: matmul_reference(on_device, batch), dev),
            }, repeats)
            full = float((2 * n * n * d).sum()) / 1e9
            rows.append(row(f"pairwise kernel, {name}, batch {batch}", t["kernel"], useful / t["kernel"],
                            f"useful FLOPs (lower triangle), numpy in/out; same-shape blocked matmul: "
                            f"{full / t['matmul']:,.0f} GFLOP/s"))
        del on_device
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="device to check against the CPU (default cuda)")
    parser.add_argument("--small", action="store_true", help="small sizes: a smoke test that runs anywhere")
    parser.add_argument("--dims", type=int, default=768)
    parser.add_argument("--rows", type=int, help="rows for the timings (default 1,000,000; 20,000 with --small)")
    parser.add_argument("--fit-sample-gib", type=float, default=1.0, help="k-means fit sample budget")
    parser.add_argument("--fit-iters", type=int, default=20, help="Lloyd iterations of the timed fit (no early stop)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(3), "little"))
    parser.add_argument("--skip-timings", action="store_true", help="only the correctness checks")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch; run with --device cpu --small for a smoke test")
    sizes = SMALL if args.small else FULL
    if args.rows:
        sizes = Sizes(**{**sizes.__dict__, "rows": args.rows})
    machine = machine_description()
    print(f"seed {args.seed}; TF32 for matmul: {torch.backends.cuda.matmul.allow_tf32}, "
          f"float32 matmul precision: {torch.get_float32_matmul_precision()}", file=sys.stderr)
    beam_loaded = "apache_beam" in sys.modules

    checks = Checks()
    check_kmeans(checks, sizes, args.dims, dev, args.seed)
    check_pairwise(checks, sizes, args.dims, dev, args.seed)
    checks.add("apache_beam imported by the dedup kernels", str(beam_loaded), "False", not beam_loaded)
    body = (
        f"Device {dev} vs CPU reference, seed {args.seed}, d={args.dims}, TF32 for matmul "
        f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'} (as this process runs the kernels).\n\n"
        + markdown_table(["check", "measured", "want", "result"], checks.rows, "llll")
    )
    if not args.skip_timings:
        rows = performance(sizes, args.dims, dev, args.seed, args.repeats, args.fit_sample_gib, args.fit_iters)
        body += (
            f"\n\nTimings on {dev}, median of {args.repeats} (wall). GFLOP/s against the "
            "card's float32 matmul rate with TF32 off and on:\n\n"
            + markdown_table(["what", "s", "GFLOP/s", "of fp32 (TF32 off)", "of TF32", "note"], rows, "lrrrrl")
        )
    publish(__file__, body, args.append, machine)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
