"""The ``beam-curator`` command.

Unknown ``--flags`` pass straight through to Beam, so any runner option
works: ``beam-curator semdedup ... --runner flink --flink-master host:8081
--parallelism 64``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import fsspec

from beam_curator.checkpoint import CheckpointBusyError, open_store
from beam_curator.runners import RUNNERS


def _add_runner_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("runner (other --flags go to Beam unchanged)")
    group.add_argument("--runner", default="local", help=f"one of {', '.join(RUNNERS)} (default local)")
    group.add_argument("--num-workers", type=int, help="worker processes (local-multiprocess, dask LocalCluster) or SDK workers per runner worker")
    group.add_argument("--job-endpoint", help="portable/flink/spark job service host:port (default: embedded)")
    group.add_argument("--environment-type", help="LOOPBACK, EXTERNAL, PROCESS or DOCKER")
    group.add_argument("--environment-config", help="e.g. host:port of an EXTERNAL worker pool")
    group.add_argument("--flink-master", help="Flink REST address host:port ([local] by default)")
    group.add_argument("--flink-version", help="Flink version of the job server")
    group.add_argument("--flink-job-server-jar", help="local Flink job-server jar (sites without internet)")
    group.add_argument("--spark-master-url", help="Spark master URL (local[*] by default)")
    group.add_argument("--spark-job-server-jar", help="local Spark job-server jar")
    group.add_argument("--dask-address", help="Dask scheduler tcp://host:8786 (default: a LocalCluster for the run)")


_RUNNER_KEYS = (
    "num_workers", "job_endpoint", "environment_type", "environment_config", "flink_master",
    "flink_version", "flink_job_server_jar", "spark_master_url", "spark_job_server_jar", "dask_address",
)


def _runner_settings(args: argparse.Namespace, beam_args: list[str]) -> dict:
    settings = {key: getattr(args, key) for key in _RUNNER_KEYS if getattr(args, key) is not None}
    return {"runner": args.runner, "beam_args": beam_args, **settings}


def _checkpoint(args: argparse.Namespace, _: list[str]) -> int:
    fs, path = fsspec.core.url_to_fs(args.path)
    if not fs.exists(path):
        print(f"error: checkpoint {args.path} does not exist; pass the checkpoint_path a run used", file=sys.stderr)
        return 2
    store = open_store(args.path)
    if args.action == "status":
        status = store.status()
        print(f"checkpoint {status.path}")
        print(f"  completed partitions: {status.completed}")
        print(f"  writer files: {len(status.writer_files)}")
        for file in status.writer_files:
            print(f"    {file}")
        print(f"  unreadable files: {len(status.unreadable_files)}")
        for file in status.unreadable_files:
            print(f"    {file}")
        if status.live_writers:
            print(f"  live writers: {', '.join(status.live_writers)}")
        return 0
    try:
        store.reset(force=args.force)
    except CheckpointBusyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"checkpoint {args.path} reset")
    return 0


def _semdedup(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import TextSemanticDeduplicationWorkflow

    workflow = TextSemanticDeduplicationWorkflow(
        input_path=args.input, output_path=args.output, cache_path=args.cache,
        input_filetype=args.input_filetype, text_field=args.text_field, id_field=args.id_field,
        model_identifier=args.model_identifier, embedding_backend=args.embedding_backend,
        embedding_pretokenize=args.embedding_pretokenize,
        embedding_vllm_init_kwargs=json.loads(args.embedding_vllm_init_kwargs) if args.embedding_vllm_init_kwargs else None,
        embedding_max_chars=args.embedding_max_chars, embedding_max_tokens=args.embedding_max_tokens,
        embedding_batch_size=args.embedding_batch_size, kmeans_max_sample_bytes=args.kmeans_max_sample_bytes,
        model_cache_dir=args.model_cache_dir, files_per_partition=args.files_per_partition,
        n_clusters=args.n_clusters, kmeans_max_iter=args.kmeans_max_iter, kmeans_tol=args.kmeans_tol,
        eps=args.eps, which_to_keep=args.which_to_keep, distance_metric=args.distance_metric,
        pairwise_batch_size=args.pairwise_batch_size, cross_cluster=args.cross_cluster,
        cross_cluster_margin=args.cross_cluster_margin, recall_sample=args.recall_sample,
        perform_removal=not args.no_removal, seed=args.seed, **_runner_settings(args, beam_args),
    )
    result = workflow.run()
    print("\nsemantic deduplication summary")
    for key, value in result.metadata.items():
        shown = f"{value:.2f}" if isinstance(value, float) else value
        print(f"  {key:<28} {shown}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beam-curator", description=__doc__.split("\n\n")[0])
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    commands = parser.add_subparsers(dest="command", required=True)

    checkpoint = commands.add_parser("checkpoint", help="inspect or reset a checkpoint folder")
    checkpoint.add_argument("action", choices=["status", "reset"])
    checkpoint.add_argument("path", help="the checkpoint_path the pipeline ran with")
    checkpoint.add_argument("--force", action="store_true", help="reset even if a writer seems alive")
    checkpoint.set_defaults(handler=_checkpoint)

    sem = commands.add_parser("semdedup", help="semantic deduplication (SemDeDup) of text files")
    sem.add_argument("--input", required=True, help="folder, glob or file of the input data")
    sem.add_argument("--output", required=True, help="where duplicates/ and deduplicated/ go")
    sem.add_argument("--cache", required=True, help="where embeddings, clusters and scores go")
    sem.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"])
    sem.add_argument("--text-field", default="text")
    sem.add_argument("--id-field", help="your unique id column (default: generate _curator_dedup_id)")
    sem.add_argument("--model-identifier", default="sentence-transformers/all-MiniLM-L6-v2")
    sem.add_argument("--embedding-backend", default="auto", choices=["auto", "vllm", "sentence-transformers"])
    sem.add_argument("--embedding-pretokenize", action="store_true")
    sem.add_argument("--embedding-vllm-init-kwargs", help="JSON object passed to vllm.LLM")
    sem.add_argument("--embedding-max-chars", type=int)
    sem.add_argument("--embedding-max-tokens", type=int, help="vLLM: tokens kept per text (default: the model's length)")
    sem.add_argument("--embedding-batch-size", type=int)
    sem.add_argument("--model-cache-dir")
    sem.add_argument("--files-per-partition", type=int, default=1)
    sem.add_argument("--n-clusters", type=int, default=100)
    sem.add_argument("--kmeans-max-iter", type=int, default=300)
    sem.add_argument("--kmeans-tol", type=float, default=1e-4)
    sem.add_argument("--kmeans-max-sample-bytes", type=int, default=2 << 30,
                     help="k-means is fitted on a sample of at most this many bytes of vectors")
    sem.add_argument("--eps", type=float, help="duplicate when similarity >= 1 - eps; unset: write the analysis only")
    sem.add_argument("--which-to-keep", default="hard", choices=["hard", "easy", "random"])
    sem.add_argument("--distance-metric", default="cosine", choices=["cosine", "l2"])
    sem.add_argument("--pairwise-batch-size", type=int, default=1024)
    sem.add_argument("--cross-cluster", action="store_true", help="also compare across each document's nearest other cluster")
    sem.add_argument("--cross-cluster-margin", type=float, help="only documents this close to the boundary visit")
    sem.add_argument("--recall-sample", type=int, help="measure recall against brute force on this many documents")
    sem.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    sem.add_argument("--seed", type=int, default=42)
    _add_runner_flags(sem)
    sem.set_defaults(handler=_semdedup)
    return parser


def main(argv: list[str] | None = None) -> int:
    args, beam_args = build_parser().parse_known_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,  # importing Beam may already have configured the root logger
    )
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    return args.handler(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
