"""Benchmark: fuzzy deduplication of the Debian corpus end to end, against
datasketch's MinHashLSH and datatrove's signing step, and how far they agree.

All at NeMo Curator's defaults: character 24-grams, 20 bands of 13 minhashes
(260 permutations). The corpus (all 63,905 descriptions by default) is
written as JSONL files of 1,000 records with an integer ``doc_id``, outside
the timings. Contenders, each run once, side by side, one after another:

- ``beam_curator``: ``FuzzyDeduplicationWorkflow`` as a user gets it (local
  runner, default settings, ``id_field="doc_id"``, no removal), files in,
  duplicate ids out, every phase included;
- ``datasketch``: what its users write: a ``MinHash`` per document from the
  same 24-character shingles (``update_batch``, permutations shared), inserted
  into ``MinHashLSH(num_perm=260, params=(20, 13))``, each document queried,
  the pairs joined into groups by union-find; in memory, no files;
- ``datatrove``: its signing step only (``get_signature`` on our MurmurHash3
  n-gram hashes, shingling included). Its stages cannot run here: the
  signature stage's constructor loads a spaCy word tokenizer (not
  installed) and shingles words, not characters; its bucket and cluster
  stages read the signature stage's files.

Agreement: the candidate pairs (documents sharing a bucket) of the first two,
and a random sample of pairs neither found, are checked against brute-force
Jaccard of the same shingle sets; a pair is a true duplicate at 0.8 or more
(the S-curve of 20 bands of 13 crosses one half at 0.79). With many
candidates a uniform sample of them is checked.

    python bench/bench_fuzzy.py                    # all 63,905 documents
    python bench/bench_fuzzy.py --n 10000
    python bench/bench_fuzzy.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import ID, write_inputs  # noqa: E402
from bench_minhash import HASHES, WIDTH, datatrove_signer, ngram_hashes  # noqa: E402
from common import (  # noqa: E402
    add_append_argument,
    interleaved_timings,
    load_corpus,
    machine_description,
    markdown_table,
    publish,
)

from beam_curator.dedup.fuzzy.minhash import permutation_seeds  # noqa: E402
from beam_curator.workflows import FuzzyDeduplicationWorkflow  # noqa: E402

BANDS, ROWS, THRESHOLD = 20, 13, 0.8
Pair = tuple[int, int]


def shingles(text: str) -> list[str]:
    """NeMo's character n-grams: every window of WIDTH, or the whole text if shorter."""
    return [text[i : i + WIDTH] for i in range(max(len(text) - WIDTH + 1, 1))]


def pairs_within(groups: Iterable[list[int]]) -> set[Pair]:
    return {(a, b) for group in groups for a, b in itertools.combinations(sorted(set(group)), 2)}


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


def workflow_results(cache: Path, output: Path) -> tuple[set[Pair], set[int], int]:
    """Candidate pairs (from the LSH buckets), ids removed and groups of a finished run."""
    buckets = [row for part in sorted((cache / "LSHStage").glob("*/*.parquet"))
               for row in pq.read_table(part, columns=[ID]).column(ID).to_pylist()]
    removed = set(pq.read_table(output / "FuzzyDuplicateIds").column(ID).to_pylist())
    groups = pq.read_table(cache / "ConnectedComponentsStage").column("_duplicate_group_id").unique()
    return pairs_within(buckets), removed, len(groups)


def datasketch_lsh(texts: list[str]) -> set[Pair]:
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
    return {(min(key, other), max(key, other)) for key, sketch in enumerate(sketches)
            for other in lsh.query(sketch) if other != key}


