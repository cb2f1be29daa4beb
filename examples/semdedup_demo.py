"""Semantic deduplication of the bundled sample corpus, on CPU, offline.

    make demo            # or: python examples/semdedup_demo.py [--output DIR]

Embeds 614 Debian package descriptions with the bundled all-MiniLM-L6-v2,
clusters them, removes near-duplicates, and prints what was removed and why.
Run it twice: the second run finds every phase complete and does no work.
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from beam_curator.data import sample_corpus_path
from beam_curator.logs import configure_logging


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="demo_output", help="folder for results and cache")
    parser.add_argument("--eps", type=float, default=0.01)
    parser.add_argument("--runner", default="local")
    args = parser.parse_args()
    configure_logging()
    from beam_curator import TextSemanticDeduplicationWorkflow  # imports Apache Beam: after logging is set up

    result = TextSemanticDeduplicationWorkflow(
        input_path=sample_corpus_path(),
        output_path=f"{args.output}/results",
        cache_path=f"{args.output}/cache",
        input_filetype="jsonl",
        output_filetype="jsonl",
        id_field="doc_id",
        n_clusters=20,
        eps=args.eps,
        embedding_max_chars=1000,
        recall_sample=614,
        runner=args.runner,
    ).run()

    texts = pd.concat(pd.read_json(path, lines=True) for path in sorted(
        __import__("glob").glob(f"{sample_corpus_path()}/*.jsonl"))).set_index("doc_id")["text"]
    duplicates = pd.read_parquet(result.metadata["duplicate_pairs_path"])  # id, max_id, cosine_sim_score
    exact = duplicates[duplicates["id"].map(texts) == duplicates["max_id"].map(texts)]
    near = duplicates.drop(exact.index).sort_values("cosine_sim_score")
    print(f"\n{len(duplicates)} of {len(texts)} documents are duplicates at eps={args.eps}: "
          f"{len(exact)} exact copies and {len(near)} near-duplicates, for example:")
    for row in near.head(4).itertuples():
        print(f"  {row.id} ~ {row.max_id} (cosine {row.cosine_sim_score:.4f})")
        print(f"    removed: {texts[row.id][:90]!r}")
        print(f"    kept:    {texts[row.max_id][:90]!r}")
    print("\nsummary")
    for key, value in result.metadata.items():
        if key != "recall":
            print(f"  {key:<24} {value:.2f}" if isinstance(value, float) else f"  {key:<24} {value}")
    plain = result.metadata["recall"]["plain"]["per_eps"]
    print("recall of the clustered search against brute force (all 614 documents):")
    print(json.dumps({row["eps"]: round(row["recall"], 3) for row in plain}))


if __name__ == "__main__":
    main()
