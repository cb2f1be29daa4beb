"""The ``beam-curator`` command: checkpoint status/reset and semdedup.

Checkpoint writers are separate processes (``semdedup_checkpoint_writer.py``),
as in a real run: the store's files and locks belong to them, not to the
process running the command.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import SCRIPTS_DIR, jsonl_rows, short_notes, write_jsonl  # noqa: E402

from beam_curator.checkpoint.store import METADATA_DIR  # noqa: E402
import beam_curator  # noqa: E402
from beam_curator.cli.main import build_parser, main  # noqa: E402

WRITER = str(SCRIPTS_DIR / "semdedup_checkpoint_writer.py")


def write_marks(path: Path, complete: int, half_source: str = "-") -> None:
    subprocess.run([sys.executable, WRITER, str(path), str(complete), half_source], check=True, timeout=60)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """Two finished writers: 3 partitions complete in one, a fourth completed by
    half credits from each, and an unreadable writer file beside them."""
    path = tmp_path / "ckpt"
    write_marks(path, 3, "shared")
    write_marks(path, 0, "shared")
    (path / METADATA_DIR / "crashed-host-1.mdb").write_bytes(b"not an lmdb file")
    return path


@pytest.fixture
def live_writer(checkpoint: Path) -> Iterator[subprocess.Popen]:
    """A writer that holds its lock until the test ends."""
    process = subprocess.Popen([sys.executable, WRITER, str(checkpoint), "1", "-", "120"], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    yield process
    process.kill()
    process.wait(timeout=30)


def status_lines(capsys: pytest.CaptureFixture, path: Path) -> list[str]:
    assert main(["checkpoint", "status", str(path)]) == 0
    return [line.strip() for line in capsys.readouterr().out.splitlines()]


def test_status_shows_completed_partitions_writer_files_and_unreadable_files(checkpoint: Path, capsys) -> None:
    lines = status_lines(capsys, checkpoint)
    writers = sorted(str(p) for p in (checkpoint / METADATA_DIR).glob("*.mdb"))
    assert lines[0] == f"checkpoint {checkpoint}"
    assert "completed partitions: 4" in lines
    assert "writer files: 3" in lines and all(file in lines for file in writers)
    unreadable = lines.index("unreadable files: 1")
    assert lines[unreadable + 1] == str(checkpoint / METADATA_DIR / "crashed-host-1.mdb")
    assert not any(line.startswith("live writers") for line in lines)


def test_reset_forgets_every_mark(checkpoint: Path, capsys) -> None:
    assert main(["checkpoint", "reset", str(checkpoint)]) == 0
    assert f"checkpoint {checkpoint} reset" in capsys.readouterr().out
    assert not (checkpoint / METADATA_DIR).exists()
    assert "completed partitions: 0" in status_lines(capsys, checkpoint)


def test_reset_refuses_while_a_writer_lives_unless_forced(checkpoint: Path, live_writer, capsys) -> None:
    lines = status_lines(capsys, checkpoint)
    assert any(line.startswith("live writers:") and f"-{live_writer.pid}.mdb" in line for line in lines)

    assert main(["checkpoint", "reset", str(checkpoint)]) == 1
    error = capsys.readouterr().err
    assert "is in use by running writers" in error and f"-{live_writer.pid}.mdb" in error and "--force" in error
    assert "completed partitions: 4" in status_lines(capsys, checkpoint)

    assert main(["checkpoint", "reset", str(checkpoint), "--force"]) == 0
    assert not (checkpoint / METADATA_DIR).exists()
    assert "completed partitions: 0" in status_lines(capsys, checkpoint)


def test_the_console_script_runs_the_same_command(checkpoint: Path) -> None:
    script = Path(sys.executable).parent / "beam-curator"
    result = subprocess.run([str(script), "checkpoint", "status", str(checkpoint)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "completed partitions: 4" in result.stdout and "unreadable files: 1" in result.stdout


def test_semdedup_deduplicates_tiny_data_and_prints_a_summary(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = short_notes()
    rows += [{"doc_id": "copy-1", "text": rows[1]["text"]}, {"doc_id": "copy-5", "text": rows[5]["text"]}]
    write_jsonl(tmp_path / "input" / "part-0.jsonl", rows[:5])
    write_jsonl(tmp_path / "input" / "part-1.jsonl", rows[5:])
    common = [
        "semdedup", "--input", str(tmp_path / "input"), "--cache", str(tmp_path / "cache"),
        "--embedding-backend", "sentence-transformers", "--id-field", "doc_id", "--n-clusters", "2", "--runner", "local",
    ]
    # Raw Beam flags after -- reach Beam (an unknown one would make Beam fail).
    code = main([*common, "--output", str(tmp_path / "output"), "--eps", "0.01", "--", "--direct_runner_bundle_repeat=0"])
    assert code == 0
    summary = summary_rows(capsys.readouterr().out)
    duplicates = pd.read_parquet(tmp_path / "output" / "duplicate_pairs" / "duplicate_pairs.parquet")
    assert len(duplicates) == 2 and {frozenset(pair) for pair in duplicates[["id", "max_id"]].values} == {
        frozenset({"d1", "copy-1"}), frozenset({"d5", "copy-5"})}
    assert summary["documents in"] == "10" and summary["duplicates"] == "2 at eps 0.01"
    assert summary["removed"] == "2" and summary["kept"] == "8"
    assert summary["clean data"] == str(tmp_path / "output" / "deduplicated")
    phases = dict(part.rsplit(" ", 1) for part in summary["time (s)"].split(", "))
    assert {"embedding", "kmeans", "pairwise", "removal", "total"} <= set(phases) and float(phases["total"]) > 0
    kept = [row for file in (tmp_path / "output" / "deduplicated").glob("*.jsonl") for row in jsonl_rows(file)]
    assert len(kept) == 8 and {row["text"] for row in kept} == {row["text"] for row in rows}

    # The embedding phase's checkpoint is in a subfolder named by its settings: status reports what is in it.
    embedding = tmp_path / "cache" / "checkpoints" / "embedding"
    lines = status_lines(capsys, embedding)
    assert lines[0].startswith(f"{embedding} holds no checkpoint marks of its own; it stands for the 1 checkpoint(s)")
    [settings] = [folder for folder in embedding.iterdir() if folder.is_dir()]
    assert lines[1] == f"checkpoint {settings}" and "completed partitions: 2" in lines, lines

    # Only eps changed: embedding, k-means and pairwise are reused, so the time row does not list them.
    assert main([*common, "--output", str(tmp_path / "output"), "--eps", "0.02"]) == 0
    rerun = summary_rows(capsys.readouterr().out)
    timed = {part.rsplit(" ", 1)[0] for part in rerun["time (s)"].split(", ")}
    assert rerun["this run"].startswith("ran ") and "embedding" not in rerun["this run"], rerun
    assert "identification" in timed and not timed & {"embedding", "kmeans", "pairwise"}, rerun["time (s)"]

    # Without --eps: the eps table is printed, rounded, beside the paths of the CSV and the plot.
    assert main([*common, "--output", str(tmp_path / "analysis-only")]) == 0
    out = capsys.readouterr().out
    analysis = tmp_path / "analysis-only" / "analysis"
    assert f"({analysis}/eps_table.csv, plot: {analysis}/similarity.png)" in out
    table = out.split("similarity.png)")[1].splitlines()
    assert table[1].split() == ["eps", "threshold", "duplicates", "share"]
    assert table[9].split()[:3] == ["0.07", "0.93", "2"] and table[9].split()[3].endswith("%")
    assert "0.9299999999999999" not in out and "0.9299999999999999" not in (analysis / "eps_table.csv").read_text()
    assert summary_rows(out)["duplicates"].startswith("not identified")


def summary_rows(out: str, title: str = "semantic deduplication summary") -> dict[str, str]:
    """The ``name   value`` rows of the printed summary."""
    block = out.split(title)[1].split("\n\n")[0]
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in block.splitlines() if line.strip())


def test_a_misspelt_option_is_an_error_naming_the_closest(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["semdedup", "--input", "in", "--output", "out", "--cache", "c", "--epss", "0.05"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--epss (did you mean --eps?)" in error and "after --" in error
    with pytest.raises(SystemExit):
        main(["semdedup", "--input", "in", "--output", "out", "--cache", "c", "--n-cluster", "5"])
    assert "did you mean --n-clusters" in capsys.readouterr().err, "no prefix matching either"


def test_version_shows_the_torch_build_and_the_engines_as_getting_started_says(capsys) -> None:
    from beam_curator.cli.install import ENGINES

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    lines = capsys.readouterr().out.splitlines()
    assert exit_info.value.code == 0 and lines[0] == f"beam-curator {beam_curator.__version__}"
    assert lines[1] == f"apache-beam {metadata.version('apache-beam')}"
    assert lines[2].startswith(f"torch {metadata.version('torch')}"), lines
    assert re.fullmatch(r"torch \S+ \((CUDA \S+|ROCm \S+|CPU only)\)", lines[2]), lines[2]
    engines = lines[3]
    assert engines.startswith("engines: ") and f"sentence-transformers {metadata.version('sentence-transformers')}" in engines
    for engine in ENGINES:  # each named once: installed with its version, or among those not installed
        assert len(re.findall(rf"\b{re.escape(engine)}\b", engines)) == 1, (engine, engines)
    # The page shows the same lines, in the same order.
    page = (Path(__file__).parents[1] / "docs" / "getting-started.md").read_text()
    shown = page.split("beam-curator --version\n```")[1].split("```text\n")[1].split("```")[0].splitlines()
    assert [line.split()[0] for line in shown] == [line.split()[0] for line in lines] == [
        "beam-curator", "apache-beam", "torch", "engines:"]
    # Cheap: nothing it reports on is imported.
    loaded = subprocess.run([sys.executable, "-c", "import sys\nfrom beam_curator.cli.main import main\ntry:\n main(['--version'])\n"
                             "except SystemExit:\n print(sorted(m for m in sys.modules if m.split('.')[0] in "
                             "('torch', 'onnxruntime', 'openvino', 'model2vec', 'sentence_transformers', 'vllm')))"],
                            capture_output=True, text=True, timeout=120)
    assert loaded.stdout.splitlines()[-1] == "[]", loaded.stdout + loaded.stderr


def test_version_and_help_with_every_default(capsys) -> None:
    parser = build_parser()
    for command, sub in parser._subparsers._group_actions[0].choices.items():
        help_text = " ".join(sub.format_help().split())
        unwrapped = "".join(help_text.split())  # argparse also wraps lines after a hyphen
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{command} {action.option_strings or action.dest} has no help"
            if action.option_strings and not action.required:  # required ones have no default
                shown = " ".join(sub._get_formatter()._get_help_string(action).split()) % {"default": action.default}
                assert "".join(shown.split()) in unwrapped and "default" in shown, f"{command} {action.option_strings}: {shown}"
    sem_help = " ".join(parser._subparsers._group_actions[0].choices["semdedup"].format_help().split())
    assert "k-means clusters (default: 100)" in sem_help and "(default: unset)" in sem_help
    # The command list and positional arguments are always given: no default beside them.
    top_help = " ".join(parser.format_help().split())
    assert "(default: unset)" not in top_help and "default" not in top_help.split("options:")[0], top_help
    assert "--quiet warnings and errors only: no progress bars, no summary logs (default: off)" in top_help
    checkpoint_help = " ".join(parser._subparsers._group_actions[0].choices["checkpoint"].format_help().split())
    assert "(default: unset)" not in checkpoint_help.split("options:")[0], checkpoint_help


SITE_HOOKS = '''\
import atexit
import sys


class Finalised:
    def __del__(self):
        sys.stdout.write("interpreter finalised\\n")
        sys.stdout.flush()


kept = Finalised()
atexit.register(print, "exit handlers ran", flush=True)
'''


@pytest.mark.parametrize("state", ["complete", "missing"])
def test_the_command_runs_its_exit_handlers_and_leaves_without_finalising_the_interpreter(
    tmp_path: Path, checkpoint: Path, state: str,
) -> None:
    """Arrow's and gRPC's threads can abort the finalisation of an interpreter that ran a full
    job (SIGABRT, 4% of short runs measured here); the executable leaves before it, with its
    status, once the exit handlers (which stop job servers and clusters) have run. A module
    that sitecustomize loads into the real executable shows both."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITE_HOOKS)
    path = checkpoint if state == "complete" else tmp_path / "nowhere"
    done = subprocess.run([str(Path(sys.executable).parent / "beam-curator"), "checkpoint", "status", str(path)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == (0 if state == "complete" else 2), done.stderr[-2000:]
    assert done.stdout.rstrip().splitlines()[-1] == "exit handlers ran"
    assert "interpreter finalised" not in done.stdout
    same = subprocess.run([sys.executable, "-c", "import sys; from beam_curator.cli.main import main; sys.exit(main())",
                           "checkpoint", "status", str(path)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert same.returncode == done.returncode and "interpreter finalised" in same.stdout, "the hooks show a finalisation"


def parse_error(capsys: pytest.CaptureFixture, argv: list[str]) -> list[str]:
    """The lines the command prints on stderr for arguments it refuses (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("argv, problem", [
    (["fuzzy", "--input", "in", "--output", "out", "--num-band", "4"],
     "unrecognized arguments: --num-band (did you mean --num-bands?)"),
    (["fuzzy", "--input", "in", "--outptu", "out"], "unrecognized arguments: --outptu (did you mean --output?)"),
    (["exact", "--input", "in"], "the following arguments are required: --output"),
    (["fuzzy", "--input", "in", "--output", "out", "--num-bands", "many"], "argument --num-bands: invalid int value: 'many'"),
], ids=["misspelt", "misspelt-required", "missing", "bad-value"])
def test_a_refused_argument_is_a_short_error_not_the_usage(capsys, argv: list[str], problem: str) -> None:
    lines = parse_error(capsys, argv)
    command = argv[0]
    assert len(lines) <= 2, lines
    assert lines[0].startswith(f"beam-curator {command}: error: {problem}")
    assert lines[-1] == f"see `beam-curator {command} --help` for every option"
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "usage: beam-curator" in capsys.readouterr().out, "--help still prints the full usage"


@pytest.mark.parametrize("argv, problem", [
    (["fuzzy", "--num-bands", "0"], "num_bands (--num-bands) must be a positive integer, got 0"),
    (["fuzzy", "--minhashes-per-band", "-1"], "minhashes_per_band (--minhashes-per-band) must be a positive integer, got -1"),
    (["fuzzy", "--char-ngrams", "0"], "char_ngrams (--char-ngrams) must be a positive integer, got 0"),
    (["fuzzy", "--lsh-num-output-partitions", "0"],
     "lsh_num_output_partitions (--lsh-num-output-partitions) must be a positive integer, got 0"),
    (["fuzzy", "--bands-per-iteration", "0"], "bands_per_iteration (--bands-per-iteration) must be between [1, num_bands"),
    (["exact", "--files-per-partition", "0"], "files_per_partition (--files-per-partition) must be a positive integer, got 0"),
    (["exact", "--worker-start-timeout", "-1"], "worker_start_timeout (--worker-start-timeout) must be a number of seconds above 0"),
    (["semdedup", "--embedding-batch-size", "0"], "embedding_batch_size (--embedding-batch-size) must be a positive integer"),
    (["semdedup", "--kmeans-max-sample-bytes", "0"], "kmeans_max_sample_bytes (--kmeans-max-sample-bytes) must be a positive"),
    (["semdedup", "--kmeans-tol", "-1"], "kmeans_tol (--kmeans-tol) must be 0 or more, got -1.0"),
    (["semdedup", "--cross-cluster-margin", "-0.5"], "cross_cluster_margin (--cross-cluster-margin) must be 0 or more"),
], ids=lambda value: value[1] if isinstance(value, list) else None)
def test_a_count_of_zero_or_less_is_refused_by_its_own_flag_before_any_work(
    tmp_path: Path, capsys, argv: list[str], problem: str,
) -> None:
    from beam_curator.data import sample_corpus_path

    command, *setting = argv
    data = ["--input", sample_corpus_path(), "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]
    backend = ["--embedding-backend", "sentence-transformers"] if command == "semdedup" else []
    assert main([command, *data, *backend, *setting]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {problem}"), error
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("command, options, title", [
    ("exact", [], "exact deduplication summary"),
    ("exact", ["--no-removal"], "exact deduplication summary"),
    ("fuzzy", [], "fuzzy deduplication summary"),
    ("semdedup", ["--embedding-backend", "sentence-transformers", "--n-clusters", "2", "--eps", "0.01"],
     "semantic deduplication summary"),
], ids=["exact", "exact-no-removal", "fuzzy", "semdedup"])
def test_a_skipped_bad_record_is_counted_as_skipped_not_as_removed(
    tmp_path: Path, capsys, monkeypatch, command: str, options: list[str], title: str,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = short_notes()
    rows += [{"doc_id": "copy-1", "text": rows[1]["text"]}]
    write_jsonl(tmp_path / "input" / "part-0.jsonl", rows[:5])
    bad = write_jsonl(tmp_path / "input" / "part-1.jsonl", rows[5:])
    with bad.open("a") as handle:
        handle.write('{"doc_id": "cut", "text": "cut off\n')
    assert main([command, "--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--id-field", "doc_id",
                 "--on-bad-record", "skip", *options]) == 0
    summary = summary_rows(capsys.readouterr().out, title)
    assert summary["documents in"] == str(len(rows))
    assert summary["skipped"].startswith("1 bad record(s), not among the documents in") and "logged" in summary["skipped"]
    if "--no-removal" in options:
        assert summary["removed"] == "nothing (--no-removal)"
    else:
        assert (summary["removed"], summary["kept"]) == ("1", str(len(rows) - 1))


def test_a_folder_of_settings_checkpoints_stands_for_them_in_status_and_reset(tmp_path: Path, capsys) -> None:
    phase = tmp_path / "checkpoints" / "embedding"
    write_marks(phase / "0123456789abcdef", 3)
    write_marks(phase / "fedcba9876543210", 1)
    lines = status_lines(capsys, phase)
    assert "it stands for the 2 checkpoint(s)" in lines[0]
    assert [line for line in lines if line.startswith("checkpoint ")] == [
        f"checkpoint {phase / '0123456789abcdef'}", f"checkpoint {phase / 'fedcba9876543210'}"]
    assert [line for line in lines if line.startswith("completed")] == ["completed partitions: 3", "completed partitions: 1"]

    assert main(["checkpoint", "reset", str(tmp_path / "checkpoints")]) == 0
    out = capsys.readouterr().out
    assert f"checkpoint {phase / '0123456789abcdef'} reset" in out and f"checkpoint {phase / 'fedcba9876543210'} reset" in out
    assert not list(phase.glob(f"*/{METADATA_DIR}"))
