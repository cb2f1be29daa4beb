"""Benchmark: semantic deduplication of real documents end to end on the CPU,
time per phase and how each phase grows with the number of documents.

For each size N, the first N documents of the Debian corpus are written as
JSONL files of ``--docs-per-file`` records (one partition each) with an
integer ``doc_id``, and deduplicated on the local Beam runner with k =
N / ``--docs-per-cluster`` clusters (constant mean cluster size, so pairwise
work should grow linearly; pass ``--clusters`` to fix k instead). Phase times
come from the workflow's own metadata.

Embedding modes (``--embeddings``):

* ``cache`` (default): embeddings of the largest N are computed once by
  sentence-transformers outside Beam (cached as .npy under /tmp with their
  throughput, and shared with bench_recall.py) and written as each N's
  embedding parquet; ``SemanticDeduplicationWorkflow`` and
  ``TextDuplicatesRemovalWorkflow`` then run every phase after embedding, and
  the embedding column is N / the cached throughput, marked as an estimate.
  On a 2-core CPU embedding runs at ~60 docs/s, so timing it inside every
  run would take most of the benchmark's time (15 minutes at N = 50k).
* ``workflow``: ``TextSemanticDeduplicationWorkflow`` with
  sentence-transformers does everything, embedding included and timed.

Growth between consecutive sizes is (t2 / t1) / (N2 / N1): 1.0 is linear.

    python bench/bench_e2e.py                                  # N = 2k, 5k, embeddings reused
    python bench/bench_e2e.py --embeddings workflow            # embedding timed inside the workflow
    python bench/bench_e2e.py --sizes 10000 50000 --embed-max-chars 1000
    python bench/bench_e2e.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    CorpusEmbeddings,
    add_append_argument,
    corpus_embeddings,
    load_corpus,
    machine_description,
    markdown_table,
    publish,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from beam_curator.workflows.semantic import (  # noqa: E402
    SemanticDeduplicationWorkflow,
    TextDuplicatesRemovalWorkflow,
    TextSemanticDeduplicationWorkflow,
)

PHASES = ("embedding", "kmeans", "pairwise", "identification", "removal")
ID = "doc_id"


def write_inputs(records: list[dict], folder: Path, per_file: int) -> None:
    folder.mkdir(parents=True)
    for part, start in enumerate(range(0, len(records), per_file)):
        with (folder / f"part-{part:05d}.jsonl").open("w", encoding="utf-8") as out:
            for offset, record in enumerate(records[start : start + per_file]):
                out.write(json.dumps({ID: start + offset, "text": record["text"]}) + "\n")


def write_embeddings(vectors: np.ndarray, folder: Path, per_file: int) -> None:
    """The embedding phase's output, as the workflow itself would write it."""
    folder.mkdir(parents=True)
    dims = vectors.shape[1]
    for part, start in enumerate(range(0, len(vectors), per_file)):
        block = np.ascontiguousarray(vectors[start : start + per_file], dtype=np.float32)
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), dims).cast(pa.list_(pa.float32()))
        table = pa.table({ID: pa.array(np.arange(start, start + len(block), dtype=np.int64)), "embeddings": embedding})
        pq.write_table(table, folder / f"part-{part:05d}.parquet")


