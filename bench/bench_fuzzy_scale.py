"""Benchmark: the fuzzy workflow at scale, on synthetic documents with planted
near-copies: time and peak memory per phase, and recall per similarity.

Data: ``--documents`` synthetic texts (one or more sizes, each run on its own)
written as parquet files of ``--docs-per-file`` rows (column ``text``, as
NeMo Curator's default input), under a fresh folder in ``/tmp`` that is
deleted after each size. Texts are words of a random 20,000-word vocabulary
drawn with Zipf frequencies, a few hundred characters long (lognormal, median
about 450, clipped to 100–3,000). ``--planted`` of them are near-copies of
another document of the same or the previous file, split evenly over the
``--levels`` of Jaccard similarity of their 24-character shingles: a copy is
its source with single-character substitutions placed so that each changes
``d`` shingles of the ``n`` (24 for one inside the text, fewer near its end),
``d = n (1 - J) / (1 + J)``, so that the pair's Jaccard is about J. Every
pair's exact Jaccard is computed from the shingle sets, and each source has
one copy and is no copy itself: a pair is a component of its own unless
random texts join it, so its chance of being found is the LSH S-curve's
``1 - (1 - s^13)^20`` at its exact similarity.

The workflow runs as a user gets it: ``FuzzyDeduplicationWorkflow`` with
every default (NeMo's: 24-character n-grams, 20 bands of 13, 5 bands per
iteration, generated ids; the local runner with one thread), in a fresh
process per size. Per phase (the workflow's own ``book.timed`` blocks,
observed by wrapping ``PhaseBook.timed`` in that process): wall seconds,
CPU seconds (the process, all its threads, and children that ended), the
resident set when the phase started and its peak during the phase. The peak
is the kernel's high-water mark of the process (``VmHWM``, reset through
``/proc/self/clear_refs`` at every phase boundary, so it misses nothing),
and a thread sampling the process and any children every 50 ms (the local
runner starts none; other runners would). At each boundary, before the reset,
freed memory is handed back to the system (``gc``, Arrow's pool,
``malloc_trim``) so that a phase's peak is its own rather than what the
allocator kept from the one before; the run's overall peak is reported too.

Recall: a planted pair is found when both documents end in the same group
of ``ConnectedComponentsStage``; per similarity level, the share found
against the mean of the S-curve over that level's pairs. Documents grouped
that are in no planted pair (false groupings of random texts) are counted.

With ``--lsh-bound``, one LSH task is also run alone at the most records the
workflow gives a task (``RECORDS_PER_PARTITION``), on random signatures,
which no corpus size here reaches exactly; with ``--components-edges E``,
the in-memory connected components alone on E random edges (the phase's
memory at edge counts no corpus here reaches); ``--bounds-only`` skips the
corpus runs.

    python bench/bench_fuzzy_scale.py                                  # 50,000 and 200,000 documents
    python bench/bench_fuzzy_scale.py --documents 100000 1000000 2000000 --lsh-bound --append BENCHMARKS.md
    python bench/bench_fuzzy_scale.py --bounds-only --components-edges 20000000 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# common (which imports torch) is imported by the parent only: the measured process loads what a user's does.

WIDTH, BANDS, ROWS = 24, 20, 13  # NeMo Curator's defaults, which the workflow runs at
PHASES = ("minhash", "lsh", "edges", "connected_components", "identification")
OUTSIDE = "outside phases"
VOCABULARY = 20_000
SAMPLE_SECONDS = 0.05


# --- the corpus ------------------------------------------------------------------------------------------


def vocabulary(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Random lowercase words (2 to 10 letters), their Zipf cumulative
    frequencies and the mean characters per drawn word with its space."""
    lengths = rng.integers(2, 11, VOCABULARY)
    letters = rng.integers(97, 123, lengths.sum()).astype(np.uint8).tobytes().decode()
    ends = np.cumsum(lengths)
    words = np.array([letters[end - length:end] for end, length in zip(ends, lengths)], dtype=object)
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    weights /= weights.sum()
    return words, np.cumsum(weights), float(weights @ lengths) + 1


