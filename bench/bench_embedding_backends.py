"""Benchmark: the CPU runtimes of the embedding stage (torch, ONNX Runtime,
OpenVINO), their speed side by side and whether they find the same duplicates.

Speed: for each runtime, a DirectRunner pipeline ``Create | RunInference |
Count`` embeds the first N corpus documents, in RunInference batches of
``--batch``; runs rotate in order (``common.interleaved_timings``) after one
small warm-up run of each that loads its model (and exports it, the first
time), and medians of wall and CPU seconds are reported. CPU seconds are
those of this process, where the DirectRunner and every runtime's threads
run: on a shared machine they move less with other jobs' load than wall time.

Speed against what the hardware allows: the model's matrix FLOPs (from the
texts' token lengths) per CPU-second, as a share of a large float32 matmul's
rate measured in the same run, so a float32 runtime's ceiling is visible.

Decisions: ``TextSemanticDeduplicationWorkflow`` deduplicates the same N
documents with each runtime (``--n-clusters`` clusters, same seed) at each
``--eps``, searching within clusters and across cluster boundaries; the sets
of removed ids and of duplicate pairs are compared with torch's as
|A ∩ B| / |A ∪ B| (Jaccard), as are all pairs similar by exact search, and
each document's vector with its torch vector by cosine. The workflow's own embedding time is reported too (one run,
not rotated, start-up included).

    python bench/bench_embedding_backends.py
    python bench/bench_embedding_backends.py --runtimes torch onnx-int8 --n 1000 --repeats 2
    python bench/bench_embedding_backends.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import ID, write_inputs  # noqa: E402
from bench_embedding import run_pipeline  # noqa: E402
from common import (  # noqa: E402
    add_append_argument,
    interleaved_timings,
    load_corpus,
    machine_description,
    markdown_table,
    publish,
)

from beam_curator.models import DEFAULT_MODEL, RUNTIMES  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402


def installed(runtime: str) -> bool:
    package = RUNTIMES[runtime].package
    return package is None or importlib.util.find_spec(package) is not None


def speeds(runtimes: list[str], texts: list[str], batch: int, repeats: int) -> dict:
    tags = {runtime: f"bench-{runtime}-{uuid.uuid4().hex}" for runtime in runtimes}
    for runtime in runtimes:  # loads (and exports) each model once; the timed runs reuse it by its tag
        run_pipeline("sentence-transformers", texts[:batch], batch, tags[runtime], runtime=runtime)
    contenders = {
        runtime: (lambda runtime=runtime: run_pipeline("sentence-transformers", texts, batch, tags[runtime],
                                                       runtime=runtime))
        for runtime in runtimes
    }
    return interleaved_timings(contenders, repeats, warmup=False)


SEARCHES = {"within clusters": False, "cross-cluster": True}


def deduplicate(runtime: str, inputs: Path, work: Path, eps_values: list[float], n_clusters: int) -> dict:
    """Duplicate ids and pairs per (search, eps), the vectors by id, and the embedding phase's seconds.
    Both searches and every eps reuse the one embedding run."""
    output, cache = work / runtime / "output", work / runtime / "cache"
    found: dict = {}
    for search, cross_cluster in SEARCHES.items():
        for eps in eps_values:
            meta = TextSemanticDeduplicationWorkflow(
                str(inputs), str(output), str(cache), input_filetype="jsonl", id_field=ID,
                embedding_backend="sentence-transformers", embedding_runtime=runtime, n_clusters=n_clusters,
                eps=eps, perform_removal=False, seed=42, runner="local", verbose=False, cross_cluster=cross_cluster,
            ).run().metadata
            pairs = pq.read_table(output / "duplicate_pairs").to_pandas()
            found[search, eps] = set(pairs["id"])
            found[search, "pairs", eps] = {frozenset(pair) for pair in zip(pairs["id"], pairs["max_id"])}
            found.setdefault("embedding_s", meta["embedding_time"])
    table = pq.read_table(cache / "embeddings")
    order = np.argsort(table.column(ID).to_numpy())
    vectors = np.stack(table.column("embeddings").to_numpy(zero_copy_only=False))[order]
    found["vectors"] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return found


def similar_pairs(vectors: np.ndarray, eps: float) -> set[tuple[int, int]]:
    """Every pair of documents at least 1 - eps similar, by exact all-pairs search: the embedding's
    own effect on decisions, without k-means (whose clusters move with any change of the vectors)."""
    similarity = np.triu(vectors @ vectors.T, k=1)
    return set(zip(*map(np.ndarray.tolist, np.nonzero(similarity >= 1 - eps))))


def jaccard(ours: set, theirs: set) -> str:
    return f"{len(ours & theirs) / len(ours | theirs):.3f}" if ours | theirs else "1.000"


def model_gflop(texts: list[str]) -> float:
    """The model's matrix FLOPs over ``texts`` as truncated for it: per layer and
    token the four attention projections and the two feed-forward matrices,
    plus the attention scores and their use (2·L²·h multiply-adds per layer).
    Embedding lookup, layer norms and softmax are left out (well under 1%)."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoConfig

    from beam_curator.models import resolve_model

    path = resolve_model(DEFAULT_MODEL)
    model = SentenceTransformer(path, device="cpu", local_files_only=True)  # truncates as the pipeline does
    lengths = model.tokenize(texts)["attention_mask"].sum(dim=1).double().numpy()  # tokens, padding left out
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    h, inner = config.hidden_size, config.intermediate_size
    multiply_adds = lengths * (4 * h * h + 2 * h * inner) + 2 * lengths**2 * h
    return float(2 * config.num_hidden_layers * multiply_adds.sum()) / 1e9


