"""Benchmark: the Beam embedding stage against its engine called directly.

For each engine, the same first N corpus documents are embedded three ways:
by the raw engine in a plain loop over fixed-size chunks
(``SentenceTransformer.encode`` / ``vllm.LLM.embed``), by the raw engine
given every text in one call (its best case: it sorts all of them by length,
or schedules them all at once), and by a DirectRunner pipeline
``Create | RunInference(handler) | Count`` whose BatchElements emits batches
of exactly the chunk size. sentence-transformers runs forward passes of
``ST_ENCODE_BATCH`` texts in all three, the handler's CPU default. Model loading is excluded from both: one
warm-up run of each comes first, and the pipeline reuses its loaded model
through a fixed RunInference ``model_identifier``. Repeats alternate raw and
pipeline so drifts in machine load hit both; medians are reported. The
pipeline time still includes building and running the Beam graph (about 1 s).
The last column compares CPU seconds (this process and vLLM's engine
processes, via psutil) instead of wall time: on a machine shared with other
jobs it shows the stage's own overhead when wall time is mostly noise.

    python bench/bench_embedding.py                  # both engines, CPU
    python bench/bench_embedding.py --engines sentence-transformers --n 5000
    python bench/bench_embedding.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import apache_beam as beam  # noqa: E402
from apache_beam.ml.inference.base import RunInference  # noqa: E402
from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, load_corpus, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.models import DEFAULT_MODEL, make_embedding_handler, resolve_model  # noqa: E402


@dataclass
class Result:
    """Median wall-clock and CPU seconds (this process and its engine children)."""

    engine: str
    docs: int
    batch: int
    raw_s: float
    pipeline_s: float
    raw_cpu_s: float
    pipeline_cpu_s: float
    one_call_s: float


ST_ENCODE_BATCH = 8


def raw_sentence_transformers(model_dir: str) -> Callable[[list[str]], object]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")
    return lambda chunk: model.encode(chunk, batch_size=ST_ENCODE_BATCH, convert_to_numpy=True)


def raw_vllm(model_dir: str) -> Callable[[list[str]], object]:
    import vllm

    llm = vllm.LLM(model=model_dir, runner="pooling", gpu_memory_utilization=0.05)
    tokenization = {"truncation": True, "max_length": llm.llm_engine.model_config.max_model_len}
    return lambda chunk: llm.embed(chunk, tokenization_kwargs=tokenization, use_tqdm=False)


RAW_ENGINES: dict[str, Callable[[str], Callable[[list[str]], object]]] = {
    "sentence-transformers": raw_sentence_transformers,
    "vllm": raw_vllm,
}


def cpu_seconds() -> float:
    """CPU time of this process and its live children.

    vLLM embeds in child processes, which ``common.interleaved_timings``
    (``time.process_time``) does not see, hence this psutil sum. On a shared
    machine it shows overhead that wall time, swayed by other jobs, can hide
    or invent."""
    import psutil

    processes = [psutil.Process()]
    processes += processes[0].children(recursive=True)
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """Wall and CPU seconds of ``run()``."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    run()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def run_raw(embed: Callable[[list[str]], object], texts: list[str], batch: int) -> None:
    for first in range(0, len(texts), batch):
        embed(texts[first : first + batch])


def run_pipeline(engine: str, texts: list[str], batch: int, model_tag: str, **handler_options: object) -> None:
    handler = make_embedding_handler(engine, min_batch_size=batch, max_batch_size=batch, **handler_options)
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        counts = (
            pipeline
            | beam.Create(texts)
            | RunInference(handler, model_identifier=model_tag)
            | beam.combiners.Count.Globally()
        )
        assert_that(counts, equal_to([len(texts)]))


def measure(engine: str, texts: list[str], batch: int, repeats: int) -> Result:
    embed = RAW_ENGINES[engine](resolve_model(DEFAULT_MODEL))
    model_tag = f"bench-{engine}-{uuid.uuid4().hex}"
    embed(texts[:batch])  # warm-up; the pipeline's warm-up run below loads its model
    run_pipeline(engine, texts[:batch], batch, model_tag)
    raw, piped, one_call = [], [], []
    for _ in range(repeats):
        raw.append(timed(lambda: run_raw(embed, texts, batch)))
        piped.append(timed(lambda: run_pipeline(engine, texts, batch, model_tag)))
        one_call.append(timed(lambda: embed(texts)))
    (raw_s, raw_cpu), (pipe_s, pipe_cpu), (one_s, _) = (
        tuple(statistics.median(column) for column in zip(*runs)) for runs in (raw, piped, one_call)
    )
    return Result(engine, len(texts), batch, raw_s, pipe_s, raw_cpu, pipe_cpu, one_s)


def table(results: list[Result]) -> str:
    headers = [
        "engine", "docs", "batch", "raw engine (docs/s)", "raw, one call (docs/s)", "Beam RunInference (docs/s)",
        "pipeline / raw", "pipeline / raw one call", "pipeline / raw, per CPU-second",
    ]
    rows = [
        [
            r.engine, r.docs, r.batch, f"{r.docs / r.raw_s:.1f}", f"{r.docs / r.one_call_s:.1f}",
            f"{r.docs / r.pipeline_s:.1f}", f"{r.raw_s / r.pipeline_s:.2f}", f"{r.one_call_s / r.pipeline_s:.2f}",
            f"{r.raw_cpu_s / r.pipeline_cpu_s:.2f}",
        ]
        for r in results
    ]
    return markdown_table(headers, rows)


def engine_versions() -> str:
    versions = [f"apache-beam {beam.__version__}"]
    for package in ("sentence_transformers", "vllm"):
        try:
            versions.append(f"{package} {__import__(package).__version__}")
        except ImportError:
            pass
    return ", ".join(versions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", choices=sorted(RAW_ENGINES), default=sorted(RAW_ENGINES))
    parser.add_argument("--n", type=int, default=2000, help="documents for sentence-transformers")
    parser.add_argument("--n-vllm", type=int, default=500, help="documents for vLLM (slower on CPU)")
    parser.add_argument("--batch", type=int, default=64, help="batch size for both raw and pipeline")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each; medians are reported")
    parser.add_argument("--data", type=Path, help="path to debian-package-descriptions.jsonl.gz")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    machine = machine_description()
    results = []
    for engine in args.engines:
        n = args.n_vllm if engine == "vllm" else args.n
        texts = [record["text"] for record in load_corpus(n, args.data)]
        results.append(measure(engine, texts, args.batch, args.repeats))
        print(table(results[-1:]), flush=True)

    body = (
        f"Embedding stage ({DEFAULT_MODEL}, first N corpus documents, CPU): Beam RunInference "
        f"on the DirectRunner vs the raw engine, same batches, median of {args.repeats} "
        f"({engine_versions()}).\n\n{table(results)}\n"
    )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
