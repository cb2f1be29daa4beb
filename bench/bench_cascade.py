"""Benchmark: the verify cascade of semantic dedup on the Debian corpus, and
its recall against a run with the full model alone.

The cascade (``TextSemanticDeduplicationWorkflow`` with a screening model)
runs end to end on the first N documents (JSONL files of ``--docs-per-file``
records, integer ``doc_id``), timed from its own metadata. The screening
model is chosen as the workflow chooses it (``--screening-model``,
``--screening-backend``, ``--screening-runtime``, ``--screening-max-chars``);
the full model is the bundled all-MiniLM-L6-v2, run by torch or by
``--runtime`` (e.g. ``onnx``: the same weights on ONNX Runtime).

Recall is measured on the first ``--recall-size`` documents (default: N):
the reference is ``SemanticDeduplicationWorkflow`` on the full model's
vectors of those documents (computed once outside Beam and cached, as
bench_e2e.py does; ~17 min for the whole corpus on 2 cores), with the same k
per document, eps and which_to_keep. Reported: recall (the reference's
removals the cascade also makes), precision against the reference's set, and
the share of the cascade's removals whose pair the full model's cached
vectors put at least 1 - eps apart, which should be 1.0. When the recall
size is below N the cascade runs again on that many documents.

    python bench/bench_cascade.py --size 10000                           # MiniLM on 64 chars screens
    python bench/bench_cascade.py --screening-backend static --screening-model PATH --screening-max-chars 0
    python bench/bench_cascade.py --size 63905 --recall-size 10000 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import ID, write_embeddings, write_inputs  # noqa: E402
from common import add_append_argument, corpus_embeddings, load_corpus, machine_description, markdown_table, publish  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from beam_curator.models import DEFAULT_MODEL  # noqa: E402
from beam_curator.workflows.semantic import SemanticDeduplicationWorkflow, TextSemanticDeduplicationWorkflow  # noqa: E402
from beam_curator.workflows.semantic.cascade import default_screening_eps  # noqa: E402

PHASES = ("embedding", "kmeans", "pairwise", "verification", "identification", "removal")


def run_cascade(n: int, records: list[dict], work: Path, args: argparse.Namespace) -> dict:
    inputs = work / f"input-{n}"
    write_inputs(records[:n], inputs, args.docs_per_file)
    screening = dict(screening_model_identifier=args.screening_model, screening_backend=args.screening_backend,
                     screening_runtime=args.screening_runtime, screening_max_chars=args.screening_max_chars or None,
                     screening_eps=args.screening_eps)
    meta = TextSemanticDeduplicationWorkflow(
        str(inputs), str(work / f"output-{n}"), str(work / f"cache-{n}"), id_field=ID, input_filetype="jsonl",
        output_filetype="jsonl", embedding_backend="sentence-transformers", embedding_runtime=args.runtime, n_clusters=clusters(n, args),
        eps=args.eps, which_to_keep=args.which_to_keep, runner=args.runner, **screening,
    ).run().metadata
    meta["removed"] = pd.read_parquet(Path(meta["duplicate_pairs_path"]) / "duplicate_pairs.parquet")
    print(f"cascade N={n}: " + ", ".join(f"{p} {meta.get(p + '_time', 0):.1f}" for p in PHASES)
          + f", total {meta['total_time']:.1f} s", file=sys.stderr, flush=True)
    return meta


def full_model_only(n: int, vectors: np.ndarray, work: Path, args: argparse.Namespace) -> pd.DataFrame:
    """The pairs (``id`` removed, ``max_id`` its match) of the full model alone, from its cached vectors."""
    write_embeddings(vectors[:n], work / "reference-embeddings", args.docs_per_file)
    meta = SemanticDeduplicationWorkflow(
        str(work / "reference-embeddings"), str(work / "reference" / "output"), str(work / "reference"),
        id_field=ID, n_clusters=clusters(n, args), eps=args.eps, which_to_keep=args.which_to_keep, runner=args.runner,
    ).run().metadata
    return pd.read_parquet(Path(meta["duplicate_pairs_path"]) / "duplicate_pairs.parquet")


def clusters(n: int, args: argparse.Namespace) -> int:
    return max(1, n // args.docs_per_cluster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=63905, help="documents N the cascade runs on (timed)")
    parser.add_argument("--recall-size", type=int, help="documents recall is measured on (default: N)")
    parser.add_argument("--screening-model", default=DEFAULT_MODEL, help="screening model name or folder")
    parser.add_argument("--screening-backend", default="sentence-transformers")
    parser.add_argument("--screening-runtime", default="torch")
    parser.add_argument("--runtime", default="torch",
                        help="the full model's embedding_runtime in the cascade (onnx: the same model on ONNX Runtime); "
                        "the full-model-only reference is always torch's")
    parser.add_argument("--screening-max-chars", type=int, default=64, help="0: whole texts")
    parser.add_argument("--screening-eps", type=float, help="default: the workflow's (2 x eps, at most 0.3)")
    parser.add_argument("--eps", type=float, default=0.01)
    parser.add_argument("--which-to-keep", default="hard",
                        help="ranking of both runs; random orders by a hash of the id, the same in both")
    parser.add_argument("--docs-per-cluster", type=int, default=100, help="k = N / this")
    parser.add_argument("--docs-per-file", type=int, default=1000, help="records per input file (= partition)")
    parser.add_argument("--runner", default="local", help="runner preset")
    parser.add_argument("--workdir", type=Path, help="where to put inputs and outputs (default: a temp folder)")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    machine = machine_description()
    recall_size = args.recall_size or args.size
    records = load_corpus(max(args.size, recall_size), args.data)
    reference = corpus_embeddings(recall_size, None, args.data)  # first: the cascade's timing should not share the CPU
    work = Path(tempfile.mkdtemp(prefix="bench-cascade-", dir=args.workdir))
    try:
        timed = run_cascade(args.size, records, work, args)
        sampled = timed if recall_size == args.size else run_cascade(recall_size, records, work, args)
        full_pairs = full_model_only(recall_size, reference.vectors, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    removed = sampled["removed"]
    found, full = set(removed["id"]), set(full_pairs["id"])
    # Which copy of a pair is kept follows each run's own clusters: a full-only pair counts as
    # resolved when the cascade removes either of its documents.
    resolved = float(np.mean([a in found or b in found for a, b in zip(full_pairs["id"], full_pairs["max_id"])]))
    unit = reference.vectors / np.linalg.norm(reference.vectors, axis=1, keepdims=True)
    cosines = np.einsum("ij,ij->i", unit[removed["id"].to_numpy()], unit[removed["max_id"].to_numpy()])
    justified = float((cosines >= 1 - args.eps - 1e-4).mean()) if len(cosines) else 1.0
    recall = len(found & full) / len(full) if full else 1.0
    precision = len(found & full) / len(found) if found else 1.0
    screening = (f"{args.screening_backend} {args.screening_model}"
                 + (f" on the first {args.screening_max_chars} characters" if args.screening_max_chars else "")
                 + (f", runtime {args.screening_runtime}" if args.screening_runtime != "torch" else ""))
    times = [f"{timed.get(p + '_time', 0):.1f}" for p in PHASES]
    body = (
        f"Verify cascade: screening model {screening}, screening_eps {args.screening_eps or f'{default_screening_eps(args.eps):g} (the default)'}; full model "
        f"{DEFAULT_MODEL} ({args.runtime}; the full-model-only reference: torch); eps {args.eps}, which_to_keep {args.which_to_keep}, k = N / {args.docs_per_cluster}, runner {args.runner}. "
        "Seconds per phase (wall; verification includes embedding the candidates with the full model):\n\n"
        + markdown_table(["N", *PHASES, "total", "candidate pairs", "candidates (full-model embedded)", "removed"],
                         [[f"{args.size:,}", *times, f"{timed['total_time']:.1f}", timed["num_candidate_pairs"],
                           timed["num_candidates"], timed["num_duplicates"]]])
        + f"\n\nAgainst the full model alone on the first {recall_size:,} documents ({reference.note}); "
        + "recall = the full-only run's removed documents the cascade removes too; pairs resolved = its pairs "
        "of which the cascade removes either document (the copy kept can differ, as each run ranks by its own "
        "clusters); confirmed = the cascade's removals whose pair the full model's cached vectors put at least "
        "1 - eps similar.\n\n"
        + markdown_table(["full-only removed", "cascade removed", "recall", "pairs resolved", "precision vs full-only",
                          "confirmed by the full model"],
                         [[len(full), len(found), f"{recall:.4f}", f"{resolved:.4f}", f"{precision:.4f}",
                           f"{justified:.4f}"]])
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