def sgemm_gflops_per_cpu_second(size: int = 2048, seconds: float = 3.0) -> float:
    """This machine's large float32 matrix product rate with torch's threads, per CPU-second."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start, done = time.process_time(), 0
    while time.process_time() - start < seconds:
        a @ b
        done += 1
    return 2 * size**3 * done / (time.process_time() - start) / 1e9


def speed_table(timings: dict, results: dict, n: int, gflop: float, sgemm: float) -> str:
    """docs/s of each runtime and its speed-up over torch, by wall and by CPU time, and the
    model FLOPs it did per CPU-second against this machine's sgemm rate."""
    headers = ["runtime", "pipeline docs/s (wall)", "docs/s per CPU-second", "speed-up vs torch (wall)",
               "speed-up vs torch (CPU)", "model GFLOP/s per CPU-second", "share of sgemm rate",
               "workflow embedding phase docs/s"]
    rows = [
        [runtime, f"{n / timing.wall:.1f}", f"{n / timing.cpu:.1f}", f"{timings['torch'].wall / timing.wall:.2f}",
         f"{timings['torch'].cpu / timing.cpu:.2f}", f"{gflop / timing.cpu:.1f}", f"{gflop / timing.cpu / sgemm:.0%}",
         f"{n / results[runtime]['embedding_s']:.1f}" if results else "-"]
        for runtime, timing in timings.items()
    ]
    return markdown_table(headers, rows)


