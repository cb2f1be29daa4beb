"""What the bench scripts share: the machine they ran on, side-by-side timing,
markdown tables, ``--append BENCHMARKS.md``, and the real corpus (texts and
cached embeddings).

Benchmarks here run on small shared machines whose load changes by the
second, so a single timing means little. :func:`interleaved_medians` runs the
contenders in alternating order and keeps medians; the *ratios* of figures
measured side by side in one run are what the tables are meant to be read for.

Only numpy and torch are imported at module level, so the GPU check (which
may assume nothing else) can use this module too.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from beam_curator.cores import usable_cores

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "debian-package-descriptions.jsonl.gz"
EMBEDDING_CACHE = Path(os.environ.get("BEAM_CURATOR_BENCH_CACHE", "/tmp/beam_curator_bench"))
_CACHE_STEP = 5000
T = TypeVar("T")


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine_description() -> str:
    """CPU model, cores, torch threads, GPU (if any), versions and the load
    average when the run started (high load means noisy absolute figures)."""
    parts = [
        f"{cpu_model()}, {usable_cores()} cores usable of {os.cpu_count()}",
        f"torch {torch.__version__} with {torch.get_num_threads()} threads",
    ]
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        parts.append(f"GPU {props.name} ({props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda})")
    else:
        parts.append("no GPU")
    parts.append(f"numpy {np.__version__}, Python {platform.python_version()}")
    if hasattr(os, "getloadavg"):
        parts.append("load average {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg()))
    return ", ".join(parts)


def child_result(command: list[str], what: str, **run: object) -> dict:
    """Run a measuring child process; its last ``RESULT <json>`` line of stdout,
    or exit naming ``what`` failed, with the end of its stderr (see ``error_tail``)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **run) as child:
        try:
            stdout, stderr = child.communicate()
        except BaseException:  # this bench stopped (unwind_on_sigterm, Ctrl-C): the child stops what it started
            child.terminate()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if child.returncode or not lines:
        raise SystemExit(f"{what} failed (exit {child.returncode}):\n{error_tail(stderr)}")
    return json.loads(lines[-1][len("RESULT "):])


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind the bench as an error would, running its ``finally`` blocks and exit stacks: the
    clusters and worker pools a bench starts run in sessions of their own (``beam_curator.runners.services``),
    so a bench killed outright left them running, and their scratch folders (a Spark cluster's, gigabytes
    of shuffle files and job-server jars) on the disk. A measuring child that starts services of its own
    (Beam's job server) sets the same handler, and ``child_result`` passes it the signal."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def error_tail(stderr: str, chars: int = 4000) -> str:
    """The end of a child's stderr without Java stack frames: a cluster's error relayed by Beam ends in
    hundreds of them, which pushed the error's own lines out of the end (a Spark run at 10M said only
    where it failed, not what)."""
    kept = [line for line in stderr.splitlines() if not re.match(r"\s+(at |\.\.\. \d+ more)", line)]
    return "\n".join(kept)[-chars:]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    """A GitHub markdown table; ``align`` has one ``l`` or ``r`` per column
    (default: first column left, the rest right). Floats print as given by
    the caller, so format them before passing."""
    align = align or "l" + "r" * (len(headers) - 1)
    if len(align) != len(headers) or any(len(row) != len(headers) for row in rows):
        raise ValueError("every row and the alignment need one entry per header")
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def add_append_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--append", type=Path, metavar="FILE",
        help="also append the report, headed by the script name, date and machine, to FILE (e.g. BENCHMARKS.md)",
    )


def publish(script: str, body: str, append: Path | None, machine: str | None = None) -> str:
    """Print the report and, with ``append``, add it to that markdown file.

    ``machine`` is taken at the start of the run by the caller when possible,
    so the load average it shows is the one the measurements met.
    """
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")
    report = f"### {Path(script).name} ({stamp})\n\nMachine: {machine or machine_description()}.\n\n{body.strip()}\n"
    print("\n" + report, flush=True)
    if append is not None:
        with append.open("a", encoding="utf-8") as out:
            out.write("\n" + report)
        print(f"appended to {append}", file=sys.stderr)
    return report


@dataclass(frozen=True)
class Timing:
    """Median seconds of one contender: wall clock, and CPU time of the whole
    process and of the child processes that ended meanwhile (so a contender
    that runs a command is timed whole). With one thread the CPU time leaves
    out the time the process sat waiting for a core, so on a loaded machine
    it is the steadier measure."""

    wall: float
    cpu: float


def interleaved_medians(
    contenders: dict[str, Callable[[], object]], repeats: int, warmup: bool = True
) -> dict[str, float]:
    """Median wall seconds of each callable; see :func:`interleaved_timings`."""
    return {name: timing.wall for name, timing in interleaved_timings(contenders, repeats, warmup).items()}