def random_texts(count: int, words: np.ndarray, cumulative: np.ndarray, per_word: float,
                 rng: np.random.Generator) -> list[str]:
    """``count`` texts of Zipf-drawn words, about 450 characters at the median."""
    chars = np.clip(rng.lognormal(np.log(450), 0.5, count), 100, 3000)
    counts = np.maximum(1, (chars / per_word).astype(np.int64))
    drawn = words[np.minimum(np.searchsorted(cumulative, rng.random(counts.sum())), VOCABULARY - 1)]
    ends = np.cumsum(counts)
    return [" ".join(drawn[end - n:end]) for end, n in zip(ends.tolist(), counts.tolist())]


def shingle_set(text: str) -> set[str]:
    return {text[i:i + WIDTH] for i in range(max(len(text) - WIDTH + 1, 1))}


def jaccard(a: str, b: str) -> float:
    x, y = shingle_set(a), shingle_set(b)
    return len(x & y) / len(x | y)


def near_copy(text: str, similarity: float, rng: np.random.Generator) -> str | None:
    """``text`` with substitutions that change about ``n (1 - J) / (1 + J)`` of
    its ``n`` shingles (None if it is too short to place them apart)."""
    n = len(text) - WIDTH + 1
    if n < 2 * WIDTH:
        return None
    changed = max(1, round(n * (1 - similarity) / (1 + similarity)))
    inside, tail = divmod(changed, WIDTH)
    chars = list(text)
    end = len(text) - tail if tail else len(text)  # a substitution at len - t changes the last t shingles
    # Inside ones at p in [WIDTH - 1, end - WIDTH] change the WIDTH shingles starting at p - 23 .. p;
    # WIDTH apart, none shares a shingle with another or with the tail one.
    room = (end - WIDTH) - (WIDTH - 1) + 1 - (WIDTH - 1) * max(inside - 1, 0)
    if inside and room < inside:
        return None
    offsets = np.sort(rng.choice(room, inside, replace=False)) if inside else []
    places = [WIDTH - 1 + int(offset) + (WIDTH - 1) * i for i, offset in enumerate(offsets)]
    if tail:
        places.append(len(text) - tail)
    for place in places:
        old = chars[place]
        chars[place] = chr(97 + (ord(old) - 97 + int(rng.integers(1, 26))) % 26) if old.isalpha() else "q"
    return "".join(chars)


