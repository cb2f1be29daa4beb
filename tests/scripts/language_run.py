"""A language-identification run as a user starts it from a shell, for the kill-and-rerun test.

    python language_run.py INPUT OUTPUT CHECKPOINT --log CALLS --delay SECONDS

One file per partition: read, identify, log and wait (``SlowLog``), write. Rerunning the same
command resumes; the last line printed is the run summary as JSON.
"""

from __future__ import annotations

import argparse
import json

from curator_helpers import SlowLog

from beam_curator import Pipeline
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.text.language import LanguageIdentifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--log", required=True, help="file the slow stage appends each task id to")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds the slow stage waits per partition")
    args = parser.parse_args()
    pipeline = Pipeline("languages", stages=[
        JsonlReader(args.input, files_per_partition=1),
        LanguageIdentifier(),
        SlowLog(args.log, args.delay),
        JsonlWriter(args.output),
    ])
    summary = pipeline.run(checkpoint_path=args.checkpoint)
    print(json.dumps({"skipped": summary.partitions_skipped, "completed": summary.partitions_completed}))


if __name__ == "__main__":
    main()
