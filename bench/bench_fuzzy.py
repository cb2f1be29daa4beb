"""Benchmark: fuzzy deduplication of the Debian corpus end to end, against
datasketch's and rensa's MinHash LSH and datatrove's MinHash deduplication,
and how close each comes to the exact answer over all pairs.

All at NeMo Curator's 20 bands of 13 minhashes (260 permutations). The corpus
(all 63,905 descriptions by default) is written as JSONL files of 1,000
records with an integer ``doc_id``, outside the timings. Contenders, each run
once, one after another, one process each:

- ``beam_curator``: ``FuzzyDeduplicationWorkflow`` as a user gets it (local
  runner, default settings: character 24-grams, ``id_field="doc_id"``), files
  in, duplicate ids out, every phase included; then again with
  ``perform_removal=True`` (deduplicated JSONL out);
- ``datasketch``: what its users write: a ``MinHash`` per document from the
  same 24-character shingles (``update_batch``, permutations shared), inserted
  into ``MinHashLSH(num_perm=260, params=(20, 13))``, each document queried,
  the pairs joined into groups by union-find; in memory, no files;
- ``rensa``: the same, with rensa's Rust sketches: an ``RMinHash(num_perm=260,
  seed=42)`` per document updated with the same shingles (as strings),
  inserted into ``RMinHashLSH(threshold=0.8, num_perm=260, num_bands=20)``
  (13 per band), each document queried, the pairs union-found; in memory;
- ``datatrove``: its four stages as its example lays them out, each a
  ``LocalPipelineExecutor`` of one worker (signatures and filter one task,
  buckets one task per band), ``JsonlReader`` in and uncompressed
  ``JsonlWriter``s out (kept and removed documents): ``MinhashDedupSignature``
  → ``MinhashDedupBuckets`` → ``MinhashDedupCluster`` → ``MinhashDedupFilter``,
  ``MinhashConfig(num_buckets=20, hashes_per_bucket=13)``. Twice: as its users
  run it on English (spaCy's blank English tokenizer, word 5-grams of the
  text lower-cased, numbers to 0, punctuation and accents dropped), and
  configured as near ours as its settings allow (a tokenizer of single
  characters, ``n_grams=24``, text normalisation off: the character 24-grams
  of the text stripped of surrounding whitespace; texts under 24 characters
  get no shingle and are skipped). Its hashes are 64-bit xxhash.

Exactness: every pair of documents (2·10⁹ at 63,905) is scored by brute
force, as a sparse document × shingle matrix multiplied by its transpose in
row blocks (documents sorted by shingle count, so each block meets only the
documents of a count that could reach the lowest threshold), keeping the
pairs whose Jaccard similarity of the 24-character shingle sets is 0.7 or
more; for datatrove as its users run it, of its own word 5-gram shingles too.
A tool's *candidate pairs* are the pairs of documents sharing a bucket in
some band; its *group pairs* are the pairs of documents it puts in the same
duplicate group (connected component). Precision and recall of both against
the true pairs at Jaccard ≥ 0.7, 0.8 and 0.9 (the S-curve of 20 bands of 13
crosses one half at 0.79).

    python bench/bench_fuzzy.py                    # all 63,905 documents
    python bench/bench_fuzzy.py --n 10000
    python bench/bench_fuzzy.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sparse
from datatrove.utils.word_tokenizers import WordTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import ID, write_inputs  # noqa: E402
from bench_minhash import HASHES, WIDTH  # noqa: E402
from common import (  # noqa: E402
    Timing,
    add_append_argument,
    interleaved_timings,
    load_corpus,
    machine_description,
    markdown_table,
    timed,
    publish,
)

from beam_curator.workflows import FuzzyDeduplicationWorkflow  # noqa: E402

BANDS, ROWS = 20, 13
THRESHOLDS = (0.7, 0.8, 0.9)
Pair = tuple[int, int]


def shingles(text: str) -> list[str]:
    """NeMo's character n-grams: every window of WIDTH, or the whole text if shorter."""
    return [text[i : i + WIDTH] for i in range(max(len(text) - WIDTH + 1, 1))]


