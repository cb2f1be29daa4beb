"""The ``beam-curator`` command: resumable text curation on Apache Beam.

Every option is checked: a misspelt one is an error that names the closest
valid options, never silently ignored. Raw Apache Beam flags go after ``--``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable

import fsspec

from beam_curator import interrupts
from beam_curator.errors import CuratorError
from beam_curator.logs import configure_logging

_EXAMPLES = """\
examples:
  beam-curator semdedup --input data/ --output results/ --cache cache/ --id-field doc_id --eps 0.01
  beam-curator semdedup --input data/ --output results/ --cache cache/      # no --eps: eps table only
  beam-curator semdedup ... --runner flink --flink-master host:8081 -- --parallelism=64
  beam-curator exact --input data/ --output results/ --id-field doc_id
  beam-curator fuzzy --input data/ --output results/ --id-field doc_id
  beam-curator checkpoint status cache/checkpoints/embedding
  beam-curator checkpoint shards ckpt/ --count 4 --input data/   # a job array's progress; exit 1 until complete

Interrupt any run (Ctrl+C) and rerun the same command: finished work is skipped.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text already says
    what happens when it is unset) and keeps the examples' layout."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.required or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            return text
        if action.nargs == 0:  # a flag
            return f"{text} (default: off)"
        return f"{text} (default: {'unset' if action.default is None else '%(default)s'})"


def _package_version() -> str:
    try:
        return version("beam-curator")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from beam_curator import __version__

        return __version__


def _add_logging_flags(parser: argparse.ArgumentParser, top_level: bool) -> None:
    # SUPPRESS keeps a subcommand's unset flag from overwriting the same flag given before it.
    default = False if top_level else argparse.SUPPRESS
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="warnings and errors only: no progress bars, no summary logs")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="also log Apache Beam, its workers and the model libraries at INFO")


def _add_data_flags(parser: argparse.ArgumentParser, output: str, cache: str, text_use: str) -> None:
    """The logging flags and the data flags every deduplication command has."""
    _add_logging_flags(parser, top_level=False)
    data = parser.add_argument_group("data")
    data.add_argument("--input", required=True, help="folder, glob or file of the input data")
    data.add_argument("--output", required=True, help=output)
    data.add_argument("--cache", help=cache)
    data.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"], help="format of the input files")
    data.add_argument("--text-field", default="text", help=f"the field holding the text {text_use}")
    data.add_argument("--id-field", help="your unique id field (default: generate ids into _curator_dedup_id)")
    data.add_argument("--on-bad-record", default="raise", choices=["raise", "skip"],
                      help="a malformed record or one missing a field: stop naming it, or skip and count it")
    data.add_argument("--files-per-partition", type=int, default=1, help="input files per checkpointed partition")
    data.add_argument("--wait", action="store_true",
                      help="if another run uses --output or --cache, start when it ends instead of refusing")


def _add_runner_flags(parser: argparse.ArgumentParser) -> None:
    from beam_curator.runners import RUNNERS

    group = parser.add_argument_group("runner (raw Apache Beam flags go after --)")
    group.add_argument("--runner", default="local", choices=RUNNERS, help="where the pipelines run")
    group.add_argument("--num-workers", type=int,
                       help="threads running bundles (local; default 1), worker processes (local-multiprocess, "
                       "a Dask LocalCluster; default one per CPU) or SDK workers per node")
    group.add_argument("--job-endpoint", help="host:port of a portable/Flink/Spark job service (default: embedded)")
    group.add_argument("--environment-type", choices=["LOOPBACK", "EXTERNAL", "PROCESS", "DOCKER"],
                       help="where the SDK workers run (default: LOOPBACK for local masters)")
    group.add_argument("--environment-config", help="host:port of an EXTERNAL worker pool, a PROCESS boot command, an image")
    group.add_argument("--flink-master", help="Flink REST address host:port (default: [local])")
    group.add_argument("--flink-version", help="Flink version of the job server")
    group.add_argument("--flink-job-server-jar", help="local Flink job-server jar (sites without internet)")
    group.add_argument("--spark-master-url", help="Spark master URL (default: local[*])")
    group.add_argument("--spark-job-server-jar", help="local Spark job-server jar (sites without internet)")
    group.add_argument("--dask-address", help="Dask scheduler tcp://host:8786 (default: a LocalCluster for the run)")
    group.add_argument("--completion", default="fused", choices=["fused", "stateful"],
                       help="how partitions are marked: in the sink's step (fused, marks as partitions finish on "
                            "every runner) or by a keyed stateful step (stateful: for Flink --streaming; see the README)")
    group.add_argument("--worker-start-timeout", type=float, default=60.0,
                       help="EXTERNAL/PROCESS environments: seconds from the job running to the first SDK worker before failing")


