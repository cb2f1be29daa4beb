"""``beam-curator semdedup``: semantic deduplication (SemDeDup) of text files."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

import fsspec

from beam_curator.cli.flags import EXAMPLES, HelpFormatter, add_data_flags, add_runner_flags, runner_settings
from beam_curator.cli.summary import phase_times, summary_start

_PHASES = ("embedding", "kmeans", "pairwise", "verification", "recall", "identification", "removal")


def add_semdedup(commands: argparse._SubParsersAction) -> None:
    from beam_curator.models import BACKENDS, RUNTIMES

    sem = commands.add_parser(
        "semdedup", formatter_class=HelpFormatter, epilog=EXAMPLES,
        help="semantic deduplication (SemDeDup) of JSONL or parquet text files",
        description=textwrap.fill(
            "Embed every document, cluster the embeddings with k-means, score each document against the "
            "earlier-ranked members of its cluster, and remove those at least 1 - eps similar to one. Every "
            "phase is checkpointed: interrupt the run and rerun the same command to resume.", 80),
    )
    add_data_flags(sem, "where duplicates/, deduplicated/ and analysis/ go",
                   "where embeddings, clusters, scores and checkpoints go (default: under --output)", "to embed")
    model = sem.add_argument_group("embedding")
    model.add_argument("--model-identifier", default="sentence-transformers/all-MiniLM-L6-v2",
                       help="model name or local folder (the default is bundled); with --embedding-backend static, "
                            "a static model folder (beam-curator distill) or a model distilled on first use")
    model.add_argument("--model-cache-dir", help="extra folder to find the model in (never downloaded)")
    model.add_argument("--embedding-backend", default="auto", choices=list(BACKENDS),
                       help="auto: vLLM on a CUDA GPU, sentence-transformers otherwise; static: a model2vec static "
                            "model, hundreds of times faster on a CPU, at a lower recall (see docs/dedup/semantic.md)")
    model.add_argument("--embedding-runtime", default="torch", choices=list(RUNTIMES),
                       help="what runs the model on a CPU: torch, or its ONNX export on ONNX Runtime or "
                            "OpenVINO, which are faster (see docs/dedup/semantic.md, Faster embedding on CPUs)")
    model.add_argument("--embedding-max-chars", type=int, help="cut texts to this many characters before tokenising")
    model.add_argument("--embedding-batch-size", type=int, help="most texts per model call (default: Beam's adaptive batching)")
    model.add_argument("--embedding-max-tokens", type=int, help="vLLM: tokens kept per text (default: the model's length)")
    model.add_argument("--embedding-pretokenize", action="store_true", help="vLLM: tokenise in the workers, hand the engine token ids")
    model.add_argument("--embedding-vllm-init-kwargs", help="vLLM: JSON object of extra vllm.LLM arguments")
    cascade = sem.add_argument_group(
        "verify cascade (a cheap screening model clusters and proposes pairs; the model above judges them)")
    cascade.add_argument("--screening-model-identifier",
                         help="model name or local folder of the screening model (default: --model-identifier's); "
                              "this or --screening-backend turns the cascade on")
    cascade.add_argument("--screening-backend", default="auto", choices=list(BACKENDS),
                         help="as --embedding-backend, for the screening model; static: the model distilled into a static "
                              "one, the fastest on a CPU")
    cascade.add_argument("--screening-runtime", default="torch", choices=list(RUNTIMES),
                         help="as --embedding-runtime, for the screening model")
    cascade.add_argument("--screening-max-chars", type=int, help="cut texts to this many characters for the screening model")
    cascade.add_argument("--screening-eps", type=float,
                         help="pairs at least 1 - screening-eps similar by the screening model are judged by the full "
                              "model (default: 2 x eps, at most 0.3)")
    clusters = sem.add_argument_group("clustering and scoring")
    clusters.add_argument("--n-clusters", type=int, default=100, help="k-means clusters")
    clusters.add_argument("--kmeans-max-iter", type=int, default=300, help="k-means iterations at most")
    clusters.add_argument("--kmeans-tol", type=float, default=1e-4, help="k-means stops when centroids move less")
    clusters.add_argument("--kmeans-max-sample-bytes", type=int, default=2 << 30,
                          help="k-means is fitted on a sample of at most this many bytes of vectors")
    clusters.add_argument("--eps", type=float,
                          help="a document is a duplicate when its similarity is >= 1 - eps; unset: print and "
                               "write the eps table and histogram only, to choose eps")
    clusters.add_argument("--which-to-keep", default="hard", choices=["hard", "easy", "random"],
                          help="which duplicate is kept: hard = farthest from its centroid, easy = nearest")
    clusters.add_argument("--distance-metric", default="cosine", choices=["cosine", "l2"],
                          help="distance to the centroid that ranks cluster members")
    clusters.add_argument("--pairwise-batch-size", type=int, default=1024, help="rows per block when scoring large clusters")
    clusters.add_argument("--cross-cluster", action="store_true",
                          help="also compare each document with its second-nearest cluster")
    clusters.add_argument("--cross-cluster-margin", type=float,
                          help="with --cross-cluster: only documents this close to the boundary (default: all)")
    clusters.add_argument("--recall-sample", type=int, help="measure recall against brute force on this many documents")
    clusters.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    clusters.add_argument("--seed", type=int, default=42, help="seed of k-means and of which_to_keep=random")
    add_runner_flags(sem)
    sem.set_defaults(handler=run_semdedup, parser=sem)


def run_semdedup(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import TextSemanticDeduplicationWorkflow

    workflow = TextSemanticDeduplicationWorkflow(
        input_path=args.input, output_path=args.output, cache_path=args.cache,
        input_filetype=args.input_filetype, output_filetype=args.input_filetype, text_field=args.text_field,
        id_field=args.id_field, on_bad_record=args.on_bad_record,
        model_identifier=args.model_identifier, embedding_backend=args.embedding_backend,
        embedding_runtime=args.embedding_runtime,
        embedding_pretokenize=args.embedding_pretokenize,
        embedding_vllm_init_kwargs=json.loads(args.embedding_vllm_init_kwargs) if args.embedding_vllm_init_kwargs else None,
        embedding_max_chars=args.embedding_max_chars, embedding_max_tokens=args.embedding_max_tokens,
        embedding_batch_size=args.embedding_batch_size, screening_model_identifier=args.screening_model_identifier,
        screening_backend=args.screening_backend, screening_runtime=args.screening_runtime,
        screening_max_chars=args.screening_max_chars, screening_eps=args.screening_eps,
        kmeans_max_sample_bytes=args.kmeans_max_sample_bytes,
        model_cache_dir=args.model_cache_dir, files_per_partition=args.files_per_partition,
        n_clusters=args.n_clusters, kmeans_max_iter=args.kmeans_max_iter, kmeans_tol=args.kmeans_tol,
        eps=args.eps, which_to_keep=args.which_to_keep, distance_metric=args.distance_metric,
        pairwise_batch_size=args.pairwise_batch_size, cross_cluster=args.cross_cluster,
        cross_cluster_margin=args.cross_cluster_margin, recall_sample=args.recall_sample,
        perform_removal=not args.no_removal and args.eps is not None, seed=args.seed, wait=args.wait,
        **runner_settings(args, beam_args),
    )
    print(semdedup_summary(workflow.run().metadata, args.eps))
    return 0


def semdedup_summary(metadata: dict[str, Any], eps: float | None) -> str:
    """What a user asks after a run: how many documents went in, how many are
    duplicates, how many were removed and kept, where time went, where the
    results are. Without eps: the eps table, to choose one."""
    lines, row = summary_start("semantic deduplication summary", metadata)
    if eps is None:
        row("duplicates", "not identified (no --eps); choose eps from the table below")
    else:
        row("duplicates", f"{metadata.get('num_duplicates')} at eps {eps}")
        if "num_candidates" in metadata:
            row("verify cascade", f"{metadata['num_candidate_pairs']} candidate pairs; {metadata['num_candidates']} "
                                  "documents in them embedded with the full model, which judged every pair")
        removed = metadata.get("num_duplicates_removed")
        row("removed", removed if metadata.get("final_output_path") else "nothing (--no-removal)")
        if metadata.get("final_output_path"):
            row("kept", metadata.get("num_documents_kept"))
    row("time (s)", phase_times(metadata, _PHASES))
    if metadata.get("final_output_path"):
        row("clean data", metadata["final_output_path"])
    if metadata.get("duplicates_path"):
        row("duplicate ids", f"{metadata['duplicates_path']}/duplicates.parquet")
    if metadata.get("recall_path"):
        row("recall report", f"{metadata['recall_path']}/recall_report.json")
    if eps is None and metadata.get("analysis_path"):
        analysis = metadata["analysis_path"]
        lines += ["", f"documents removed per eps ({analysis}/eps_table.csv, plot: {analysis}/similarity.png)"]
        lines += [f"  {line}" for line in _eps_table_text(f"{analysis}/eps_table.csv").splitlines()]
    return "\n".join(lines)


def _eps_table_text(csv_url: str) -> str:
    import pandas as pd

    with fsspec.open(csv_url, "r") as handle:
        table = pd.read_csv(handle)
    table["share"] = (100 * table["share"]).map("{:.2f}%".format)
    return table.to_string(index=False, formatters={"eps": "{:g}".format, "threshold": "{:g}".format})