def run_workflow(
    n: int, records: list[dict], work: Path, args: argparse.Namespace, embedded: CorpusEmbeddings | None
) -> dict:
    inputs, output, cache = work / "input", work / "output", work / "cache"
    write_inputs(records[:n], inputs, args.docs_per_file)
    k = args.clusters or max(1, n // args.docs_per_cluster)
    shared = dict(n_clusters=k, eps=args.eps, pairwise_batch_size=args.batch, runner=args.runner)
    jsonl = dict(input_filetype="jsonl", output_filetype="jsonl")
    if embedded is None:
        meta = TextSemanticDeduplicationWorkflow(
            str(inputs), str(output), str(cache), id_field=ID, embedding_backend="sentence-transformers",
            embedding_max_chars=args.embed_max_chars, **jsonl, **shared,
        ).run().metadata
    else:
        write_embeddings(embedded.vectors[:n], cache / "embeddings", args.docs_per_file)
        meta = SemanticDeduplicationWorkflow(
            str(cache / "embeddings"), str(output), str(cache), id_field=ID, **shared
        ).run().metadata
        meta.update(
            TextDuplicatesRemovalWorkflow(
                str(inputs), meta["duplicates_path"], str(output / "deduplicated"), str(cache),
                id_field=ID, runner=args.runner, **jsonl,
            ).run()
        )
        meta["embedding_time"] = None
        meta["embedding_estimate"] = n / embedded.docs_per_second
    meta["n_clusters"] = k
    return meta


def run_once(n: int, records: list[dict], args: argparse.Namespace, embedded: CorpusEmbeddings | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-e2e-{n}-", dir=args.workdir))
    try:
        meta = run_workflow(n, records, work, args, embedded)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"N={n}: " + ", ".join(f"{p} {meta.get(p + '_time')}" for p in PHASES), file=sys.stderr, flush=True)
    return meta


def phase_seconds(meta: dict) -> dict[str, float | None]:
    """Seconds of each phase run (None: embedding not run) and their sum."""
    times = {phase: meta.get(f"{phase}_time") for phase in PHASES}
    times["total"] = sum(t for t in times.values() if t is not None)
    return times


def cell(meta: dict, seconds: float | None) -> str:
    """A phase's seconds, or the embedding estimate where embedding was not run."""
    if seconds is not None:
        return f"{seconds:.1f}"
    return f"≈{meta['embedding_estimate']:.0f} (est.)"


def growth(times: list[float | None], sizes: list[int]) -> list[str]:
    """(t2 / t1) / (N2 / N1) between consecutive sizes."""
    out = []
    for (t1, n1), (t2, n2) in zip(zip(times, sizes), zip(times[1:], sizes[1:])):
        out.append("-" if not t1 or t2 is None else f"{(t2 / t1) / (n2 / n1):.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000], help="document counts N")
    parser.add_argument("--embeddings", choices=["workflow", "cache"], default="cache",
                        help="embed inside the workflow, or reuse embeddings computed once (see above)")
    parser.add_argument("--embed-max-chars", type=int, help="cut texts to this many characters before embedding")
    parser.add_argument("--docs-per-cluster", type=int, default=100, help="k = N / this (mean cluster size)")
    parser.add_argument("--clusters", type=int, help="fixed k for every N instead")
    parser.add_argument("--docs-per-file", type=int, default=1000, help="records per input file (= partition)")
    parser.add_argument("--eps", type=float, default=0.01)
    parser.add_argument("--batch", type=int, default=1024, help="pairwise batch size")
    parser.add_argument("--runner", default="local", help="runner preset")
    parser.add_argument("--workdir", type=Path, help="where to put inputs and outputs (default: a temp folder)")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    machine = machine_description()
    sizes = sorted(args.sizes)
    records = load_corpus(sizes[-1], args.data)
    embedded, how = None, "computed inside the workflow (sentence-transformers on the CPU, in Beam)"
    if args.embeddings == "cache":
        embedded = corpus_embeddings(sizes[-1], args.embed_max_chars, args.data)
        how = (f"reused, not timed per N ({embedded.note}); the embedding column estimates N / that rate, "
               "and the total leaves it out; an untimed run of the smallest N went first, to warm up Beam")
        # The first Beam pipeline of a process pays its start-up, which would land
        # on the k-means phase of the smallest N. (In workflow mode the embedding
        # phase of the smallest N pays it, as it pays for loading the model.)
        run_once(sizes[0], records, args, embedded)
    results = [run_once(n, records, args, embedded) for n in sizes]

    columns = [*PHASES, "total"]
    seconds = [phase_seconds(meta) for meta in results]
    rows = [
        [f"{n:,}", meta["n_clusters"], *(cell(meta, t[c]) for c in columns),
         meta.get("num_duplicates"), meta.get("num_duplicates_removed")]
        for n, meta, t in zip(sizes, results, seconds)
    ]
    growths = {c: growth([t[c] for t in seconds], sizes) for c in columns}
    growth_rows = [
        [f"{a:,} → {b:,}", *(growths[c][i] for c in columns)] for i, (a, b) in enumerate(zip(sizes, sizes[1:]))
    ]
    body = (
        f"Semantic dedup end to end: first N Debian package descriptions, runner {args.runner}, eps={args.eps}, "
        f"pairwise batch {args.batch}, {args.docs_per_file} docs per input file, "
        + (f"k = {args.clusters}" if args.clusters else f"k = N / {args.docs_per_cluster}")
        + f". Embeddings: {how}"
        + ("" if args.embed_max_chars is None else f", texts cut to {args.embed_max_chars} chars")
        + ". Seconds per phase (wall); total = sum of the phases shown:\n\n"
        + markdown_table(
            ["N", "k", *(f"{c} s" for c in columns), "duplicates", "removed"], rows, "r" * (len(columns) + 4)
        )
    )
    if growth_rows:
        body += "\n\nGrowth per phase, (t2 / t1) / (N2 / N1), 1.0 = linear:\n\n" + markdown_table(
            ["N", *columns], growth_rows
        )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