_RUNNER_KEYS = (
    "num_workers", "job_endpoint", "environment_type", "environment_config", "flink_master",
    "flink_version", "flink_job_server_jar", "spark_master_url", "spark_job_server_jar", "dask_address",
)


def _runner_settings(args: argparse.Namespace, beam_args: list[str]) -> dict:
    settings = {key: getattr(args, key) for key in _RUNNER_KEYS if getattr(args, key) is not None}
    return {"runner": args.runner, "beam_args": beam_args, "worker_start_timeout": args.worker_start_timeout,
            "completion": args.completion, **settings}


def _checkpoint(args: argparse.Namespace, _: list[str]) -> int:
    shard_flags = {"--count": args.count, "--input": args.input, "--fingerprint": args.fingerprint}
    if args.action == "shards":
        needed = {"--count": "how many shards the runs were split into", "--input": "the input they read"}
        missing = [f"{flag} ({what})" for flag, what in needed.items() if shard_flags[flag] is None]
        if missing:
            args.parser.error(f"checkpoint shards needs {' and '.join(missing)}")
    elif any(value is not None for value in shard_flags.values()):
        given = [flag for flag, value in shard_flags.items() if value is not None]
        args.parser.error(f"{', '.join(given)}: only for checkpoint shards, not checkpoint {args.action}")
    fs, path = fsspec.core.url_to_fs(args.path)
    if not fs.exists(path):
        print(f"error: checkpoint {args.path} does not exist; pass the checkpoint_path a run used", file=sys.stderr)
        return 2
    if args.action == "shards":
        return _shards(args)
    from beam_curator.checkpoint import CheckpointBusyError, open_store

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


def _shards(args: argparse.Namespace) -> int:
    """Print each shard's progress and the shards to resubmit; 0 once all are
    complete, 1 while any is not, so that a job script can loop on it."""
    from beam_curator.checkpoint import shard_manifest
    from beam_curator.stages.io import JsonlReader, ParquetReader

    reader_class = JsonlReader if args.input_filetype == "jsonl" else ParquetReader
    try:
        reader = reader_class(args.input, files_per_partition=args.files_per_partition, fingerprint=args.fingerprint)
        manifest = shard_manifest(args.path, reader, args.count)
    except ValueError as error:  # bad count, or input matching no files (CuratorInputError)
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(manifest)
    return 0 if manifest.complete else 1


def _semdedup(args: argparse.Namespace, beam_args: list[str]) -> int:
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
        embedding_batch_size=args.embedding_batch_size, kmeans_max_sample_bytes=args.kmeans_max_sample_bytes,
        model_cache_dir=args.model_cache_dir, files_per_partition=args.files_per_partition,
        n_clusters=args.n_clusters, kmeans_max_iter=args.kmeans_max_iter, kmeans_tol=args.kmeans_tol,
        eps=args.eps, which_to_keep=args.which_to_keep, distance_metric=args.distance_metric,
        pairwise_batch_size=args.pairwise_batch_size, cross_cluster=args.cross_cluster,
        cross_cluster_margin=args.cross_cluster_margin, recall_sample=args.recall_sample,
        perform_removal=not args.no_removal and args.eps is not None, seed=args.seed, wait=args.wait,
        **_runner_settings(args, beam_args),
    )
    print(semdedup_summary(workflow.run().metadata, args.eps))
    return 0