def union_find(pairs: Iterable[Pair]) -> dict[int, int]:
    """Each document on a pair, mapped to the least id of its group."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    return {x: root(x) for x in parent}


def pairs_within(roots: dict[int, int]) -> set[Pair]:
    """Every pair of documents that share a group."""
    groups: dict[int, list[int]] = defaultdict(list)
    for doc, root in roots.items():
        groups[root].append(doc)
    return {pair for group in groups.values() for pair in itertools.combinations(sorted(group), 2)}


@dataclass
class Found:
    """What a contender found: its candidate pairs, each grouped document's
    group (the least document of it) and how many documents it removes."""

    pairs: set[Pair]
    roots: dict[int, int]
    removed: int

    @property
    def groups(self) -> int:
        return len(set(self.roots.values()))


# --- the contenders ---------------------------------------------------------


def run_workflow(scratch: Path, name: str, **settings: object) -> None:
    FuzzyDeduplicationWorkflow(
        cache_path=str(scratch / name / "cache"), output_path=str(scratch / name / "output"),
        input_path=str(scratch / "input"), input_filetype="jsonl", id_field=ID, **settings,
    ).run()


def workflow_results(folder: Path) -> Found:
    """Candidate pairs (from the LSH buckets), groups and removed ids of a finished run."""
    pairs: set[Pair] = set()
    for part in sorted((folder / "cache" / "LSHStage").glob("*/*.parquet")):
        for bucket in pq.read_table(part, columns=[ID]).column(ID).to_pylist():
            pairs.update(itertools.combinations(sorted(bucket), 2))
    components = pq.read_table(folder / "cache" / "ConnectedComponentsStage")
    roots = dict(zip(components.column(ID).to_pylist(), components.column("_duplicate_group_id").to_pylist()))
    removed = pq.read_table(folder / "output" / "FuzzyDuplicateIds").num_rows
    return Found(pairs, roots, removed)


def datasketch_lsh(texts: list[str]) -> Found:
    from datasketch import MinHash, MinHashLSH

    template = MinHash(num_perm=HASHES, seed=42)
    lsh = MinHashLSH(num_perm=HASHES, params=(BANDS, ROWS))
    sketches = []
    with lsh.insertion_session() as session:
        for key, text in enumerate(texts):
            sketch = MinHash(num_perm=HASHES, permutations=template.permutations, scheme=template.scheme)
            sketch.update_batch([gram.encode() for gram in shingles(text)])
            session.insert(key, sketch)
            sketches.append(sketch)
    return queried(sketches, lsh.query)


def rensa_lsh(texts: list[str]) -> Found:
    from rensa import RMinHash, RMinHashLSH

    lsh = RMinHashLSH(threshold=0.8, num_perm=HASHES, num_bands=BANDS)
    sketches = []
    for key, text in enumerate(texts):
        sketch = RMinHash(num_perm=HASHES, seed=42)
        sketch.update(shingles(text))
        lsh.insert(key, sketch)
        sketches.append(sketch)
    return queried(sketches, lsh.query)


def queried(sketches: list, query: Callable[[object], Iterable[int]]) -> Found:
    """What an in-memory LSH index finds: each document (its key the sketch's
    place) queried for the others sharing a bucket, the pairs union-found."""
    pairs = {(min(key, other), max(key, other)) for key, sketch in enumerate(sketches)
             for other in query(sketch) if other != key}
    roots = union_find(pairs)
    return Found(pairs, roots, len(roots) - len(set(roots.values())))


class CharacterTokenizer(WordTokenizer):
    """Single characters as datatrove's "words", so that its n-grams are
    character n-grams (it joins a shingle's words with spaces before hashing:
    one string per window all the same)."""

    def word_tokenize(self, text: str) -> list[str]:
        return list(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


def datatrove_setup(words: bool):
    """The signature stage's configuration and language: datatrove's defaults
    for English at our bands (word 5-grams), or as near our shingles as its
    settings come (character 24-grams of the raw text)."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.text import TextNormConfig
    from datatrove.utils.typeshelper import Languages

    if words:
        return MinhashConfig(num_buckets=BANDS, hashes_per_bucket=ROWS), Languages.english
    raw = TextNormConfig(lowercase=False, norm_whitespace=False, remove_punctuation=False,
                         norm_unicode_diacritics=False, norm_numbers=False)
    return MinhashConfig(n_grams=WIDTH, num_buckets=BANDS, hashes_per_bucket=ROWS, norm_config=raw), CharacterTokenizer()


