"""A resumable pipeline: interrupt it (Ctrl+C) and run the same command again.

    python examples/resume_demo.py [--input DIR] [--output DIR] [--runner local]

Reads JSONL files one partition per file, cleans whitespace and drops very
short documents in a deliberately slow stage, and writes one output file per
partition. Partitions that finished before an interruption are skipped on
the next run; nothing finished is redone and nothing is lost.
"""

from __future__ import annotations

import argparse
import time

from beam_curator.data import sample_corpus_path
from beam_curator.stages import ProcessingStage
from beam_curator.logs import configure_logging
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.tasks import DocumentBatch


class CleanText(ProcessingStage):
    """Collapses whitespace and drops documents shorter than ``min_chars``."""

    name = "clean_text"

    def __init__(self, min_chars: int = 80, seconds_per_batch: float = 1.0) -> None:
        self.min_chars = min_chars
        self.seconds_per_batch = seconds_per_batch

    def process(self, task: DocumentBatch) -> DocumentBatch | None:
        time.sleep(self.seconds_per_batch)  # stands in for real work, so there is time to interrupt
        frame = task.to_pandas()
        frame["text"] = frame["text"].str.split().str.join(" ")
        frame = frame[frame["text"].str.len() >= self.min_chars]
        return DocumentBatch(data=frame) if len(frame) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=sample_corpus_path())
    parser.add_argument("--output", default="demo_output/resume")
    parser.add_argument("--runner", default="local")
    parser.add_argument("--seconds-per-batch", type=float, default=1.0)
    args = parser.parse_args()
    configure_logging()
    from beam_curator import Pipeline  # imports Apache Beam: after logging is set up, which filters its notes

    pipeline = Pipeline(name="resume-demo")
    pipeline.add_stage(JsonlReader(file_paths=args.input, files_per_partition=1, fields=["doc_id", "text"]))
    pipeline.add_stage(CleanText(seconds_per_batch=args.seconds_per_batch))
    pipeline.add_stage(JsonlWriter(path=f"{args.output}/data"))
    print(pipeline.describe())
    summary = pipeline.run(checkpoint_path=f"{args.output}/checkpoints", runner=args.runner)
    print(summary)


if __name__ == "__main__":
    main()