def generate(folder: Path, documents: int, per_file: int, planted: float, levels: list[float], seed: int) -> dict:
    """Parquet files of ``documents`` texts, and the planted pairs as
    ``(source file, source row, copy file, copy row, level index, exact Jaccard)``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    words, cumulative, per_word = vocabulary(rng)
    folder.mkdir(parents=True)
    pairs: list[tuple[int, int, int, int, int, float]] = []
    previous: list[tuple[int, int, str]] = []  # (file, row, text) of the previous file's unused originals
    characters = 0
    for number, low in enumerate(range(0, documents, per_file)):
        rows = min(per_file, documents - low)
        copies = int(round(rows * planted))
        copies -= copies % len(levels)
        order = rng.permutation(rows)  # row of the i-th text made (originals first, then copies)
        originals = random_texts(rows - copies, words, cumulative, per_word, rng)
        texts: list[str | None] = [None] * rows
        for i, text in enumerate(originals):
            texts[order[i]] = text
        pool = previous + [(number, int(order[i]), text) for i, text in enumerate(originals)]
        chosen = rng.permutation(len(pool))
        made, at = rows - copies, 0
        for level in np.repeat(np.arange(len(levels)), copies // len(levels)):
            while True:  # the next unused original long enough for this level
                source_file, source_row, source = pool[chosen[at]]
                at += 1
                copy = near_copy(source, levels[level], rng)
                if copy is not None:
                    break
            row = int(order[made])
            made += 1
            texts[row] = copy
            pairs.append((source_file, source_row, number, row, int(level), jaccard(source, copy)))
        used = {int(i) for i in chosen[:at]}
        previous = [entry for i, entry in enumerate(pool) if i not in used and entry[0] == number]
        characters += sum(map(len, texts))
        pq.write_table(pa.table({"text": texts}), folder / f"part-{number:05d}.parquet")
    table = np.array(pairs, dtype=float).reshape(-1, 6)
    return {"pairs": table, "files": len(range(0, documents, per_file)), "mean_chars": characters / documents}


# --- measuring one run, in its own process --------------------------------------------------------------


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def high_water_bytes() -> int:
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read()).group(1)) * 1024


class PhaseMemory:
    """Wall, CPU, starting and peak resident set of each phase (and of the time outside them)."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.figures: dict[str, dict] = {}
        self.segment = OUTSIDE
        self.sampled = 0  # peak of the process tree sampled during the current segment
        self.segment_number = 0
        self.lock = threading.Lock()
        self.resets = self._clear_refs()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.started = time.monotonic()
        self._begin(OUTSIDE)
        self.thread.start()

    @staticmethod
    def _clear_refs() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # reset VmHWM to the current resident set
            return True
        except OSError:
            return False

    def _tree_rss(self) -> int:
        total = rss_bytes()
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except Exception:  # gone meanwhile
                pass
        return total

    def _sample(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            segment = self.segment_number
            rss = self._tree_rss()
            with self.lock:
                if segment == self.segment_number:  # not a sample of the segment before a boundary
                    self.sampled = max(self.sampled, rss)

    @staticmethod
    def _hand_back() -> None:
        import pyarrow as pa

        gc.collect()
        pa.default_memory_pool().release_unused()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass

    def _begin(self, name: str) -> None:
        self._hand_back()
        start = rss_bytes()
        if self.resets:
            self._clear_refs()
        with self.lock:
            self.segment, self.sampled = name, self._tree_rss()
            self.segment_number += 1
        self.mark = (name, time.monotonic(), _cpu_seconds(), start)

    def _end(self) -> None:
        name, wall, cpu, start = self.mark
        with self.lock:
            peak = max(self.sampled, self._tree_rss(), high_water_bytes() if self.resets else 0)
        figure = self.figures.setdefault(name, {"wall": 0.0, "cpu": 0.0, "start_rss": start, "peak_rss": 0})
        figure["wall"] += time.monotonic() - wall
        figure["cpu"] += _cpu_seconds() - cpu
        figure["peak_rss"] = max(figure["peak_rss"], peak)

    @contextmanager
    def phase(self, name: str):
        self._end()
        self._begin(name)
        try:
            yield
        finally:
            self._end()
            self._begin(OUTSIDE)

    def close(self) -> dict[str, dict]:
        self._end()
        self.stop.set()
        self.thread.join()
        return self.figures


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def child(args: argparse.Namespace) -> int:
    """Run the workflow on ``args.input`` with every default; print the figures as JSON."""
    from beam_curator.workflows import FuzzyDeduplicationWorkflow
    from beam_curator.workflows.fuzzy import workflow as fuzzy_workflow
    from beam_curator.workflows.phases import PhaseBook

    memory = PhaseMemory()
    timed = PhaseBook.timed

    @contextmanager
    def observed(book: PhaseBook, name: str):
        with memory.phase(name), timed(book, name):
            yield

    PhaseBook.timed = observed
    started, cpu = time.monotonic(), _cpu_seconds()
    flow = FuzzyDeduplicationWorkflow(cache_path=args.cache, output_path=args.output, input_path=args.input)
    result = flow.run()
    wall, cpu = time.monotonic() - started, _cpu_seconds() - cpu
    phases = memory.close()
    lsh = flow.book.details("lsh")
    partitions = flow.partitions or max(1, -(-result.get_metadata("num_documents") * flow.bands_per_iteration
                                            // fuzzy_workflow.RECORDS_PER_PARTITION))
    figures = {
        "wall": wall, "cpu": cpu, "phases": phases, "resets": memory.resets,
        "documents": result.get_metadata("num_documents"), "duplicates": result.get_metadata("num_duplicates"),
        "buckets": lsh.get("results", {}).get("buckets"),
        "edges": flow.book.details("edges").get("results", {}).get("edges"),
        "lsh_tasks": partitions * -(-flow.num_bands // flow.bands_per_iteration), "lsh_partitions": partitions,
        "records_per_task": -(-result.get_metadata("num_documents") * flow.bands_per_iteration // partitions),
        "star_rounds": sum(name.startswith("star-round-") for name in flow.book.ran),
    }
    print("RESULT " + json.dumps(figures), flush=True)
    return 0


def lsh_task_child(folder: str) -> int:
    """The LSH phase's two steps as the workflow runs them, with one partition
    per band range: the signature files in ``folder`` into band keys (one task
    per group of files, run one after another), then the first band range's
    LSH task over them; print the figures as JSON."""
    import pyarrow.parquet as pq

    from beam_curator.workflows.fuzzy.stages import BandKeysStage, LSHBucketsStage, file_groups
    from beam_curator.workflows.fuzzy.workflow import BAND_KEY_RECORDS
    from beam_curator.workflows.semantic.id_check import IdBucketTask
    from beam_curator.workflows.semantic.ids import GENERATED_ID

    files = sorted(str(path) for path in Path(folder).glob("*.parquet"))
    groups = file_groups(files, [pq.ParquetFile(url).metadata.num_rows for url in files], BAND_KEY_RECORDS // 5)
    ranges = [range(first, first + 5) for first in range(0, BANDS, 5)]
    memory = PhaseMemory()
    band_keys = BandKeysStage(groups, GENERATED_ID, ranges, ROWS, 1, f"{folder}/band_keys")
    with memory.phase("band keys tasks"):
        for number in range(len(groups)):
            band_keys.process(IdBucketTask(dataset_name="id_buckets", data=number))
    stage = LSHBucketsStage(f"{folder}/band_keys", GENERATED_ID, ranges, 1)
    with memory.phase("lsh task"):
        buckets = stage.process(IdBucketTask(dataset_name="id_buckets", data=0)).to_pyarrow().num_rows
    figures = memory.close()
    print("RESULT " + json.dumps({**figures["lsh task"], "buckets": buckets,
                                  "band_keys_peak_rss": figures["band keys tasks"]["peak_rss"]}), flush=True)
    return 0


def components_child(edges: int, seed: int) -> int:
    """The in-memory connected components (``component_groups``, all the
    ``connected_components`` phase does within its measured memory bound besides reading
    the edge files) on ``edges`` random edges between generated-style int64
    ids, about as many ids as edges; print its figures as JSON."""
    import pyarrow as pa

    from beam_curator.dedup.fuzzy.lsh import component_groups

    rng = np.random.default_rng(seed)
    ids = rng.choice(1 << 40, int(edges * 1.2), replace=False).astype(np.int64)
    x, y = (pa.array(ids[rng.integers(0, len(ids), edges)]) for _ in range(2))
    del ids
    memory = PhaseMemory()
    with memory.phase("components"):
        vertices, _ = component_groups(x, y)
    print("RESULT " + json.dumps({**memory.close()["components"], "vertices": len(vertices)}), flush=True)
    return 0


def lsh_bound(args: argparse.Namespace) -> dict:
    """One LSH task holding RECORDS_PER_PARTITION records, the most the
    workflow gives one: random signatures (a tenth of the documents copying
    another's, so that some buckets are shared) of RECORDS_PER_PARTITION / 5
    documents, written as the minhash phase writes them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from beam_curator.workflows.fuzzy.stages import MINHASH_FIELD
    from beam_curator.workflows.fuzzy.workflow import RECORDS_PER_PARTITION
    from beam_curator.workflows.semantic.ids import GENERATED_ID

    documents = RECORDS_PER_PARTITION // 5
    scratch = Path(tempfile.mkdtemp(prefix="bench_fuzzy_scale_lsh_", dir="/tmp"))
    try:
        rng = np.random.default_rng(args.seed)
        for number, low in enumerate(range(0, documents, args.docs_per_file)):
            rows = min(args.docs_per_file, documents - low)
            values = rng.integers(0, 2**32, (rows, BANDS * ROWS), dtype=np.uint32)
            values[: rows // 10] = values[rows // 10: 2 * (rows // 10)]
            offsets = pa.array(np.arange(0, values.size + 1, values.shape[1], dtype=np.int32))
            pq.write_table(pa.table({
                GENERATED_ID: pa.array((number << 32) + np.arange(rows, dtype=np.int64)),
                MINHASH_FIELD: pa.ListArray.from_arrays(offsets, pa.array(values.ravel())),
            }), scratch / f"part-{number:05d}.parquet", row_group_size=1 << 16)
        figures = run_child(["--lsh-task", str(scratch)], "one LSH task")
        return {**figures, "documents": documents, "records": documents * 5}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --- the parent: generate, run, check, report ------------------------------------------------------------


def run_child(arguments: list[str], what: str) -> dict:
    from common import child_result

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return child_result([sys.executable, __file__, "--child", *arguments], what, env=env)


def detection_probability(similarity: np.ndarray) -> np.ndarray:
    return 1.0 - (1.0 - np.asarray(similarity, float) ** ROWS) ** BANDS


def recall(cache: Path, pairs: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Per planted pair whether both ended in one group; documents grouped
    outside the planted pairs; the groups found."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from beam_curator.workflows.fuzzy.stages import GROUP_FIELD
    from beam_curator.workflows.semantic.ids import GENERATED_ID, FileRegistry

    numbers = {Path(path).name: number for path, number in FileRegistry(str(cache)).load().items()}
    file_number = np.array([numbers[f"part-{i:05d}.parquet"] for i in range(len(numbers))], np.int64)
    ids = [(file_number[pairs[:, column].astype(np.int64)] << 32) | pairs[:, column + 1].astype(np.int64)
           for column in (0, 2)]
    table = pq.read_table(cache / "ConnectedComponentsStage", columns=[GENERATED_ID, GROUP_FIELD])
    grouped, groups = table.column(GENERATED_ID).combine_chunks(), table.column(GROUP_FIELD).combine_chunks()
    group_of = groups.to_numpy()
    found = []
    for side in ids:
        where = pc.fill_null(pc.index_in(side, grouped), -1).to_numpy()
        found.append(np.where(where >= 0, group_of[np.maximum(where, 0)], -1))
    together = (found[0] >= 0) & (found[0] == found[1])
    outside = len(np.setdiff1d(grouped.to_numpy(), np.concatenate(ids)))
    return together, outside, len(pc.unique(groups))


def measure(documents: int, args: argparse.Namespace) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix=f"bench_fuzzy_scale_{documents}_", dir="/tmp"))
    try:
        started = time.monotonic()
        data = generate(scratch / "input", documents, args.docs_per_file, args.planted, args.levels, args.seed)
        generated = time.monotonic() - started
        size = sum(path.stat().st_size for path in (scratch / "input").iterdir())
        print(f"{documents:,} documents generated in {generated:.0f} s ({size / 2**20:.0f} MiB); running the workflow",
              file=sys.stderr, flush=True)
        figures = run_child(["--input", str(scratch / "input"), "--cache", str(scratch / "cache"),
                             "--output", str(scratch / "output")], f"the run on {documents:,} documents")
        disk = {name: sum(p.stat().st_size for p in (scratch / "cache" / name).rglob("*") if p.is_file())
                for name in ("MinHashStage", "LSHStage", "BucketsToEdgesStage")}
        together, outside, groups = recall(scratch / "cache", data["pairs"])
        figures.update(generated=generated, input_bytes=size, files=data["files"], mean_chars=data["mean_chars"],
                       pairs=data["pairs"].tolist(), together=together.tolist(), outside=outside, groups=groups,
                       cache_bytes=disk)
        return figures
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def gb(value: float) -> str:
    return f"{value / 1e9:.2f}"


def report(results: dict[int, dict], args: argparse.Namespace) -> str:
    from common import markdown_table

    sizes = list(results)
    rows = []
    for phase in (*PHASES, OUTSIDE, "whole run"):
        for n in sizes:
            found = results[n]
            if phase == "whole run":
                peak = max(figure["peak_rss"] for figure in found["phases"].values())
                rows.append([f"**{phase}**", f"{n:,}", f"{found['wall']:.1f}", f"{found['cpu']:.1f}",
                             f"{n / found['cpu']:,.0f}", "–", f"**{gb(peak)}**"])
                continue
            figure = found["phases"].get(phase)
            if figure is not None:
                rows.append([phase, f"{n:,}", f"{figure['wall']:.1f}", f"{figure['cpu']:.1f}",
                             f"{n / figure['cpu']:,.0f}" if figure["cpu"] > 0.05 else "–",
                             gb(figure["start_rss"]), gb(figure["peak_rss"])])
    headers = ["phase", "documents", "wall s", "CPU s", "documents / CPU s", "RSS at start GB", "peak RSS GB"]

    first = results[sizes[0]]
    body = (
        f"`FuzzyDeduplicationWorkflow` at every default (NeMo's: {WIDTH}-character n-grams, {BANDS} bands of "
        f"{ROWS}, 5 bands per iteration, generated ids; local runner, one thread), each size in a fresh process, "
        f"on synthetic parquet files of {args.docs_per_file:,} documents (random Zipf-drawn words, mean "
        f"{first['mean_chars']:.0f} characters) of which {args.planted:.0%} are planted near-copies, split evenly "
        f"over Jaccard {', '.join(str(level) for level in args.levels)} of their {WIDTH}-character shingles. "
        "CPU: the process's threads and its children. RSS at start: after freed memory is handed back "
        "(gc, Arrow's pool, malloc_trim); peak: the kernel's high-water mark of the process, reset at each phase "
        "boundary, and the process tree sampled every 50 ms. 'Outside phases': input checks, listing, "
        "start-up and the run's end.\n\n"
        + markdown_table(headers, rows)
        + "\n\n"
    )
    shape = []
    for n in sizes:
        found = results[n]
        shape.append([f"{n:,}", f"{found['files']:,}", f"{found['input_bytes'] / 2**20:,.0f}",
                      f"{found['cache_bytes']['MinHashStage'] / 2**20:,.0f}", f"{found['lsh_tasks']} "
                      f"({found['lsh_partitions']} per band range)",
                      f"{found['records_per_task']:,}", f"{found['buckets']:,}", f"{found['edges']:,}",
                      f"{found['groups']:,}", f"{found['duplicates']:,}", f"{found['outside']:,}",
                      f"{found['generated']:.0f}"])
    body += markdown_table(
        ["documents", "input files", "input MiB", "signatures MiB", "LSH tasks", "(key, id) records per LSH task",
         "buckets of 2+", "edges", "groups", "duplicates listed", "grouped outside planted pairs",
         "generation s (not counted)"], shape) + "\n\n"
    recall_rows = []
    for index, level in enumerate(args.levels):
        for n in sizes:
            pairs = np.array(results[n]["pairs"])
            together = np.array(results[n]["together"], bool)
            mine = pairs[:, 4] == index
            similarity = pairs[mine, 5]
            recall_rows.append([f"{level}", f"{n:,}", f"{mine.sum():,}", f"{similarity.mean():.3f}",
                                f"{similarity.min():.3f}–{similarity.max():.3f}", f"{together[mine].mean():.4f}",
                                f"{detection_probability(similarity).mean():.4f}"])
    body += "Recall of the planted pairs (found: both documents in one group) against the S-curve "
    body += f"1 - (1 - s^{ROWS})^{BANDS} averaged over each level's pairs at their exact Jaccard:\n\n"
    body += markdown_table(["planted at Jaccard", "documents", "pairs", "mean Jaccard", "range", "found",
                            "expected"], recall_rows)
    return body


def child_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    for name in ("--input", "--cache", "--output", "--lsh-task"):
        parser.add_argument(name)
    parser.add_argument("--components-edges", type=int)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        found = child_arguments(argv)
        if found.components_edges:
            return components_child(found.components_edges, found.seed)
        return lsh_task_child(found.lsh_task) if found.lsh_task else child(found)
    from common import add_append_argument, machine_description, publish

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[50_000, 200_000],
                        help="corpus sizes, each generated and run on its own (default: 50000 200000)")
    parser.add_argument("--docs-per-file", type=int, default=20_000, help="documents per parquet file")
    parser.add_argument("--planted", type=float, default=0.1, help="share of documents that are near-copies")
    parser.add_argument("--levels", type=float, nargs="+", default=[0.95, 0.9, 0.8, 0.6, 0.4],
                        help="Jaccard similarities the near-copies are planted at")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lsh-bound", action="store_true",
                        help="also time one LSH task at RECORDS_PER_PARTITION records (1.7 GB of signatures in /tmp)")
    parser.add_argument("--components-edges", type=int, metavar="EDGES",
                        help="also time the in-memory connected components alone on this many random edges")
    parser.add_argument("--bounds-only", action="store_true",
                        help="skip the corpus runs: only --lsh-bound and --components-edges")
    add_append_argument(parser)
    args = parser.parse_args(argv)
    machine = machine_description()
    body = "" if args.bounds_only else report({n: measure(n, args) for n in args.documents}, args)
    if args.components_edges:
        found = run_child(["--components-edges", str(args.components_edges), "--seed", str(args.seed)],
                          "the components alone")
        held = found["peak_rss"] - found["start_rss"]
        body += (
            f"\n\nConnected components in memory (`component_groups`, what the phase runs when the graph fits its measured bound), "
            f"alone in a fresh process on {args.components_edges:,} random edges between {found['vertices']:,} "
            f"int64 ids, the edges already held: {found['wall']:.1f} s wall, {found['cpu']:.1f} s CPU, RSS "
            f"{gb(found['start_rss'])} GB at the start and {gb(found['peak_rss'])} GB at the peak, "
            f"{held / (args.components_edges + found['vertices']):.0f} bytes per edge and id.\n"
        )
    if args.lsh_bound:
        bound = lsh_bound(args)
        body += (
            f"\n\nOne LSH task at the bound: {bound['records']:,} (band key, id) records (`RECORDS_PER_PARTITION` "
            f"is 2^23), what one task gets at {bound['documents']:,} documents, the most before each band range "
            "splits in two partitions; "
            f"over random signatures written as the minhash phase writes them, in a fresh process, the LSH task "
            f"alone: "
            f"{bound['wall']:.1f} s wall, {bound['cpu']:.1f} s CPU, RSS {gb(bound['start_rss'])} GB at the start "
            f"and {gb(bound['peak_rss'])} GB at the peak ({bound['buckets']:,} buckets of two or more); the band-key "
            f"tasks before it (each holding one band range's records of its group of signature files, at most "
            f"`BAND_KEY_RECORDS` = 2^22) peaked at {gb(bound['band_keys_peak_rss'])} GB.\n"
        )
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