def agreement(texts: list[str], found: dict[str, set[Pair]], checked: int, seed: int = 0) -> tuple[dict, int, float, int]:
    """Precision and recall of each contender's candidate pairs on a uniform
    sample of all candidates, the share of the true duplicates there that
    every contender found, and the true duplicates among ``checked`` random
    pairs that no contender found."""
    sets = lru_cache(maxsize=None)(lambda doc: frozenset(shingles(texts[doc])))

    def jaccard(pair: Pair) -> float:
        a, b = sets(pair[0]), sets(pair[1])
        return len(a & b) / len(a | b)

    rng = random.Random(seed)
    candidates = set().union(*found.values())
    ordered = sorted(candidates)
    sample = ordered if len(ordered) <= checked else rng.sample(ordered, checked)
    true = {pair for pair in sample if jaccard(pair) >= THRESHOLD}
    scores = {}
    for name, pairs in found.items():
        hits = sum(pair in pairs for pair in sample)
        caught = sum(pair in pairs for pair in true)
        scores[name] = (caught / hits if hits else float("nan"), caught / len(true) if true else float("nan"))
    others, missed = 0, 0
    while others < checked:
        pair = tuple(sorted(rng.sample(range(len(texts)), 2)))
        if pair not in candidates:
            others += 1
            missed += jaccard(pair) >= THRESHOLD
    shared = sum(all(pair in pairs for pairs in found.values()) for pair in true) / max(len(true), 1)
    return scores, len(sample), shared, missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=63905, help="documents (the corpus holds 63,905)")
    parser.add_argument("--checked", type=int, default=100_000, help="pairs checked by brute force, of each kind")
    add_append_argument(parser)
    args = parser.parse_args()
    machine = machine_description()
    records = load_corpus(args.n)
    texts = [record["text"] for record in records]
    scratch = Path(tempfile.mkdtemp(prefix="bench_fuzzy_"))
    write_inputs(records, scratch / "input", 1000)
    seed = int(permutation_seeds(HASHES, 42)[0, 0])
    signer = datatrove_signer()
    found: dict[str, set[Pair]] = {}

    def ours() -> None:
        FuzzyDeduplicationWorkflow(
            cache_path=str(scratch / "cache"), output_path=str(scratch / "output"),
            input_path=str(scratch / "input"), input_filetype="jsonl", id_field=ID,
        ).run()

    contenders = {
        "beam_curator": ours,
        "datasketch": lambda: found.__setitem__("datasketch", datasketch_lsh(texts)),
        "datatrove (signing only)": lambda: [signer.get_signature(
            ngram_hashes(text, seed).astype("uint64").reshape(-1, 1)) for text in texts],
    }
    timings = interleaved_timings(contenders, repeats=1, warmup=False)
    found["beam_curator"], removed, groups = workflow_results(scratch / "cache", scratch / "output")
    roots = union_find(found["datasketch"])
    theirs_removed = {doc for doc, root in roots.items() if doc != root}
    scores, sampled, shared, missed = agreement(texts, found, args.checked)

    rows = []
    for name, timing in timings.items():
        if name == "datatrove (signing only)":
            pairs = groups_of = dropped = "–"
            precision = recall = "–"
        else:
            pairs = f"{len(found[name]):,}"
            groups_of = f"{groups if name == 'beam_curator' else len(set(roots.values())):,}"
            dropped = f"{len(removed if name == 'beam_curator' else theirs_removed):,}"
            precision, recall = (f"{value:.3f}" for value in scores[name])
        rows.append([name, f"{timing.wall:.1f}", f"{timing.cpu:.1f}", f"{len(texts) / timing.wall:,.0f}",
                     f"{len(texts) / timing.cpu:,.0f}", pairs, groups_of, dropped, precision, recall])
    both = found["beam_curator"] & found["datasketch"]
    either = len(found["beam_curator"] | found["datasketch"])
    same_removed = len(removed & theirs_removed) / max(len(removed | theirs_removed), 1)
    ratio = timings["datasketch"]
    body = (
        f"{len(texts):,} Debian descriptions, {WIDTH}-character n-grams, {BANDS} bands of {ROWS}, one process "
        f"(the local runner's default: one thread). Candidate pairs share a bucket; precision and recall at "
        f"Jaccard ≥ {THRESHOLD} of the same shingles, on {sampled:,} of the {either:,} candidate pairs "
        f"of either.\n\n"
        + markdown_table(
            ["contender", "wall s", "CPU s", "documents / s", "documents / CPU s", "candidate pairs",
             "groups", "documents removed", "precision", "recall"], rows)
        + f"\n\nbeam_curator against datasketch: {timings['beam_curator'].wall / ratio.wall:.2f}× the wall time, "
        f"{timings['beam_curator'].cpu / ratio.cpu:.2f}× the CPU time; they share {len(both):,} of the "
        f"{either:,} candidate pairs either finds ({len(both) / max(either, 1):.1%}) and "
        f"{same_removed:.1%} of the documents either removes; both find {shared:.1%} of the true duplicate pairs either finds. Of {args.checked:,} random pairs neither found, "
        f"{missed} have Jaccard ≥ {THRESHOLD}.\n"
    )
    publish(__file__, body, args.append, machine)


if __name__ == "__main__":
    main()
