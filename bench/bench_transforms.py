"""Benchmark: the dedup PTransforms in a user's own pipeline against the
workflows, on the Debian corpus, and the composed exact → fuzzy → semantic chain.

The corpus (all 63,905 descriptions by default) is written as JSONL files of
1,000 records with an integer ``doc_id``, outside the timings. Each contender
runs in a process of its own (this script with ``--contender``), one after
another, at the defaults a user gets on the local runner; what it reports is
its wall and CPU time (its own and its children's) and its peak RSS, and how
many documents it removed:

- ``exact``: ``ExactDeduplicationWorkflow`` (files in, duplicate ids out)
  against ``ReadFromText`` → ``ExactDedup`` → the removed ids written out;
- ``fuzzy``: ``FuzzyDeduplicationWorkflow`` against ``FuzzyDedup`` the same way;
- ``semantic``: ``TextSemanticDeduplicationWorkflow`` with the static backend
  (the bundled model distilled by model2vec, cached after its first use)
  against ``SemanticDedup`` with the same static handler, both at
  ``n_clusters=100``, ``eps=0.05``;
- ``chain``: one pipeline reading the files with ``beam.io``, ``ExactDedup``
  → ``FuzzyDedup`` → ``SemanticDedup`` (static), writing the kept documents
  to Parquet and the removed ones beside them.

With ``--synthetic`` the documents are generated as ``bench_fuzzy_scale.py``
makes them (Zipf-drawn words, mean ~500 characters, 10% near-copies planted
at Jaccard 0.95 to 0.4), for sizes beyond the corpus.

    python bench/bench_transforms.py                 # all 63,905 documents
    python bench/bench_transforms.py --n 10000
    python bench/bench_transforms.py --synthetic --n 100000
    python bench/bench_transforms.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, load_corpus, machine_description, markdown_table, publish  # noqa: E402

ID, EPS, CLUSTERS = "doc_id", 0.05, 100
CONTENDERS = ("exact-workflow", "exact-transform", "fuzzy-workflow", "fuzzy-transform", "semantic-workflow",
              "semantic-transform", "chain")


def write_inputs(n: int, folder: Path, synthetic: bool, per_file: int = 1000) -> None:
    records = synthetic_records(n, folder.parent / "synthetic") if synthetic else load_corpus(n)
    folder.mkdir(parents=True)
    for part, start in enumerate(range(0, n, per_file)):
        with (folder / f"part-{part:05d}.jsonl").open("w") as out:
            for offset, record in enumerate(records[start : start + per_file]):
                out.write(json.dumps({ID: start + offset, "text": record["text"]}) + "\n")


def synthetic_records(n: int, scratch: Path) -> list[dict]:
    """``n`` generated texts with planted near-copies (``bench_fuzzy_scale.generate``'s defaults)."""
    import pyarrow.parquet as pq
    from bench_fuzzy_scale import generate

    generate(scratch, n, per_file=20_000, planted=0.1, levels=[0.95, 0.9, 0.8, 0.6, 0.4], seed=0)
    return [{"text": text} for path in sorted(scratch.glob("*.parquet")) for text in pq.read_table(path)["text"].to_pylist()]


def static_model() -> str:
    from beam_curator.models import distill_static_model

    return str(distill_static_model())


def run_workflow(kind: str, inputs: str, work: Path) -> int:
    import pyarrow.parquet as pq

    from beam_curator.workflows import (
        ExactDeduplicationWorkflow,
        FuzzyDeduplicationWorkflow,
        TextSemanticDeduplicationWorkflow,
    )

    common = dict(input_filetype="jsonl", verbose=False)
    if kind == "exact":
        ExactDeduplicationWorkflow(str(work / "out"), inputs, assign_id=False, id_field=ID, **common).run()
        return pq.read_table(work / "out" / "ExactDuplicateIds").num_rows
    if kind == "fuzzy":
        FuzzyDeduplicationWorkflow(cache_path=str(work / "cache"), output_path=str(work / "out"), input_path=inputs,
                                   id_field=ID, **common).run()
        return pq.read_table(work / "out" / "FuzzyDuplicateIds").num_rows
    TextSemanticDeduplicationWorkflow(inputs, str(work / "out"), str(work / "cache"), id_field=ID,
                                      embedding_backend="static", model_identifier=static_model(),
                                      n_clusters=CLUSTERS, eps=EPS, **common).run()
    return pq.read_table(work / "out" / "duplicate_pairs").num_rows


def run_transforms(kind: str, inputs: str, work: Path) -> int:
    import apache_beam as beam
    import pyarrow as pa

    from beam_curator.models import make_embedding_handler
    from beam_curator.runners import pipeline_options
    from beam_curator.transforms import ExactDedup, FuzzyDedup, SemanticDedup

    def semantic() -> SemanticDedup:
        handler = make_embedding_handler("static", static_model())
        return SemanticDedup(handler, id_field=ID, n_clusters=CLUSTERS, eps=EPS)

    with beam.Pipeline(options=pipeline_options("local")) as pipeline:
        documents = pipeline | beam.io.ReadFromText(f"{inputs}/*.jsonl") | beam.Map(json.loads)
        if kind == "chain":
            exact = documents | ExactDedup(id_field=ID)
            fuzzy = exact.kept | FuzzyDedup(id_field=ID)
            last = fuzzy.kept | semantic()
            schema = pa.schema([(ID, pa.int64()), ("text", pa.string())])
            _ = last.kept | "WriteKept" >> beam.io.WriteToParquet(str(work / "kept" / "part"), schema)
            removed = (exact.removed, fuzzy.removed, last.removed) | beam.Flatten()
        else:
            transform = {"exact": lambda: ExactDedup(id_field=ID), "fuzzy": lambda: FuzzyDedup(id_field=ID),
                         "semantic": semantic}[kind]()
            removed = (documents | transform).removed
        _ = (removed | "Ids" >> beam.Map(lambda document: str(document[ID]))
             | "WriteRemoved" >> beam.io.WriteToText(str(work / "removed" / "ids")))
    return sum(len(path.read_text().splitlines()) for path in (work / "removed").glob("ids*"))


def contender(name: str, inputs: str, work: Path) -> None:
    """Run one contender here and print its result (removed, peak RSS) as JSON."""
    kind, _, engine = name.partition("-")
    removed = run_workflow(kind, inputs, work) if engine == "workflow" else run_transforms(kind, inputs, work)
    print(json.dumps({"removed": removed, "rss_gb": peak_rss_kb() / 2**20}))


def peak_rss_kb() -> int:
    """This process's peak RSS since it started (``VmHWM``: getrusage's would
    include the parent's peak, which a forked process inherits) or, if
    larger, that of a child that ended."""
    status = Path("/proc/self/status").read_text()
    own = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def measured(name: str, inputs: Path, work: Path) -> dict:
    """One contender in a process of its own: its wall and CPU seconds, peak RSS and removed count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--contender", name, "--inputs", str(inputs),
                           "--work", str(work / name)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-4000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall": wall, "cpu": cpu, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=63_905, help="documents of the corpus (default: all)")
    parser.add_argument("--synthetic", action="store_true",
                        help="generated documents with planted near-copies instead of the Debian corpus")
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, help="run only these contenders")
    parser.add_argument("--contender", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    add_append_argument(parser)
    args = parser.parse_args(argv)
    if args.contender:
        contender(args.contender, args.inputs, args.work)
        return 0
    machine = machine_description()
    static_model()  # distilled once, outside the timings
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        write_inputs(args.n, work / "input", args.synthetic)
        results = {name: measured(name, work / "input", work) for name in (args.only or CONTENDERS)}
    rows = []
    for kind in ("exact", "fuzzy", "semantic"):
        pair = [results.get(f"{kind}-{engine}") for engine in ("workflow", "transform")]
        for engine, result in zip(("workflow", "transform"), pair):
            if result:
                rows.append([kind, engine, f"{result['wall']:.1f}", f"{result['cpu']:.1f}", f"{result['rss_gb']:.2f}",
                             f"{result['removed']:,}"])
        if all(pair):
            rows.append([kind, "transform / workflow", f"{pair[1]['wall'] / pair[0]['wall']:.2f}×",
                         f"{pair[1]['cpu'] / pair[0]['cpu']:.2f}×", f"{pair[1]['rss_gb'] / pair[0]['rss_gb']:.2f}×", ""])
    if "chain" in results:
        chain = results["chain"]
        rows.append(["exact → fuzzy → semantic", "one pipeline", f"{chain['wall']:.1f}", f"{chain['cpu']:.1f}",
                     f"{chain['rss_gb']:.2f}", f"{chain['removed']:,}"])
    table = markdown_table(["dedup", "contender", "wall s", "CPU s", "peak RSS GB", "removed"], rows)
    corpus = ("generated documents (bench_fuzzy_scale's: Zipf-drawn words, 10% planted near-copies)" if args.synthetic
              else "Debian package descriptions")
    body = f"""{args.n:,} {corpus}, JSONL files of 1,000; each contender a process of its own at the
defaults a user gets on the local runner (semantic: static backend, n_clusters={CLUSTERS}, eps={EPS}).

{table}
"""
    publish(__file__, body, args.append, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
