"""Benchmark: semantic dedup with a static model (model2vec, distilled from the
bundled all-MiniLM-L6-v2) against the full model, and against SemHash using
the same static model, on the Debian corpus, in one run.

1. Quality: the static model's decisions against the full model's on the
   first ``--sample`` documents (default 10,000: the full model embeds ~63
   docs/s on 2 cores, so all 63,905 would take ~17 min; its vectors are cached
   under /tmp and shared with the other scripts). Exact all-pairs search on
   both sets of vectors, so that only the embedding differs: *pairs* are the
   document pairs at least 1 - eps similar; *documents* are those with at
   least one such partner. Recall and precision of the static model's sets
   against the full model's, at each ``--eps``.
2. End to end: ``TextSemanticDeduplicationWorkflow`` with
   ``embedding_backend="static"`` (all defaults: 100 clusters) on each of
   ``--runners`` (the default, ``local``, and ``in-process``, which runs no
   Beam pipeline) from JSONL files to the clean output, at each ``--sizes`` N (the
   first N documents, ``--docs-per-file`` per file), wall and CPU seconds of
   ``run()`` in this process, after its imports (torch's included);
   distillation is done before and not counted (cached).
3. SemHash 0.5.0 (``SemHash.from_records(...).self_deduplicate``) with the
   same static model at the same N (and at the sample's size) and threshold (1 - ``--e2e-eps``), wall and
   CPU. For each tool: documents removed; where N is within the sample, how
   many of the full model's duplicate pairs lost a member (recall) and how
   many removed documents have a full-model partner (precision); otherwise
   the overlap of the two tools' removed sets. With ``--cross-cluster``,
   ours also runs with ``cross_cluster=True`` (each document compared with
   its second-nearest cluster's members too) at each ``--n-clusters``,
   SemHash's recall being that of a search over all pairs.

    python bench/bench_static.py                     # sample 10k, N = 10k, 30k, 63,905
    python bench/bench_static.py --sample 63905 --cross-cluster --n-clusters 100 50   # recall at every N
                                                     # (17 min of full-model vectors, once)
    python bench/bench_static.py --sizes 10000 --append BENCHMARKS.md
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
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    add_append_argument,
    corpus_embeddings,
    load_corpus,
    machine_description,
    markdown_table,
    publish,
    timed,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from beam_curator.models.distill import distill_static_model  # noqa: E402
from beam_curator.workflows import TextSemanticDeduplicationWorkflow  # noqa: E402

ID = "doc_id"
_BLOCK = 2048  # rows per block of the exact all-pairs search


def similar_pairs(vectors: np.ndarray, eps_values: list[float]) -> dict[float, set[tuple[int, int]]]:
    """Every pair (i < j) at least 1 - eps similar, for each eps, by exact search in row blocks."""
    found: dict[float, set[tuple[int, int]]] = {eps: set() for eps in eps_values}
    loosest = 1 - max(eps_values)
    for start in range(0, len(vectors), _BLOCK):
        block = vectors[start : start + _BLOCK] @ vectors.T
        rows, cols = np.nonzero(block >= loosest)
        keep = cols > rows + start
        rows, cols, scores = rows[keep] + start, cols[keep], block[rows[keep], cols[keep]]
        for eps in eps_values:
            chosen = scores >= 1 - eps
            found[eps].update(zip(rows[chosen].tolist(), cols[chosen].tolist()))
    return found


def members(pairs: set[tuple[int, int]]) -> set[int]:
    return {doc for pair in pairs for doc in pair}


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.4f}" if whole else "n/a"


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def quality(texts: list[str], full: np.ndarray, static: np.ndarray, eps_values: list[float]) -> tuple[str, dict]:
    full_pairs, static_pairs = similar_pairs(full, eps_values), similar_pairs(static, eps_values)
    rows = []
    for eps in eps_values:
        f, s = full_pairs[eps], static_pairs[eps]
        fd, sd = members(f), members(s)
        rows.append([f"{eps:g}", len(f), len(s), ratio(len(f & s), len(f)), ratio(len(f & s), len(s)),
                     len(fd), len(sd), ratio(len(fd & sd), len(fd)), ratio(len(fd & sd), len(sd))])
    table = markdown_table(["eps", "full pairs", "static pairs", "pair recall", "pair precision",
                            "full docs", "static docs", "doc recall", "doc precision"], rows)
    return table, full_pairs


def write_inputs(records: list[dict], folder: Path, per_file: int) -> None:
    folder.mkdir(parents=True)
    for part, start in enumerate(range(0, len(records), per_file)):
        with (folder / f"part-{part:05d}.jsonl").open("w") as out:
            for offset, record in enumerate(records[start : start + per_file]):
                out.write(json.dumps({ID: start + offset, "text": record["text"]}) + "\n")


def run_ours(records: list[dict], model: Path, eps: float, work: Path, per_file: int,
             cross_cluster: bool = False, n_clusters: int = 100, runner: str = "local") -> tuple[set[int], dict, object]:
    write_inputs(records, work / "input", per_file)
    workflow = TextSemanticDeduplicationWorkflow(
        str(work / "input"), str(work / "output"), str(work / "cache"), input_filetype="jsonl", id_field=ID,
        embedding_backend="static", model_identifier=str(model), eps=eps, cross_cluster=cross_cluster,
        n_clusters=n_clusters, verbose=False, runner=runner)
    meta, timing = timed(lambda: workflow.run().metadata)
    removed = set(pq.read_table(work / "output" / "duplicate_pairs").column("id").to_pylist())
    return removed, meta, timing


def run_semhash(records: list[dict], model: Path, eps: float) -> tuple[set[int], object]:
    from model2vec import StaticModel
    from semhash import SemHash

    def deduplicate():
        encoder = StaticModel.from_pretrained(str(model))
        rows = [{ID: i, "text": record["text"]} for i, record in enumerate(records)]
        return SemHash.from_records(rows, columns=["text"], model=encoder).self_deduplicate(threshold=1 - eps)

    result, timing = timed(deduplicate)
    return {duplicate.record[ID] for duplicate in result.filtered}, timing


def judged(removed: set[int], pairs: set[tuple[int, int]]) -> tuple[str, str]:
    """Recall: the full model's duplicate pairs with a member removed; precision: removed documents
    with a full-model partner."""
    caught = sum(1 for i, j in pairs if i in removed or j in removed)
    return ratio(caught, len(pairs)), ratio(len(removed & members(pairs)), len(removed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=10_000, help="documents compared with the full model")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 63_905])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.05, 0.1])
    parser.add_argument("--e2e-eps", type=float, default=0.05, help="eps of the end-to-end and SemHash runs")
    parser.add_argument("--docs-per-file", type=int, default=4000)
    parser.add_argument("--pca-dims", type=int, default=256)
    parser.add_argument("--cross-cluster", action="store_true",
                        help="also run ours with cross_cluster=True (the second-nearest cluster searched too)")
    parser.add_argument("--n-clusters", type=int, nargs="+", default=[100],
                        help="n_clusters of the cross-cluster runs (the plain run keeps the default, 100)")
    parser.add_argument("--runners", nargs="+", default=["local", "in-process"],
                        help="runners ours runs on, each at every N (local: the default)")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    parser.add_argument("--workdir", type=Path, help="where inputs and outputs go (default: a temporary folder)")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    machine = machine_description()
    records = load_corpus(max([args.sample, *args.sizes]), args.data)

    model, distilling = timed(lambda: distill_static_model(pca_dims=args.pca_dims))
    texts = [record["text"] for record in records[: args.sample]]
    full = corpus_embeddings(args.sample, path=args.data)
    from beam_curator.models.static import StaticEmbedder

    embedder = StaticEmbedder(model)
    static, embedding = timed(lambda: embedder.embed(texts))
    quality_table, full_pairs = quality(texts, unit(full.vectors), unit(static), args.eps)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_static_"))
    rows = []
    reference = full_pairs.get(args.e2e_eps) if args.e2e_eps in full_pairs else \
        similar_pairs(unit(full.vectors), [args.e2e_eps])[args.e2e_eps]
    for n in sorted({args.sample, *args.sizes}):  # the sample's own size too: the one N judged against the full model
        runs = {}
        for runner in args.runners:
            runs[f"beam-curator ({runner})"] = run_ours(records[:n], model, args.e2e_eps, work / f"ours-{n}",
                                                        args.docs_per_file, runner=runner)
            shutil.rmtree(work / f"ours-{n}")
            for k in args.n_clusters if args.cross_cluster else []:
                runs[f"beam-curator ({runner}), cross-cluster, {k} clusters"] = run_ours(
                    records[:n], model, args.e2e_eps, work / f"ours-cross-{k}-{n}", args.docs_per_file,
                    cross_cluster=True, n_clusters=k, runner=runner)
                shutil.rmtree(work / f"ours-cross-{k}-{n}")
        theirs, their_time = run_semhash(records[:n], model, args.e2e_eps)
        in_sample = n <= args.sample
        pairs = {pair for pair in reference if pair[1] < n} if in_sample else set()
        for tool, (removed, _, timing) in [*runs.items(), ("SemHash 0.5.0", (theirs, None, their_time))]:
            recall, precision = judged(removed, pairs) if in_sample else ("n/a", "n/a")
            overlap = ratio(len(removed & theirs), len(removed | theirs)) if removed is not theirs else ""
            rows.append([f"{n:,}", tool, f"{timing.wall:.1f}", f"{timing.cpu:.1f}", len(removed), recall, precision,
                         overlap])
        for tool, (_, meta, _) in runs.items():
            rows.append([f"{n:,}", f"({tool}: embedding / k-means / pairwise / removal s)",
                         " / ".join(f"{meta.get(key) or 0:.1f}" for key in
                                    ("embedding_time", "kmeans_time", "pairwise_time", "removal_time")),
                         "", "", "", "", ""])

    body = f"""Static model: all-MiniLM-L6-v2 distilled by model2vec {__import__('model2vec').__version__} with PCA to
{args.pca_dims} dimensions ({distilling.wall:.1f} s now: {'a cache hit' if distilling.wall < 5 else 'distilled'}).
Full-model vectors of the first {args.sample:,} documents: {full.note}. The static model embedded them in
{embedding.wall:.2f} s wall, {embedding.cpu:.2f} s CPU ({args.sample / embedding.wall:,.0f} docs/s).

Static against the full model on the first {args.sample:,} documents, exact all-pairs search:

{quality_table}

End to end at eps {args.e2e_eps:g} (ours: the text workflow with every default and `embedding_backend="static"`,
JSONL in, clean JSONL out, on the runner named: `local` is the default, `in-process` runs no Beam pipeline; SemHash: `from_records` + `self_deduplicate(threshold={1 - args.e2e_eps:g})`,
records in memory, nothing written). Seconds of the call (ours `run()`; SemHash loading the model, then
deduplicating), wall and CPU, in one process after its imports. Recall: the full model's
duplicate pairs with a member removed; precision: removed documents that have a full-model partner (both only
within the {args.sample:,}-document sample); overlap: Jaccard of the removed set with SemHash's.

{markdown_table(["N", "tool", "wall s", "CPU s", "removed", "recall", "precision", "overlap"], rows)}
"""
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