def interleaved_timings(
    contenders: dict[str, Callable[[], object]], repeats: int, warmup: bool = True
) -> dict[str, Timing]:
    """Median timings of each callable, run in rotating order.

    Each round starts with a different contender, so a burst of load from
    another process hits all of them alike instead of one.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    names = list(contenders)
    if warmup:
        for name in names:
            contenders[name]()
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            timing = timed(contenders[name])[1]
            cpu[name].append(timing.cpu)
            wall[name].append(timing.wall)
    return {name: Timing(statistics.median(wall[name]), statistics.median(cpu[name])) for name in names}


def timed(call: Callable[[], T]) -> tuple[T, Timing]:
    """What one call returns, and its wall and CPU seconds (children that ended included)."""
    start, start_cpu = time.perf_counter(), _cpu_seconds()
    value = call()
    cpu = _cpu_seconds() - start_cpu
    return value, Timing(time.perf_counter() - start, cpu)


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def corpus_path(given: Path | None = None) -> Path:
    path = given or CORPUS
    if not path.is_file():
        raise SystemExit(
            f"corpus not found at {path}; pass --data PATH to debian-package-descriptions.jsonl.gz "
            "(see ../shared/data/README.md beside the repository)"
        )
    return path


def load_corpus(n: int, path: Path | None = None) -> list[dict]:
    """The first ``n`` records (``package``, ``text``) of the corpus, in file order."""
    source = corpus_path(path)
    records: list[dict] = []
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if len(records) == n:
                break
            record = json.loads(line)
            if not isinstance(record.get("text"), str):
                raise SystemExit(f"{source}: line {number} has no string field 'text'")
            records.append(record)
    if len(records) < n:
        raise SystemExit(f"{source} holds only {len(records)} documents, fewer than the {n} asked for")
    return records


@dataclass
class CorpusEmbeddings:
    vectors: np.ndarray
    note: str  # how they were obtained, for the report
    docs_per_second: float  # embedding throughput when they were computed


def corpus_embeddings(n: int, max_chars: int | None = None, path: Path | None = None) -> CorpusEmbeddings:
    """float32 embeddings (all-MiniLM-L6-v2, sentence-transformers on the CPU)
    of the first ``n`` corpus documents.

    Embedding is by far the slowest step on a CPU, so the vectors are cached
    as ``.npy`` under ``$BEAM_CURATOR_BENCH_CACHE`` (default
    ``/tmp/beam_curator_bench``), with the throughput measured when they were
    computed beside them. A cached prefix serves any smaller n; a larger n
    embeds only the documents after the longest cached prefix, saving a new
    prefix every ``_CACHE_STEP`` documents so an interrupted run loses little.
    """
    source = corpus_path(path)
    EMBEDDING_CACHE.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(f"{source.resolve()}|{source.stat().st_size}|{max_chars}".encode()).hexdigest()[:12]
    cached = sorted((int(p.stem.rsplit("-", 1)[1]), p) for p in EMBEDDING_CACHE.glob(f"minilm-{tag}-*.npy"))
    for count, file in cached:
        if count >= n:
            rate = json.loads(file.with_suffix(".json").read_text())["docs_per_second"]
            vectors = np.load(file, mmap_mode="r")[:n].copy()
            return CorpusEmbeddings(vectors, f"cached in {file}, computed at {rate:.1f} docs/s", rate)
    from beam_curator.models import DEFAULT_MODEL, resolve_model
    from beam_curator.models.sentence_transformers import SentenceTransformerEmbedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parts = [np.load(cached[-1][1])] if cached else []
    had = sum(len(p) for p in parts)
    texts = [r["text"] if max_chars is None else r["text"][:max_chars] for r in load_corpus(n, source)]
    embedder = SentenceTransformerEmbedder(resolve_model(DEFAULT_MODEL), "cpu")
    start, file = time.perf_counter(), None
    for step in range(had, n, _CACHE_STEP):
        todo = texts[step : min(step + _CACHE_STEP, n)]
        parts.append(np.concatenate([embedder.embed(todo[i : i + 64]) for i in range(0, len(todo), 64)]))
        rate = (step + len(todo) - had) / (time.perf_counter() - start)
        previous, file = file, _save_prefix(np.concatenate(parts).astype(np.float32), tag, rate, max_chars)
        if previous is not None:  # superseded by the longer prefix just saved
            previous.unlink()
            previous.with_suffix(".json").unlink()
    note = (f"{n - had} embedded now at {rate:.1f} docs/s (sentence-transformers, batches of 64)"
            f"{f' after {had} cached' if had else ''}, cached in {file}")
    return CorpusEmbeddings(np.concatenate(parts).astype(np.float32), note, rate)


def _save_prefix(vectors: np.ndarray, tag: str, rate: float, max_chars: int | None) -> Path:
    file = EMBEDDING_CACHE / f"minilm-{tag}-{len(vectors)}.npy"
    partial = file.with_suffix(f".{os.getpid()}.tmp")
    with partial.open("wb") as out:
        np.save(out, vectors)
    meta = {"docs": len(vectors), "docs_per_second": rate, "max_chars": max_chars}
    file.with_suffix(".json").write_text(json.dumps(meta))
    partial.replace(file)  # atomic, and after the sidecar: a reader never sees half a cache entry
    return file