_PHASES = ("embedding", "kmeans", "pairwise", "recall", "identification", "removal")


def semdedup_summary(metadata: dict[str, Any], eps: float | None) -> str:
    """What a user asks after a run: how many documents went in, how many are
    duplicates, how many were removed and kept, where time went, where the
    results are. Without eps: the eps table, to choose one."""
    lines, row = _summary_start("semantic deduplication summary", metadata)
    if eps is None:
        row("duplicates", "not identified (no --eps); choose eps from the table below")
    else:
        row("duplicates", f"{metadata.get('num_duplicates')} at eps {eps}")
        removed = metadata.get("num_duplicates_removed")
        row("removed", removed if metadata.get("final_output_path") else "nothing (--no-removal)")
        if metadata.get("final_output_path"):
            row("kept", metadata.get("num_documents_kept"))
    row("time (s)", _times(metadata, _PHASES))
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


def _summary_start(title: str, metadata: dict[str, Any]) -> tuple[list[str], Callable[[str, object], None]]:
    """A summary's first rows (what this run did, documents in) and the function adding the next."""
    lines = ["", title]

    def row(name: str, value: object) -> None:
        lines.append(f"  {name:<16} {value}")

    if "phases_run" in metadata:
        row("this run", f"ran {', '.join(metadata['phases_run'])}" if metadata["phases_run"] else
            "nothing to do: every phase was complete with its outputs in place (the results below are from then)")
    row("documents in", metadata.get("num_documents", "?"))
    return lines, row


def _times(metadata: dict[str, Any], phases: tuple[str, ...]) -> str:
    times = [f"{phase} {metadata[f'{phase}_time']:.1f}" for phase in phases if metadata.get(f"{phase}_time")]
    return ", ".join([*times, f"total {metadata.get('total_time', 0.0):.1f}"])


