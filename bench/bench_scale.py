"""Benchmark: the post-embedding phases of semantic dedup at scale, against a
hand-written in-memory script, side by side in one run.

Data: ``--n`` unit 384-d vectors around ``--n // 1000`` random directions
(embeddings of a corpus with topics), of which ``--dup-share`` are planted
near-copies (cosine ~0.9999) of another document of the same file, written
as ``--files`` parquet files (``id`` int64, ``embeddings`` list<float32>),
generated file by file and cached under ``$BEAM_CURATOR_BENCH_CACHE``.

Contenders, each in a fresh process (so that its peak RSS is its own):

* ``beam_curator``: ``SemanticDeduplicationWorkflow`` on the local runner at its defaults (a thread per core),
  from the parquet files to ``duplicates/``, resumable, fresh cache;
* ``baseline``: what one would write by hand with everything in memory:
  read every file into one array, faiss-cpu spherical k-means, faiss
  assignment, then per cluster a torch matmul of the ranked members and the
  maximum over earlier ones; duplicates written as parquet.

Both fit k-means on the same number of documents (faiss's default sample,
256 per centroid, unless ``--fit-per-centroid`` says otherwise) for the
same ``--iters`` iterations, with k = N / ``--docs-per-cluster``, keep the
document farthest from its centroid (``hard``), and use eps=``--eps``.
Reported: wall and CPU seconds (the process and its children), peak RSS,
seconds per phase of the workflow, duplicates found and planted.

    python bench/bench_scale.py --n 200000
    python bench/bench_scale.py --n 1000000 --append BENCHMARKS.md
    python bench/bench_scale.py --n 10000000 --docs-per-cluster 3000 --only beam_curator --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    EMBEDDING_CACHE,
    add_append_argument,
    child_result,
    machine_description,
    markdown_table,
    publish,
)

from beam_curator.cores import usable_cores  # noqa: E402

DIMS = 384
CONTENDERS = ("beam_curator", "baseline")


def dataset(n: int, files: int, dup_share: float, seed: int) -> Path:
    """The parquet files of the run (generated once per size)."""
    folder = EMBEDDING_CACHE / f"scale-{n}-{files}-{dup_share}-{seed}"
    if (folder / "_done").exists():
        return folder
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    modes = rng.standard_normal((max(1, n // 1000), DIMS), dtype=np.float32)
    modes /= np.linalg.norm(modes, axis=1, keepdims=True)
    bounds = np.linspace(0, n, files + 1).astype(np.int64)
    for number, (low, high) in enumerate(zip(bounds[:-1], bounds[1:])):
        rows = int(high - low)
        x = modes[rng.integers(len(modes), size=rows)]
        x += rng.standard_normal((rows, DIMS), dtype=np.float32) * np.float32(0.6 / np.sqrt(DIMS))
        copies = rng.choice(rows, size=int(rows * dup_share), replace=False)
        originals = rng.integers(rows, size=len(copies))
        originals = np.where(np.isin(originals, copies), (originals + 1) % rows, originals)
        x[copies] = x[originals] + rng.standard_normal((len(copies), DIMS), dtype=np.float32) * np.float32(0.01 / np.sqrt(DIMS))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIMS).cast(pa.list_(pa.float32()))
        table = pa.table({"id": pa.array(np.arange(low, high, dtype=np.int64)), "embeddings": vectors})
        pq.write_table(table, folder / f"part-{number:05d}.parquet")
    (folder / "_done").write_text(json.dumps({"n": n, "planted": int(n * dup_share)}))
    return folder


def run_workflow(data: Path, work: Path, args: argparse.Namespace) -> dict:
    from beam_curator.workflows.semantic import SemanticDeduplicationWorkflow

    k = max(1, args.n // args.docs_per_cluster)
    result = SemanticDeduplicationWorkflow(
        str(data), str(work / "output"), cache_path=str(work / "cache"), n_clusters=k, eps=args.eps,
        max_iter=args.iters, fit_data_fraction=fit_fraction(args), which_to_keep="hard", runner="local",
        num_workers=args.workers, progress=False,
    ).run()
    phases = {name: result.get_metadata(f"{name}_time") for name in ("kmeans", "pairwise", "identification")}
    return {"duplicates": result.get_metadata("num_duplicates"), "phases": phases}


def fit_fraction(args: argparse.Namespace) -> float | None:
    share = args.fit_per_centroid * max(1, args.n // args.docs_per_cluster) / args.n
    return share if share < 1 else None


def run_baseline(data: Path, work: Path, args: argparse.Namespace) -> dict:
    """Everything in memory, no framework: the reference for the workflow's overheads."""
    import faiss
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    started = time.monotonic()
    tables = [pq.read_table(path, columns=["id", "embeddings"]) for path in sorted(data.glob("*.parquet"))]
    ids = np.concatenate([t.column("id").to_numpy() for t in tables])
    x = np.empty((len(ids), DIMS), dtype=np.float32)
    at = 0
    for table in tables:
        values = table.column("embeddings").combine_chunks().flatten().to_numpy()
        x[at : at + table.num_rows] = values.reshape(-1, DIMS)
        at += table.num_rows
    del tables
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    read = time.monotonic()
    k = max(1, args.n // args.docs_per_cluster)
    kmeans = faiss.Kmeans(DIMS, k, niter=args.iters, spherical=True, seed=args.seed,
                          max_points_per_centroid=args.fit_per_centroid)
    kmeans.train(x)
    similarity, labels = kmeans.index.search(x, 1)
    distance = 1 - similarity[:, 0]
    labels = labels[:, 0]
    fitted = time.monotonic()
    order = np.lexsort((-ids, -distance, labels))  # by cluster, farthest first (which_to_keep="hard")
    starts = np.searchsorted(labels[order], np.arange(k + 1))
    found = []
    for low, high in zip(starts[:-1], starts[1:]):
        members = order[low:high]
        if len(members) < 2:
            continue
        v = torch.from_numpy(x[members])
        sim = torch.tril(v @ v.T, diagonal=-1)
        best = sim.max(dim=1).values.numpy()
        found.append(ids[members][best >= 1 - args.eps])
    duplicates = np.sort(np.concatenate(found)) if found else np.array([], dtype=np.int64)
    (work / "output").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": duplicates}), work / "output" / "duplicates.parquet")
    done = time.monotonic()
    return {"duplicates": len(duplicates),
            "phases": {"read": read - started, "kmeans": fitted - read, "pairwise": done - fitted}}


def child(args: argparse.Namespace) -> int:
    """One contender in this process; prints its figures as JSON."""
    data = dataset(args.n, args.files, args.dup_share, args.seed)
    work = Path(args.work) / args.contender
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    wall = time.monotonic()
    result = (run_workflow if args.contender == "beam_curator" else run_baseline)(data, work, args)
    result["wall"] = time.monotonic() - wall
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu"] = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    result["peak_rss_gb"] = max(own.ru_maxrss, children.ru_maxrss) / 2**20
    shutil.rmtree(work, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def measure(contender: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--contender", contender, *sys.argv[1:]]
    command = [part for part in command if part not in ("--append", str(args.append))] if args.append else command
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return child_result(command, contender, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="documents")
    parser.add_argument("--files", type=int, default=20, help="parquet files they are spread over")
    parser.add_argument("--dup-share", type=float, default=0.05, help="share of planted near-copies")
    parser.add_argument("--docs-per-cluster", type=int, default=1000, help="k = n / this")
    parser.add_argument("--fit-per-centroid", type=int, default=256, help="k-means fit sample per centroid")
    parser.add_argument("--iters", type=int, default=20, help="k-means iterations for both")
    parser.add_argument("--eps", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int,
                        help="threads of the local runner (num_workers); default: the runner's, one per usable core")
    parser.add_argument("--only", choices=CONTENDERS, help="run one contender only (e.g. at sizes the baseline cannot hold)")
    parser.add_argument("--work", default=str(EMBEDDING_CACHE / "scale-work"), help="scratch folder for outputs")
    parser.add_argument("--contender", choices=CONTENDERS, help=argparse.SUPPRESS)
    add_append_argument(parser)
    args = parser.parse_args(argv)
    if args.contender:
        return child(args)

    machine = machine_description()
    started = time.monotonic()
    dataset(args.n, args.files, args.dup_share, args.seed)
    generated = time.monotonic() - started
    results = {name: measure(name, args) for name in CONTENDERS if args.only in (None, name)}
    k = max(1, args.n // args.docs_per_cluster)
    rows = []
    for name, found in results.items():
        phases = ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in found["phases"].items())
        rows.append([name, f"{found['wall']:.1f}", f"{found['cpu']:.1f}", f"{found['peak_rss_gb']:.2f}",
                     phases, f"{found['duplicates']:,}"])
    body = (
        f"Post-embedding semantic dedup on {args.n:,} synthetic 384-d unit vectors in {args.files} parquet files "
        f"({int(args.n * args.dup_share):,} planted near-copies; generated in {generated:.0f} s, not counted), "
        f"k = {k:,}, k-means fitted on {args.fit_per_centroid} documents per centroid for {args.iters} "
        f"iterations, eps = {args.eps}, which_to_keep = hard, "
        f"local runner with {args.workers or f'its default {usable_cores()}'} thread(s). Each contender in a fresh process; "
        "CPU = user + system time of it and its children; peak RSS = the largest resident set of it or any child.\n\n"
        + markdown_table(["contender", "wall s", "CPU s", "peak RSS GB", "seconds per phase", "duplicates"], rows)
    )
    if len(results) == 2:
        ours, base = results["beam_curator"], results["baseline"]
        body += (f"\n\nbeam_curator / baseline: wall {ours['wall'] / base['wall']:.2f}x, "
                 f"CPU {ours['cpu'] / base['cpu']:.2f}x, peak RSS {ours['peak_rss_gb'] / base['peak_rss_gb']:.2f}x.")
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
