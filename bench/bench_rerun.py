"""Benchmark: what a rerun with nothing to do costs (target: under 5 s of wall time).

After one full run of semantic dedup on the bundled sample corpus (614
documents, README settings), each of these runs in a fresh interpreter, in
rotating order (``common.interleaved_timings``), medians of repeats, wall and
CPU time (the child's own, user + system):

1. the command, ``beam-curator semdedup ...``, rerun with nothing to do;
2. the Python API, ``TextSemanticDeduplicationWorkflow(...).run()``, the same;
3. for reference, ``python -c "import X"`` for beam_curator, torch and
   apache_beam (which a rerun still imports: reading its settings and
   checking marks go through the Beam layers).

Every rerun's log is checked to say that each phase had nothing to do, and
the heavy modules it loaded (torch, sentence_transformers, transformers,
vllm, matplotlib, scipy, apache_beam) are listed. ``--baseline DIR`` also
times the reruns of another version's source tree on the same cache, e.g.
``git archive <rev> beam_curator | tar -x -C DIR``.

    python bench/bench_rerun.py
    python bench/bench_rerun.py --repeats 9 --baseline /tmp/before --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, add_append_argument, interleaved_timings, machine_description, markdown_table, publish  # noqa: E402

from beam_curator.data import sample_corpus_path  # noqa: E402

TARGET_S = 5.0
HEAVY = ("torch", "sentence_transformers", "transformers", "vllm", "matplotlib", "scipy", "apache_beam")
# The command writes the input's file type, so the API is told to.
SETTINGS = {"input_filetype": "jsonl", "output_filetype": "jsonl", "n_clusters": 20, "eps": 0.07, "id_field": "doc_id"}
PRINT_HEAVY = f"import json; print(json.dumps(sorted(set({HEAVY!r}) & set(sys.modules))))"
# The console script's own code, then the modules it loaded.
COMMAND = f"import sys; from beam_curator.cli.main import main; code = main(sys.argv[1:]); {PRINT_HEAVY}; sys.exit(code)"
# A user's script: input, output and cache folders and the settings as arguments.
API = (
    "import json, sys\n"
    "from beam_curator import TextSemanticDeduplicationWorkflow\n"
    "from beam_curator.logs import configure_logging\n"
    "configure_logging()\n"
    "TextSemanticDeduplicationWorkflow(*sys.argv[1:4], **json.loads(sys.argv[4])).run()\n"
    f"{PRINT_HEAVY}\n"
)
NOTHING_DONE = ("embedding: inputs and settings unchanged", "k-means: embeddings and settings unchanged",
                "pairwise: results complete", "identification: scores and eps unchanged",
                "removal: inputs and settings unchanged")


def command_args(workdir: Path) -> list[str]:
    return ["semdedup", "--input", str(sample_corpus_path()), "--output", str(workdir / "results"),
            "--cache", str(workdir / "sem_cache"), "--input-filetype", SETTINGS["input_filetype"],
            "--n-clusters", str(SETTINGS["n_clusters"]), "--eps", str(SETTINGS["eps"]), "--id-field", SETTINGS["id_field"]]


def python(code: str, *args: str, source: Path = REPO) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that imports beam_curator from ``source``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(source)}
    # -c puts the working folder first on sys.path: run in ``source`` so that it is what is imported.
    finished = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=source)
    if finished.returncode:
        raise RuntimeError(f"{code.splitlines()[0]} ... failed:\n{finished.stderr[-3000:]}")
    return finished


def rerun(code: str, args: list[str], source: Path, loaded: dict[str, list[str]], name: str) -> Callable[[], None]:
    """A contender: one rerun, checked to have done nothing; ``loaded[name]`` gets its heavy modules."""
    def run() -> None:
        finished = python(code, *args, source=source)
        missing = [line for line in NOTHING_DONE if line not in finished.stderr]
        if missing or "partitions pending" in finished.stderr:
            raise RuntimeError(f"{name} did work (no {missing or 'skip of every partition'}):\n{finished.stderr[-3000:]}")
        loaded[name] = json.loads(finished.stdout.strip().splitlines()[-1])
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each after a warm-up; medians are reported")
    parser.add_argument("--baseline", type=Path, help="another version's source tree (holding beam_curator/) to time beside")
    parser.add_argument("--workdir", type=Path,
                        help="keep the first run's results and cache here (reused when present; default: a temp folder)")
    add_append_argument(parser)
    args = parser.parse_args(argv)

    machine = machine_description()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-rerun-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"first run (embeds the sample unless {workdir} already holds it)...", file=sys.stderr)
        python(COMMAND, *command_args(workdir))
        api_args = [str(sample_corpus_path()), str(workdir / "results"), str(workdir / "sem_cache"), json.dumps(SETTINGS)]
        loaded: dict[str, list[str]] = {}
        versions = {"": REPO, **({" (baseline)": args.baseline.resolve()} if args.baseline else {})}
        contenders: dict[str, Callable[[], object]] = {}
        for suffix, source in versions.items():
            contenders[f"command rerun{suffix}"] = rerun(COMMAND, command_args(workdir), source, loaded, f"command rerun{suffix}")
            contenders[f"API rerun{suffix}"] = rerun(API, api_args, source, loaded, f"API rerun{suffix}")
        for module in ("beam_curator", "torch", "apache_beam"):
            contenders[f'python -c "import {module}"'] = lambda module=module: python(f"import {module}")
        timings = interleaved_timings(contenders, args.repeats)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    def heavy(name: str) -> str:
        return (", ".join(loaded[name]) or "none") if name in loaded else "-"

    rows = [[name, f"{t.wall:.2f}", f"{t.cpu:.2f}", f"{t.wall / TARGET_S:.2f}", heavy(name)] for name, t in timings.items()]
    table = markdown_table(["fresh interpreter", "wall s", "CPU s", f"wall / {TARGET_S:g} s target", "heavy modules loaded"],
                           rows, align="lrrrl")
    body = (
        f"No-op rerun of semantic dedup on the bundled sample (614 documents, n_clusters={SETTINGS['n_clusters']}, "
        f"eps={SETTINGS['eps']}) after one full run; every rerun's log says each phase had nothing to do. "
        f"Median of {args.repeats} in rotating order; CPU = the child process's user + system time. "
        f"Heavy modules checked: {', '.join(HEAVY)}."
        f"{f' Baseline: {args.baseline}.' if args.baseline else ''}\n\n{table}\n"
    )
    publish(__file__, body, args.append, machine)
    worst = max(timings[name].wall for name in ("command rerun", "API rerun"))
    print(f"slowest no-op rerun: {worst:.2f} s, {worst / TARGET_S:.2f} of the {TARGET_S:g} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