def _exact(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import ExactDeduplicationWorkflow

    workflow = ExactDeduplicationWorkflow(
        output_path=args.output, input_path=args.input, cache_path=args.cache, input_filetype=args.input_filetype,
        text_field=args.text_field, assign_id=args.id_field is None, id_field=args.id_field,
        on_bad_record=args.on_bad_record, files_per_partition=args.files_per_partition,
        perform_removal=not args.no_removal, wait=args.wait, **_runner_settings(args, beam_args),
    )
    print(exact_summary(workflow.run().metadata))
    return 0


def exact_summary(metadata: dict[str, Any]) -> str:
    """Documents in, exact duplicates found, removed and kept, time per phase, where the results are."""
    return _duplicates_summary("exact deduplication summary", metadata, "every copy but the first of each text",
                               ("hashing", "identification", "removal"))


def _duplicates_summary(title: str, metadata: dict[str, Any], rule: str, phases: tuple[str, ...]) -> str:
    """Documents in, duplicates found (by ``rule``), removed and kept, time per phase, where the results are."""
    lines, row = _summary_start(title, metadata)
    row("duplicates", f"{metadata.get('num_duplicates')} ({rule})")
    row("removed", metadata.get("num_duplicates_removed") if metadata.get("final_output_path") else "nothing (--no-removal)")
    if metadata.get("final_output_path"):
        row("kept", metadata.get("num_documents_kept"))
    row("time (s)", _times(metadata, phases))
    if metadata.get("final_output_path"):
        row("clean data", metadata["final_output_path"])
    row("duplicate ids", metadata.get("duplicates_path"))
    if metadata.get("id_generator_path"):
        row("id generator", metadata["id_generator_path"])
    return "\n".join(lines)


def _add_exact(commands: argparse._SubParsersAction) -> None:
    exact = commands.add_parser(
        "exact", formatter_class=_Formatter, epilog=_EXAMPLES,
        help="exact deduplication (md5 of each text) of JSONL or parquet text files",
        description=textwrap.fill(
            "Hash every document's text (md5, as NeMo Curator), list every copy but the first of each text in "
            "ExactDuplicateIds/, and write the input without them to deduplicated/. Every phase is checkpointed: "
            "interrupt the run and rerun the same command to resume; a changed input file is hashed again alone.", 80),
    )
    _add_data_flags(exact, "where ExactDuplicateIds/, exact_id_generator.json and deduplicated/ go",
                    "where digests and checkpoints go (default: under --output)", "to compare")
    exact.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    _add_runner_flags(exact)
    exact.set_defaults(handler=_exact)


def _fuzzy(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.workflows import FuzzyDeduplicationWorkflow
    from beam_curator.workflows.fuzzy.workflow import PHASES

    workflow = FuzzyDeduplicationWorkflow(
        cache_path=args.cache or args.output, output_path=args.output, input_path=args.input,
        input_filetype=args.input_filetype, input_blocksize=None, text_field=args.text_field, id_field=args.id_field,
        on_bad_record=args.on_bad_record, files_per_partition=args.files_per_partition,
        perform_removal=not args.no_removal, seed=args.seed, char_ngrams=args.char_ngrams, num_bands=args.num_bands,
        minhashes_per_band=args.minhashes_per_band, use_64_bit_hash=args.use_64_bit_hash,
        bands_per_iteration=args.bands_per_iteration, lsh_num_output_partitions=args.lsh_num_output_partitions,
        in_memory_components_bytes=args.in_memory_components_bytes, wait=args.wait, **_runner_settings(args, beam_args),
    )
    metadata = workflow.run().metadata
    print(_duplicates_summary("fuzzy deduplication summary", metadata,
                              "all documents of each group of near-copies but the least id", PHASES))
    return 0


def _add_fuzzy(commands: argparse._SubParsersAction) -> None:
    fuzzy = commands.add_parser(
        "fuzzy", formatter_class=_Formatter, epilog=_EXAMPLES,
        help="fuzzy deduplication (MinHash LSH, as NeMo Curator) of JSONL or parquet text files",
        description=textwrap.fill(
            "MinHash every document's character n-grams, bucket the signatures by LSH bands, join documents "
            "sharing a bucket into groups (connected components), list all of each group but one in "
            "FuzzyDuplicateIds/, and write the input without them to deduplicated/. Every phase is checkpointed: "
            "interrupt the run and rerun the same command to resume.", 80),
    )
    _add_data_flags(fuzzy, "where FuzzyDuplicateIds/, fuzzy_id_generator.json and deduplicated/ go",
                    "where signatures, buckets, edges, components and checkpoints go (default: --output)",
                    "to compare")
    lsh = fuzzy.add_argument_group("minhash and LSH (NeMo Curator's defaults)")
    lsh.add_argument("--char-ngrams", type=int, default=24, help="characters per n-gram")
    lsh.add_argument("--num-bands", type=int, default=20, help="LSH bands")
    lsh.add_argument("--minhashes-per-band", type=int, default=13, help="minhashes per band")
    lsh.add_argument("--seed", type=int, default=42, help="seed of the hash permutations")
    lsh.add_argument("--use-64-bit-hash", action="store_true", help="64-bit MurmurHash3 and minhashes")
    lsh.add_argument("--bands-per-iteration", type=int, default=5, help="bands bucketed per LSH pass")
    lsh.add_argument("--lsh-num-output-partitions", type=int,
                     help="LSH partitions per pass (default: enough for a bounded task)")
    fuzzy.add_argument("--in-memory-components-bytes", type=int,
                       help="memory connected components may take in this process (default: half of what is "
                            "available); a graph measured to need more goes by star rounds on the runner, 0: always")
    fuzzy.add_argument("--no-removal", action="store_true", help="identify duplicates but do not write the clean data")
    _add_runner_flags(fuzzy)
    fuzzy.set_defaults(handler=_fuzzy)


def _eps_table_text(csv_url: str) -> str:
    import pandas as pd

    with fsspec.open(csv_url, "r") as handle:
        table = pd.read_csv(handle)
    table["share"] = (100 * table["share"]).map("{:.2f}%".format)
    return table.to_string(index=False, formatters={"eps": "{:g}".format, "threshold": "{:g}".format})


def _add_semdedup(commands: argparse._SubParsersAction) -> None:
    from beam_curator.models import RUNTIMES

    sem = commands.add_parser(
        "semdedup", formatter_class=_Formatter, epilog=_EXAMPLES,
        help="semantic deduplication (SemDeDup) of JSONL or parquet text files",
        description=textwrap.fill(
            "Embed every document, cluster the embeddings with k-means, score each document against the "
            "earlier-ranked members of its cluster, and remove those at least 1 - eps similar to one. Every "
            "phase is checkpointed: interrupt the run and rerun the same command to resume.", 80),
    )
    _add_data_flags(sem, "where duplicates/, deduplicated/ and analysis/ go",
                    "where embeddings, clusters, scores and checkpoints go (default: under --output)", "to embed")
    model = sem.add_argument_group("embedding")
    model.add_argument("--model-identifier", default="sentence-transformers/all-MiniLM-L6-v2",
                       help="model name or local folder (the default is bundled)")
    model.add_argument("--model-cache-dir", help="extra folder to find the model in (never downloaded)")
    model.add_argument("--embedding-backend", default="auto", choices=["auto", "vllm", "sentence-transformers"],
                       help="auto: vLLM on a CUDA GPU, sentence-transformers otherwise")
    model.add_argument("--embedding-runtime", default="torch", choices=list(RUNTIMES),
                       help="what runs the model on a CPU: torch, or its ONNX export on ONNX Runtime or "
                            "OpenVINO, which are faster (see the README)")
    model.add_argument("--embedding-max-chars", type=int, help="cut texts to this many characters before tokenising")
    model.add_argument("--embedding-batch-size", type=int, help="most texts per model call (default: Beam's adaptive batching)")
    model.add_argument("--embedding-max-tokens", type=int, help="vLLM: tokens kept per text (default: the model's length)")
    model.add_argument("--embedding-pretokenize", action="store_true", help="vLLM: tokenise in the workers, hand the engine token ids")
    model.add_argument("--embedding-vllm-init-kwargs", help="vLLM: JSON object of extra vllm.LLM arguments")
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
    _add_runner_flags(sem)
    sem.set_defaults(handler=_semdedup)


def _add_checkpoint(commands: argparse._SubParsersAction) -> None:
    checkpoint = commands.add_parser(
        "checkpoint", formatter_class=_Formatter, help="inspect or reset a checkpoint folder",
        description=textwrap.fill(
            "Show which partitions a checkpoint folder records as complete, or forget them all; for job arrays "
            "whose readers ran with shard=(index, count), show each shard's progress and which shards to submit "
            "again (exit status 1 while any is incomplete, 0 once all are complete).", 80),
    )
    _add_logging_flags(checkpoint, top_level=False)
    checkpoint.add_argument("action", choices=["status", "reset", "shards"],
                            help="status: what is recorded; reset: forget it; shards: progress per shard")
    checkpoint.add_argument("path", help="the checkpoint_path the pipeline ran with")
    checkpoint.add_argument("--force", action="store_true", help="reset even if a writer seems alive")
    shards = checkpoint.add_argument_group("shards (the input as the sharded runs read it)")
    shards.add_argument("--count", type=int, help="how many shards the runs were split into")
    shards.add_argument("--input", help="folder, glob or file of the input data")
    shards.add_argument("--input-filetype", default="jsonl", choices=["jsonl", "parquet"], help="format of the input files")
    shards.add_argument("--files-per-partition", type=int, default=1, help="input files per checkpointed partition")
    shards.add_argument("--fingerprint", choices=["stat", "content"],
                        help="the readers' fingerprint, which is part of each partition's checkpoint key")
    checkpoint.set_defaults(handler=_checkpoint, parser=checkpoint)


def _add_job_server(commands: argparse._SubParsersAction) -> None:
    server = commands.add_parser(
        "job-server", formatter_class=_Formatter, help="build (once) and print the path of Beam's Flink or Spark job server jar",
        description=textwrap.fill(
            "Print the jar that runner=flink / runner=spark start their job server from: the one named in "
            "BEAM_CURATOR_FLINK_JOB_SERVER_JAR / BEAM_CURATOR_SPARK_JOB_SERVER_JAR, else one built with Maven from "
            "Beam's runner artifact on first use and cached. Copy it to machines without Maven and name it there "
            "in that variable.", 80),
    )
    _add_logging_flags(server, top_level=False)
    server.add_argument("engine", choices=["flink", "spark"], help="which runner's job server")
    server.set_defaults(handler=_job_server)


def _job_server(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.runners.job_server import JOB_SERVERS, JobServerError, job_server_jar

    try:
        jar = job_server_jar(args.engine)
    except JobServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    build = JOB_SERVERS[args.engine]
    print(jar)
    print(f"Beam {build.beam_version} job server for {args.engine.capitalize()} {build.engine_version}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="beam-curator", description="Resumable text curation on Apache Beam: semantic deduplication "
        "(NeMo Curator's SemDeDup), exact and fuzzy deduplication and checkpoint tools.",
        epilog=_EXAMPLES, formatter_class=_Formatter, allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_package_version()}")
    _add_logging_flags(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_semdedup(commands)
    _add_exact(commands)
    _add_fuzzy(commands)
    _add_checkpoint(commands)
    _add_job_server(commands)
    for sub in commands.choices.values():
        sub.allow_abbrev = False  # a prefix of one option must not silently mean it
    return parser


def _reject_unknown(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> None:
    """Exit with the closest valid option names for each unknown one."""
    sub = parser._subparsers._group_actions[0].choices[command]
    valid = [option for action in sub._actions for option in action.option_strings if option.startswith("--")]
    valid = [option for option in valid if option not in ("--help", "--version")]
    problems = []
    options = [arg for arg in unknown if arg.startswith("-")] or unknown  # a misspelt option's value follows it
    for arg in options:
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        problems.append(f"{arg}{hint}")
    sub.error(
        f"unrecognized arguments: {'; '.join(problems)}. Raw Apache Beam flags go after --, "
        f"for example: beam-curator {command} ... -- --parallelism=64"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, beam_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    configure_logging()  # before Beam is imported, so that its import-time notes are filtered
    parser = build_parser()
    args, unknown = parser.parse_known_args(ours)
    if unknown:
        _reject_unknown(parser, args.command, unknown)
    configure_logging(quiet=args.quiet, verbose=args.verbose)
    handler: Callable[[argparse.Namespace, list[str]], int] = args.handler
    try:
        return handler(args, beam_args)
    except CuratorError as error:  # the message says what to do; no traceback
        if args.verbose:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:  # one line, 130, and no native abort from threads left running
        print(interrupts.message(error), file=sys.stderr)
        interrupts.exit_now(interrupts.INTERRUPTED_EXIT)
        raise  # not reached


def command() -> None:
    """The ``beam-curator`` executable: :func:`main`, then leave without finalising the
    interpreter beside native threads (see :mod:`beam_curator.interrupts`)."""
    interrupts.exit_now(main())


if __name__ == "__main__":
    command()
