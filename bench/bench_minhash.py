"""Benchmark: the compiled and numpy MinHash kernels against a plain Python loop, rensa, datasketch and datatrove.

All compute NeMo Curator's default signature size (260 permutations) of
character 24-grams of the same documents (the Debian corpus descriptions),
one process, one thread, wall and CPU time per document. Contenders:

- ``compiled``: ``beam_curator.dedup.fuzzy.minhash.signatures`` on the whole batch, numba's kernel;
- ``numpy``: the same with ``compiled=False``, the numpy kernel (the fallback without numba);
- ``plain loop``: ``signature_loop``, the same values one n-gram and permutation at a time;
- ``rensa``: its ``RMinHash`` (Rust) per document, ``update`` with the n-grams then ``digest``
  (its own hash and permutations), once with the n-grams sliced from the text in the timing, as
  users call it on texts, and once given them ready, as datasketch is;
- ``datasketch``: ``MinHash.update_batch`` per document (its own hash: sha1 of each n-gram);
- ``datatrove``: its per-document numpy step (``get_signature``: permute and take the minimum),
  fed our MurmurHash3 n-gram hashes (its own shingles are word 5-grams, not character n-grams).

Values agree only between the first three (the others hash differently); the
run checks that before timing, which also loads (or compiles) the compiled
kernel. The plain loop runs on a tenth of the documents.

    python bench/bench_minhash.py                # 2,000 documents
    python bench/bench_minhash.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    add_append_argument,
    interleaved_timings,
    load_corpus,
    machine_description,
    markdown_table,
    publish,
)

from beam_curator.dedup.fuzzy.minhash import murmur3_32, ngram_ranges, permutation_seeds, signature_loop, signatures  # noqa: E402

WIDTH, HASHES = 24, 260


def ngram_hashes(text: str, seed: int) -> np.ndarray:
    buffer, starts, ends, _ = ngram_ranges([text], WIDTH)
    lengths = ends - starts
    return np.concatenate([murmur3_32(buffer, starts[lengths == n], int(n), seed) for n in np.unique(lengths)])


def ngrams(text: str) -> list[str]:
    """The text's character n-grams as NeMo's are (one, the whole text, when it is shorter)."""
    return [text[i:i + WIDTH] for i in range(max(len(text) - WIDTH + 1, 1))]


def versions() -> str:
    found = []
    for package in ("numba", "rensa", "datasketch", "datatrove"):
        try:
            found.append(f"{package} {installed_version(package)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def datatrove_signer():
    """datatrove's signing step alone, at NeMo's 20 bands of 13, built without
    the stage's constructor (which wants an output folder and a word
    tokenizer): ``get_signature`` needs only the configuration. Raises
    ImportError without datatrove."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature

    signer = object.__new__(MinhashDedupSignature)
    signer.config, signer._parameters = MinhashConfig(num_buckets=20, hashes_per_bucket=13), None
    signer.num_hashes = HASHES
    return signer


def contenders(texts: list[str], seeds: np.ndarray) -> dict[str, object]:
    found = {
        "compiled": lambda: signatures(texts, seeds, WIDTH, compiled=True),
        "numpy": lambda: signatures(texts, seeds, WIDTH, compiled=False),
        "plain loop": lambda: [signature_loop(text, seeds, WIDTH) for text in texts[: len(texts) // 10]],
    }
    grams = [[gram.encode() for gram in ngrams(text)] for text in texts]
    try:
        from rensa import RMinHash

        def rensa(documents: Iterable[list[str] | list[bytes]]) -> list[list[int]]:
            digests = []
            for document in documents:
                sketch = RMinHash(num_perm=HASHES, seed=42)
                sketch.update(document)
                digests.append(sketch.digest())
            return digests

        found["rensa, n-grams sliced"] = lambda: rensa(map(ngrams, texts))
        found["rensa, n-grams given"] = lambda: rensa(grams)
    except ImportError:
        pass
    try:
        from datasketch import MinHash

        template = MinHash(num_perm=HASHES, seed=42)

        def datasketch() -> None:
            for document in grams:
                MinHash(num_perm=HASHES, permutations=template.permutations, scheme=template.scheme).update_batch(document)

        found["datasketch"] = datasketch
    except ImportError:
        pass
    try:
        signer = datatrove_signer()
        shingles = [ngram_hashes(text, int(seeds[0, 0])).astype(np.uint64).reshape(-1, 1) for text in texts]
        found["datatrove"] = lambda: [signer.get_signature(document) for document in shingles]
    except ImportError:
        pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="documents")
    parser.add_argument("--repeats", type=int, default=3)
    add_append_argument(parser)
    args = parser.parse_args()
    machine = machine_description()
    texts = [record["text"] for record in load_corpus(args.n)]
    seeds = permutation_seeds(HASHES, 42)
    sample = texts[: len(texts) // 10]
    compiled = signatures(sample, seeds, WIDTH, compiled=True).tolist()
    assert compiled == signatures(sample, seeds, WIDTH, compiled=False).tolist()
    assert compiled == [signature_loop(text, seeds, WIDTH) for text in sample]
    timings = interleaved_timings(contenders(texts, seeds), args.repeats, warmup=False)
    counts = {name: len(texts) // 10 if name == "plain loop" else len(texts) for name in timings}
    fastest = counts["compiled"] / timings["compiled"].cpu
    rows = []
    for name, timing in timings.items():
        rate = counts[name] / timing.cpu
        rows.append([name, counts[name], f"{timing.wall:.2f}", f"{timing.cpu:.2f}",
                     f"{counts[name] / timing.wall:,.0f}", f"{rate:,.0f}", f"{fastest / rate:.2f}×"])
    chars = sum(map(len, texts)) / len(texts)
    body = (
        f"{len(texts):,} Debian descriptions (mean {chars:.0f} characters), {HASHES} permutations of "
        f"{WIDTH}-character n-grams, one thread, medians of {args.repeats}; {versions()}; the numpy kernel's "
        "and the plain loop's values equal the compiled kernel's.\n\n"
        + markdown_table(["contender", "documents", "wall s", "CPU s", "documents / s", "documents / CPU s",
                          "compiled is faster by (CPU)"], rows)
    )
    publish(__file__, body, args.append, machine)


if __name__ == "__main__":
    main()