def agreement_table(results: dict, eps_values: list[float]) -> str:
    """Each runtime's vectors and decisions against torch's: the workflow's, searching within clusters
    and across cluster boundaries, and every similar pair by exact all-pairs search."""
    headers = ["runtime", "min cosine to torch", "mean cosine to torch", "search"]
    for eps in eps_values:
        headers += [f"duplicates at eps {eps:g}", f"Jaccard of ids at eps {eps:g}", f"Jaccard of pairs at eps {eps:g}"]
    reference, rows = results["torch"], []
    for runtime, found in results.items():
        cosine = (found["vectors"] * reference["vectors"]).sum(axis=1)
        vectors = [runtime, f"{cosine.min():.5f}", f"{cosine.mean():.5f}"]
        for search in SEARCHES:
            row = [*vectors, search]
            for eps in eps_values:
                row += [len(found[search, eps]), jaccard(found[search, eps], reference[search, eps]),
                        jaccard(found[search, "pairs", eps], reference[search, "pairs", eps])]
            rows.append(row)
        row = [*vectors, "exact, all pairs"]
        for eps in eps_values:
            ours, theirs = similar_pairs(found["vectors"], eps), similar_pairs(reference["vectors"], eps)
            row += [f"{len(ours)} pairs", "-", jaccard(ours, theirs)]
        rows.append(row)
    return markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", nargs="+", choices=list(RUNTIMES), default=list(RUNTIMES))
    parser.add_argument("--n", type=int, default=2000, help="first N corpus documents")
    parser.add_argument("--batch", type=int, default=64, help="RunInference batch size in the speed runs")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each; medians are reported")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.05])
    parser.add_argument("--n-clusters", type=int, default=20)
    parser.add_argument("--threads", type=int,
                        help="compute threads of every runtime (torch.set_num_threads; default: torch's, one per core)")
    parser.add_argument("--speed-only", action="store_true", help="skip the deduplication runs")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    parser.add_argument("--workdir", type=Path, help="where temporary inputs and caches go (default: /tmp)")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    runtimes = [runtime for runtime in args.runtimes if installed(runtime)]
    if "torch" not in runtimes:
        raise SystemExit("torch is the reference runtime; include it in --runtimes")
    skipped = sorted(set(args.runtimes) - set(runtimes))

    if args.threads:
        torch.set_num_threads(args.threads)  # the other runtimes follow torch's setting
    machine = machine_description()
    records = load_corpus(args.n, args.data)
    texts = [record["text"] for record in records]
    sgemm = sgemm_gflops_per_cpu_second()
    timings = speeds(runtimes, texts, args.batch, args.repeats)
    print(json.dumps({name: vars(timing) for name, timing in timings.items()}), file=sys.stderr, flush=True)
    results: dict = {}
    if not args.speed_only:
        work = Path(tempfile.mkdtemp(prefix="bench-runtimes-", dir=args.workdir))
        try:
            write_inputs(records, work / "input", 250)
            results = {runtime: deduplicate(runtime, work / "input", work, args.eps, args.n_clusters)
                       for runtime in runtimes}
        finally:
            shutil.rmtree(work, ignore_errors=True)

    gflop = model_gflop(texts)
    versions = ", ".join(f"{package} {__import__(package).__version__}"
                         for package in ("sentence_transformers", "onnxruntime", "openvino")
                         if importlib.util.find_spec(package))
    body = (
        f"CPU runtimes of the embedding stage ({DEFAULT_MODEL}, first {args.n} corpus documents, {versions}). "
        f"Speed: DirectRunner RunInference in batches of {args.batch}, forward passes of 8 "
        f"length-sorted texts (1 text on ONNX Runtime), {torch.get_num_threads()} compute threads in every runtime, "
        f"medians of {args.repeats} rotating runs after a warm-up.\n\n"
        f"{speed_table(timings, results, args.n, gflop, sgemm)}\n\n"
        f"Model FLOPs: {gflop:.0f} GFLOP for the {args.n} texts, counted from their token lengths "
        f"(matrix products only); sgemm rate: a 2048² float32 matmul in torch with the same threads, "
        f"{sgemm:.1f} GFLOP/s per CPU-second. A runtime computing in float32 cannot do the model's work faster "
        f"than about that rate.\n\n"
    )
    if results:
        body += (
            f"Decisions: TextSemanticDeduplicationWorkflow on the same documents with each runtime, "
            f"{args.n_clusters} clusters, seed 42, searching within clusters (the default) and across cluster "
            f"boundaries (cross_cluster=True). Jaccard = |A ∩ B| / |A ∪ B| with torch's sets: of the ids "
            f"removed, and of the duplicate pairs (a removed id with the document it duplicates, unordered: of two "
            f"copies whose vectors tie, rounding may remove either, the same pair); 'exact, all pairs': every pair "
            f"of documents at least 1 - eps similar, which leaves out k-means, whose clusters move with any change "
            f"of the vectors.\n\n"
            f"{agreement_table(results, args.eps)}\n"
        )
    body += f"\nNot installed, not measured: {', '.join(skipped)}.\n" if skipped else ""
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