def datatrove_dedup(source: Path, work: Path, words: bool, stages: dict[str, Timing]) -> None:
    """datatrove's four stages, each its own executor, timed one by one into ``stages``."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config, language = datatrove_setup(words)

    def reader() -> JsonlReader:
        return JsonlReader(str(source), id_key=ID)

    pipelines = {
        "signatures": ([reader(), MinhashDedupSignature(str(work / "signatures"), config=config, language=language)], 1),
        "buckets": ([MinhashDedupBuckets(str(work / "signatures"), str(work / "buckets"), config=config)], BANDS),
        "clusters": ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove_ids"), config=config)], 1),
        "filter": ([reader(), MinhashDedupFilter(str(work / "remove_ids"),
                                                 exclusion_writer=JsonlWriter(str(work / "removed"), compression=None)),
                    JsonlWriter(str(work / "deduplicated"), compression=None)], 1),
    }
    for name, (pipeline, tasks) in pipelines.items():
        executor = LocalPipelineExecutor(pipeline, tasks=tasks, workers=1, logging_dir=str(work / "logs" / name))
        stages[name] = timed(executor.run)[1]


def datatrove_results(source: Path, work: Path) -> Found:
    """Candidate pairs, groups and removed documents of a finished datatrove
    run. Its bucket stage writes, per band, each document of a bucket paired
    with the one before it in signature order: the band's components are its
    buckets. Documents are named by their place in the reader's stream."""
    from datatrove.pipeline.readers import JsonlReader

    ids = np.array([int(doc.id) for doc in JsonlReader(str(source), id_key=ID).run(rank=0, world_size=1)])
    pairs: set[Pair] = set()
    every: list[Pair] = []
    for band in sorted((work / "buckets").glob("*.dups")):
        rows = np.fromfile(band, dtype="<u4").reshape(-1, 4)
        if (rows[:, [0, 2]] != 0).any():
            raise AssertionError("one signing task: every document should come from stream 0")
        edges = list(zip(ids[rows[:, 1]].tolist(), ids[rows[:, 3]].tolist()))
        pairs |= pairs_within(union_find(edges))
        every += edges
    removed = sum(1 for part in (work / "removed").glob("*.jsonl") for _ in part.open())
    found = Found(pairs, union_find(every), removed)
    if len(found.roots) - found.groups != removed:  # its clusters, rebuilt here, keep one document each
        raise AssertionError(f"datatrove removed {removed} documents, its buckets imply {len(found.roots) - found.groups}")
    return found


# --- the exact answer ---------------------------------------------------------


