"""A curation run as a user starts it from a shell, for the interrupt tests.

    python resume_pipeline.py INPUT OUTPUT CHECKPOINT --log CALLS --delay SECONDS [--dask-address tcp://HOST:PORT]
        [--runner NAME --settings JSON] [--fail-once-dir DIR] [--shard INDEX/COUNT]
        [--completion fused|stateful] [--streaming] [--middle fan-out|language|fineweb] [--hold-after N]

Rerunning the same command resumes: complete partitions are skipped. The
last line printed is the run summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging

from curator_helpers import FailOnce, resume_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--log", required=True, help="file the slow stage appends each task id to")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds the slow stage waits per partition")
    parser.add_argument("--dask-address", help="run on the dask scheduler there instead of the local runner")
    parser.add_argument("--runner", default="local", help="a runner preset")
    parser.add_argument("--settings", default="{}", help="the runner's settings, as a JSON object")
    parser.add_argument("--fail-once-dir", help="each partition's first attempt raises (FailOnce)")
    parser.add_argument("--shard", help="only this shard of the partitions: INDEX/COUNT, slurm or slurm/COUNT")
    parser.add_argument("--completion", default="fused", help="where partitions are marked: fused or stateful")
    parser.add_argument("--streaming", action="store_true", help="run in streaming mode (Beam's --streaming)")
    parser.add_argument("--middle", default="fan-out", choices=["fan-out", "language", "fineweb"],
                        help="the stages between reader and writer (curator_helpers.resume_pipeline)")
    parser.add_argument("--hold-after", type=int, help="tasks after the first N wait to be killed (SlowLog)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runner = {"runner": args.runner, **json.loads(args.settings)}
    if args.dask_address:
        runner = {"runner": "dask", "dask_address": args.dask_address}
    pipeline = resume_pipeline(args.input, args.output, args.log, args.delay, args.shard, args.middle, args.hold_after)
    if args.fail_once_dir:
        pipeline.stages.insert(1, FailOnce(args.fail_once_dir))
    summary = pipeline.run(checkpoint_path=args.checkpoint, completion=args.completion,
                           beam_args=["--streaming"] if args.streaming else None, **runner)
    print(json.dumps({
        "pending": summary.partitions_pending,
        "skipped": summary.partitions_skipped,
        "completed": summary.partitions_completed,
    }))


if __name__ == "__main__":
    main()
