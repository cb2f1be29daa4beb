"""Benchmark: datatrove 0.10's rule-set filters against ours (``stages.text.filters.datatrove_rules``).

Each contender filters the same Debian package descriptions, one process, one thread: datatrove's
``filter`` per document, and our stage's ``process`` on one batch. Per filter, and for FineWeb's chain
(Gopher repetition, Gopher quality, C4 quality, FineWeb quality): datatrove's four steps in turn
against our ``DatatroveRules`` stage, which splits each text into words once. Before timing, the run
checks that both drop the same documents for the same reasons and leave the same text.

Our English word splitting remembers each whitespace-separated chunk's spaCy tokens; each timed run
starts with that memory empty, so the numbers include learning the corpus's chunks.

    python bench/bench_filters.py                # 2,000 documents
    python bench/bench_filters.py --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, interleaved_timings, load_corpus, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.stages.text.filters import datatrove_rules as ours  # noqa: E402
from beam_curator.stages.text.filters.datatrove_rules import words  # noqa: E402
from beam_curator.tasks import DocumentBatch  # noqa: E402

FILTERS = ["GopherRepetitionFilter", "GopherQualityFilter", "C4QualityFilter", "C4ParagraphFilter",
           "FineWebQualityFilter"]
CHAIN = ["GopherRepetitionFilter", "GopherQualityFilter", "C4QualityFilter", "FineWebQualityFilter"]


def run_datatrove(steps: list, texts: list[str]) -> tuple[list, list]:
    """Each text through datatrove's steps in turn: its reason (None if kept) and its final text."""
    from datatrove.data import Document

    reasons, outputs = [], []
    for index, text in enumerate(texts):
        doc, reason = Document(text=text, id=str(index)), None
        for step in steps:
            result = step.filter(doc)
            if result is not True:
                reason = result[1]
                break
        reasons.append(reason)
        outputs.append(doc.text if reason is None else text)
    return reasons, outputs


def run_ours(stage, texts: list[str]) -> tuple[list, list]:
    words.english().forget()  # start without remembered chunks, as a new worker does
    table = stage.process(DocumentBatch(data=pa.table({"text": texts}))).to_pyarrow().to_pydict()
    return table["reason"], table["text"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    add_append_argument(parser)
    args = parser.parse_args()
    machine = machine_description()
    from datatrove.pipeline import filters as theirs

    texts = [record["text"] for record in load_corpus(args.docs)]
    cases = {name: ([getattr(theirs, name)()], getattr(ours, name)(reason_field="reason")) for name in FILTERS}
    cases["FineWeb chain"] = ([getattr(theirs, name)() for name in CHAIN],
                              ours.DatatroveRules([getattr(ours, name)() for name in CHAIN], reason_field="reason"))
    rows = []
    for case, (steps, stage) in cases.items():
        expected = run_datatrove(steps, texts)
        if run_ours(stage, texts) != expected:
            raise SystemExit(f"{case}: our decisions or texts differ from datatrove's")
        timings = interleaved_timings({"datatrove": lambda: run_datatrove(steps, texts),
                                       "ours": lambda: run_ours(stage, texts)}, args.repeats, warmup=False)
        kept = expected[0].count(None)
        rate = {name: (len(texts) / timing.cpu, len(texts) / timing.wall) for name, timing in timings.items()}
        rows.append([case, f"{kept}/{len(texts)}", f"{rate['datatrove'][0]:,.0f}", f"{rate['ours'][0]:,.0f}",
                     f"{rate['ours'][0] / rate['datatrove'][0]:.1f}x", f"{rate['datatrove'][1]:,.0f}",
                     f"{rate['ours'][1]:,.0f}", "identical"])
        print(rows[-1], flush=True)
    table = markdown_table(["filter", "kept", "datatrove docs/CPU-s", "ours docs/CPU-s", "speed-up",
                            "datatrove docs/wall-s", "ours docs/wall-s", "decisions"], rows)
    body = (f"{len(texts):,} Debian package descriptions, median of {args.repeats} interleaved runs; ours starts each "
            f"run with no remembered word chunks.\n\n{table}")
    publish(__file__, body, args.append, machine)


if __name__ == "__main__":
    main()