def character_shingle_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit polynomial hash of each of ``shingles(text)``, text after text,
    and how many each text has. Each text is followed in one buffer by
    WIDTH - 1 code points past Unicode's last, so a window never reaches into
    the next text and a text shorter than WIDTH hashes whole."""
    count = len(texts)
    lengths = np.fromiter(map(len, texts), np.int64, count)
    code = np.frombuffer("".join(texts).encode("utf-32-le"), np.uint32)
    buffer = np.full(len(code) + count * (WIDTH - 1), 0x110000, np.uint64)
    buffer[np.arange(len(code)) + np.repeat(np.arange(count) * (WIDTH - 1), lengths)] = code
    windows = len(buffer) - WIDTH + 1
    hashes = np.zeros(windows, np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(WIDTH):
            hashes = hashes * np.uint64(0x9E3779B97F4A7C15) + buffer[offset : offset + windows]
    starts = np.cumsum(lengths + WIDTH - 1) - (lengths + WIDTH - 1)
    counts = np.maximum(lengths - WIDTH + 1, 1)
    firsts = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    return hashes[firsts], counts


def shingle_matrix(hashes: np.ndarray, counts: np.ndarray) -> sparse.csr_matrix:
    """Documents × distinct shingles, 1 where the document has the shingle.
    (Distinct values by sorting: numpy 2.4's ``unique`` is many times slower here.)"""
    order = np.argsort(hashes)
    ranked = hashes[order]
    new = np.ones(len(ranked), bool)
    new[1:] = ranked[1:] != ranked[:-1]
    column = np.empty(len(hashes), np.int64)
    column[order] = np.cumsum(new) - 1
    rows = np.concatenate([[0], np.cumsum(counts)])
    matrix = sparse.csr_matrix((np.ones(len(column), np.int32), column, rows), shape=(len(counts), int(new.sum())))
    matrix.sum_duplicates()
    matrix.data[:] = 1
    return matrix


@dataclass
class Truth:
    """Every pair (first < second) at Jaccard ``floor`` or more, and what finding them took."""

    first: np.ndarray
    second: np.ndarray
    jaccard: np.ndarray
    shingles: int  # distinct shingles
    products: int  # intersections computed (nonzero entries of the products)
    shingling: Timing | None = None  # hashing each document's shingles
    join: Timing | None = None  # the matrix and its products

    def at(self, threshold: float) -> set[Pair]:
        keep = self.jaccard >= threshold
        return set(zip(self.first[keep].tolist(), self.second[keep].tolist()))


def similar_pairs(matrix: sparse.csr_matrix, floor: float, block: int = 1000) -> Truth:
    """Exact all-pairs Jaccard join. Documents sorted by shingle count: a pair
    at ``floor`` or more has ``|smaller| ≥ floor · |larger|``, so a block of
    rows is multiplied only by the documents from its own first to the last
    whose count its largest could still reach. Documents without shingles
    pair with nothing."""
    sizes = np.diff(matrix.indptr)
    order = np.argsort(sizes, kind="stable")
    by_size, size = matrix[order], sizes[order]
    found, products = [], 0
    for start in range(0, len(size), block):
        stop = min(start + block, len(size))
        end = int(np.searchsorted(size, size[stop - 1] / floor * (1 + 1e-9), side="right"))
        inter = (by_size[start:stop] @ by_size[start:end].T).tocoo()
        products += inter.nnz
        a, b = inter.row + start, inter.col + start
        later = b > a
        a, b, common = a[later], b[later], inter.data[later]
        jaccard = common / (size[a] + size[b] - common)
        keep = jaccard >= floor
        found.append((order[a[keep]], order[b[keep]], jaccard[keep]))
    first, second, jaccard = (np.concatenate(column) for column in zip(*found))
    return Truth(np.minimum(first, second), np.maximum(first, second), jaccard, matrix.shape[1], products)


def exact_pairs(hashes: Callable[[], tuple[np.ndarray, np.ndarray]]) -> Truth:
    shingled, shingling = timed(hashes)
    truth, join = timed(lambda: similar_pairs(shingle_matrix(*shingled), min(THRESHOLDS)))
    truth.shingling, truth.join = shingling, join
    return truth


def spot_check(texts: list[str], truth: Truth, pairs: int = 300, seed: int = 0) -> None:
    """The brute force's Jaccard of random pairs it kept equals Python's on string sets."""
    for k in random.Random(seed).sample(range(len(truth.jaccard)), min(pairs, len(truth.jaccard))):
        a, b = set(shingles(texts[truth.first[k]])), set(shingles(texts[truth.second[k]]))
        if abs(len(a & b) / len(a | b) - truth.jaccard[k]) > 1e-9:
            raise AssertionError(f"brute force wrong on pair {truth.first[k]}, {truth.second[k]}")


def word_shingle_hashes(texts: list[str], scratch: Path) -> tuple[np.ndarray, np.ndarray]:
    """datatrove's own shingles (its ``get_shingles``, as its signature stage
    computes them), text after text, and how many each text has."""
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    config, language = datatrove_setup(words=True)
    signer = MinhashDedupSignature(str(scratch / "unused"), config=config, language=language)
    each = [signer.get_shingles(text).reshape(-1) for text in texts]
    return np.concatenate(each), np.array([len(hashes) for hashes in each])


def quality(found: Found, true: set[Pair], documents: int) -> tuple[float, float, float, float]:
    """Precision and recall of the candidate pairs, then of the group pairs."""
    hits = len(found.pairs & true)
    label = np.arange(documents)
    label[list(found.roots)] = list(found.roots.values())
    ends = np.array(sorted(true), dtype=np.int64).reshape(-1, 2)
    same = int((label[ends[:, 0]] == label[ends[:, 1]]).sum())
    members = np.bincount(label)
    group_pairs = int((members * (members - 1) // 2).sum())
    return (hits / max(len(found.pairs), 1), hits / max(len(true), 1),
            same / max(group_pairs, 1), same / max(len(true), 1))


# --- the report ---------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=63905, help="documents (the corpus holds 63,905)")
    add_append_argument(parser)
    args = parser.parse_args()
    machine = machine_description()
    records = load_corpus(args.n)
    texts = [record["text"] for record in records]
    n = len(texts)
    scratch = Path(tempfile.mkdtemp(prefix="bench_fuzzy_"))
    source = scratch / "input"
    write_inputs(records, source, 1000)
    found: dict[str, Found] = {}
    stages: dict[str, dict[str, Timing]] = {"words": {}, "characters": {}}

    contenders = {
        "beam_curator": lambda: run_workflow(scratch, "ids"),
        "beam_curator, removal": lambda: run_workflow(scratch, "removal", perform_removal=True),
        "datasketch": lambda: found.__setitem__("datasketch", datasketch_lsh(texts)),
        "rensa": lambda: found.__setitem__("rensa", rensa_lsh(texts)),
        "datatrove, words": lambda: datatrove_dedup(source, scratch / "words", True, stages["words"]),
        "datatrove, characters": lambda: datatrove_dedup(source, scratch / "characters", False, stages["characters"]),
    }
    timings = interleaved_timings(contenders, repeats=1, warmup=False)
    found["beam_curator"] = workflow_results(scratch / "ids")
    removal_removed = workflow_results(scratch / "removal").removed
    for kind in stages:
        found[f"datatrove, {kind}"] = datatrove_results(source, scratch / kind)

    characters = exact_pairs(lambda: character_shingle_hashes(texts))
    spot_check(texts, characters)
    words = exact_pairs(lambda: word_shingle_hashes(texts, scratch))
    truth = {"characters": characters, "words": words}
    shutil.rmtree(scratch)  # the runs' inputs and outputs: several hundred MB at the whole corpus

    def row(label: str, output: str, timing: Timing, result: Found | None, removed: int | None = None) -> list[str]:
        counts = ["–"] * 2 if result is None else [f"{len(result.pairs):,}", f"{result.groups:,}"]
        return [label, output, f"{timing.wall:.1f}", f"{timing.cpu:.1f}", f"{n / timing.wall:,.0f}",
                f"{n / timing.cpu:,.0f}", *counts, f"{removed if removed is not None else result.removed:,}"]

    def summed(kind: str, names: Iterable[str]) -> Timing:
        picked = [stages[kind][name] for name in names]
        return Timing(sum(t.wall for t in picked), sum(t.cpu for t in picked))

    first_three = ("signatures", "buckets", "clusters")
    speed = [
        row("beam_curator", "duplicate ids", timings["beam_curator"], found["beam_curator"]),
        row("beam_curator, `perform_removal=True`", "deduplicated JSONL", timings["beam_curator, removal"], None,
            removal_removed),
        row("datasketch `MinHashLSH` + union-find", "in memory", timings["datasketch"], found["datasketch"]),
        row("rensa `RMinHashLSH` + union-find", "in memory", timings["rensa"], found["rensa"]),
    ]
    for kind, shingled in (("words", "word 5-grams"), ("characters", "character 24-grams")):
        result = found[f"datatrove, {kind}"]
        speed += [row(f"datatrove, {shingled}: stages 1–3", "`.remove` files", summed(kind, first_three), result),
                  row(f"datatrove, {shingled}: all 4 stages", "deduplicated JSONL", timings[f"datatrove, {kind}"],
                      None, result.removed)]

    judged = [("beam_curator", "characters"), ("datasketch", "characters"), ("rensa", "characters"),
              ("datatrove, characters", "characters"),
              ("datatrove, words", "characters"), ("datatrove, words", "words")]
    rows = []
    for name, kind in judged:
        for threshold in THRESHOLDS:
            true = truth[kind].at(threshold)
            scores = quality(found[name], true, n)
            rows.append([name, "24 characters" if kind == "characters" else "5 words", f"{threshold}",
                         f"{len(true):,}", *(f"{value:.3f}" for value in scores)])

    ours, sketch, rensa = timings["beam_curator"], timings["datasketch"], timings["rensa"]
    trove_ids = summed("words", first_three)
    per_stage = "; ".join(
        f"{shingled}: " + ", ".join(f"{name} {t.wall:.1f} s wall / {t.cpu:.1f} s CPU" for name, t in stages[kind].items())
        for kind, shingled in (("words", "word 5-grams"), ("characters", "character 24-grams")))
    true8 = characters.at(0.8)
    hashing = ("beam_curator", "datasketch", "rensa", "datatrove, characters")
    by_all = sum(all(pair in found[name].pairs for name in hashing)
                 for pair in true8)
    exact = "; ".join(
        f"{label}: shingling {truth[kind].shingling.wall:.1f} s wall / {truth[kind].shingling.cpu:.1f} s CPU, "
        f"{truth[kind].shingles:,} distinct shingles, {truth[kind].products:,} intersections computed, "
        f"matrix and products {truth[kind].join.wall:.1f} s wall / {truth[kind].join.cpu:.1f} s CPU"
        for kind, label in (("characters", "24-character shingles (hashed by numpy)"),
                            ("words", "datatrove's word 5-grams (its own get_shingles, spaCy)")))
    body = (
        f"{n:,} Debian descriptions ({n * (n - 1) // 2:,} pairs), {BANDS} bands of {ROWS}, one process each "
        f"(the local runner's default: one thread; datatrove's executors one worker). Candidate pairs share a "
        f"bucket in some band; group pairs share a duplicate group.\n\n"
        + markdown_table(["contender", "output", "wall s", "CPU s", "documents / s", "documents / CPU s",
                          "candidate pairs", "groups", "documents removed"], speed, align="llrrrrrrr")
        + f"\n\ndatatrove per stage: {per_stage}.\n\n"
        f"Exact pairs at Jaccard ≥ {min(THRESHOLDS)} over all pairs, by sparse products: {exact}.\n\n"
        + markdown_table(["contender", "truth's shingles", "Jaccard ≥", "true pairs", "candidate precision",
                          "candidate recall", "group precision", "group recall"], rows, align="lllrrrrr")
        + f"\n\nbeam_curator against datasketch: {ours.wall / sketch.wall:.2f}× the wall time, "
        f"{ours.cpu / sketch.cpu:.2f}× the CPU time; against rensa: {ours.wall / rensa.wall:.2f}× the wall time, "
        f"{ours.cpu / rensa.cpu:.2f}× the CPU time; against datatrove as its users run it (stages 1–3, ids out): "
        f"{ours.wall / trove_ids.wall:.2f}× the wall time, {ours.cpu / trove_ids.cpu:.2f}× the CPU time; with "
        f"removal against its 4 stages: {timings['beam_curator, removal'].cpu / timings['datatrove, words'].cpu:.2f}× "
        f"the CPU time. Of the {len(true8):,} pairs at Jaccard ≥ 0.8 of the character shingles, "
        f"{by_all / max(len(true8), 1):.1%} are candidate pairs of all {len(hashing)} tools hashing them.\n"
    )
    publish(__file__, body, args.append, machine)


if __name__ == "__main__":
    main()
