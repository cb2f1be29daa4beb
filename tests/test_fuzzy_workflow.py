"""Fuzzy deduplication: NeMo Curator's facts, planted near-copies against brute
force, reruns, a killed run, the command, and the runners giving one answer."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from beam_curator.cli.main import main
from beam_curator.workflows import FuzzyDeduplicationWorkflow
from beam_curator.workflows.fuzzy.workflow import PHASES
from stages_for_tests import kill_in_phase_and_resume, killed_on_a_runner_and_resumed

GENERATED = "_curator_dedup_id"
GROUP = "_duplicate_group_id"


# NeMo Curator's tests/stages/deduplication/fuzzy/test_fuzzy_workflow.py

def nemo_data(folder: Path, filetype: str, no_duplicates: bool = False) -> list[Path]:
    folder.mkdir()
    if no_duplicates:
        texts = ["A test string", "Very different thing", "Something completely else that doesn't match",
                 "The quick black cat jumps over the lazy dog"]
        frame, split = pd.DataFrame({"id": [1, 2, 3, 4], "text": texts}), 2
    else:
        texts = ["A test string", "A different test string", "A different object",
                 "The quick brown fox jumps over the lazy dog", "The quick black cat jumps over the lazy dog"]
        frame, split = pd.DataFrame({"id": [1, 2, 300, 4, -1], "text": texts, "content": texts}), 3
    files = [folder / f"part1.{filetype}", folder / f"part2.{filetype}"]
    for part, path in zip((frame.iloc[:split], frame.iloc[split:]), files):
        part.to_parquet(path) if filetype == "parquet" else part.to_json(path, orient="records", lines=True)
    return files


def with_original_ids(output: Path, files: list[Path], filetype: str) -> pd.DataFrame:
    """NeMo's helper: the id generator's range of each file numbers its rows."""
    state = json.loads((output / "fuzzy_id_generator.json").read_text())
    frames = []
    for path in files:
        low, high = state["batch_registry"][str(uuid.uuid5(uuid.NAMESPACE_URL, str(path)))]
        frame = pd.read_parquet(path) if filetype == "parquet" else pd.read_json(path, lines=True)
        frames.append(frame.assign(**{GENERATED: np.arange(low, high + 1)}))
    return pd.concat(frames)


@pytest.mark.parametrize("use_64_bit_hash", [False, True])
@pytest.mark.parametrize(("num_bands", "text_field", "filetype", "partitions"),
                         [(5, "text", "parquet", 4), (10, "content", "jsonl", None)])
def test_nemo_fuzzy_dedup_groups_and_removal_ids(tmp_path: Path, use_64_bit_hash: bool, num_bands: int,
                                                 text_field: str, filetype: str, partitions: int | None) -> None:
    files = nemo_data(tmp_path / "input", filetype)
    cache, output = tmp_path / "cache", tmp_path / "output"
    result = FuzzyDeduplicationWorkflow(
        cache_path=str(cache), output_path=str(output), input_path=str(tmp_path / "input"), input_filetype=filetype,
        text_field=text_field, seed=42, char_ngrams=5, num_bands=num_bands, minhashes_per_band=1,
        use_64_bit_hash=use_64_bit_hash, bands_per_iteration=5, lsh_num_output_partitions=partitions,
    ).run().metadata
    assert result["total_time"] > 0 and result["connected_components_time"] > 0
    originals = with_original_ids(output, files, filetype)
    components = pd.read_parquet(cache / "ConnectedComponentsStage").merge(originals, on=GENERATED, how="left")
    groups = sorted(sorted(group) for group in components.groupby(GROUP)["id"].agg(list))
    assert groups == [[-1, 4], [1, 2, 300]]
    if partitions is not None:
        for first in range(0, num_bands, 5):
            band_dir = cache / "LSHStage" / f"band_{first}-band_{min(first + 5, num_bands)}"
            assert len(list(band_dir.glob("*.parquet"))) == partitions
    removal = pd.read_parquet(output / "FuzzyDuplicateIds")
    assert list(removal.columns) == [GENERATED]
    removed = set(removal.merge(originals, on=GENERATED, how="left")["id"])
    assert all(len(set(group) - removed) == 1 for group in groups)
    assert result["num_duplicates"] == len(removed) == 3


def test_nemo_no_duplicates_writes_no_groups(tmp_path: Path) -> None:
    nemo_data(tmp_path / "input", "parquet", no_duplicates=True)
    cache, output = tmp_path / "cache", tmp_path / "output"
    result = FuzzyDeduplicationWorkflow(str(cache), str(output), str(tmp_path / "input"), char_ngrams=5, num_bands=10,
                                        minhashes_per_band=1, bands_per_iteration=10).run().metadata
    assert result["num_duplicates"] == 0 and result["total_time"] > 0
    assert not (cache / "ConnectedComponentsStage").exists() and not (cache / "BucketsToEdgesStage").exists()
    assert not (output / "FuzzyDuplicateIds").exists()
    assert len(pd.read_parquet(cache / "LSHStage")) == 0


def test_nemo_bad_inputs(tmp_path: Path) -> None:
    for bad in ({"bands_per_iteration": 0}, {"num_bands": 5, "bands_per_iteration": 10}):
        with pytest.raises(ValueError, match=r"bands_per_iteration must be between"):
            FuzzyDeduplicationWorkflow(str(tmp_path), str(tmp_path), "/dummy", **bad)
    with pytest.raises(ValueError, match="input_path to the dataset must be provided"):
        FuzzyDeduplicationWorkflow(cache_path=str(tmp_path), output_path=str(tmp_path)).run()
    jsonl = FuzzyDeduplicationWorkflow(str(tmp_path), str(tmp_path), "/dummy", input_filetype="jsonl")
    assert {".jsonl", ".json"} <= set(jsonl.input_extensions)  # NeMo's, and compressed ones
    assert FuzzyDeduplicationWorkflow(str(tmp_path), str(tmp_path), "/dummy",
                                      input_file_extensions=[".pq"]).input_extensions == (".pq",)


# Planted near-copies against brute force, reruns, a killed run.

def write_corpus(folder: Path, files: int, per_file: int, seed: int = 0) -> dict[str, str]:
    """Random texts; every third document a copy of an earlier one (across
    files too) with at most one character changed: 24-gram Jaccard
    similarity 0.92 or more, where LSH at NeMo's defaults misses a pair
    with probability 3e-4; returns text by id."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    folder.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    for number in range(files):
        rows = []
        for row in range(per_file):
            if texts and row % 3 == 2:
                copy = np.array(list(texts[rng.choice(sorted(texts))]))
                copy[rng.integers(0, len(copy), rng.integers(0, 2))] = "#"
                text = "".join(copy)
            else:
                text = "".join(rng.choice(letters, 600))
            texts[f"f{number}r{row}"] = text
            rows.append({"doc_id": f"f{number}r{row}", "text": text})
        (folder / f"part{number}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return texts


def removed(output: Path) -> list[str]:
    return sorted(pd.read_parquet(output / "FuzzyDuplicateIds")["doc_id"])


def expected(texts: dict[str, str]) -> list[str]:
    """Brute force: groups of documents joined by 24-gram Jaccard >= 0.8, all but the least id of each."""
    grams = {key: {text[i:i + 24] for i in range(len(text) - 23)} for key, text in texts.items()}
    keys = sorted(texts)
    parent = {key: key for key in keys}

    def root(key: str) -> str:
        while parent[key] != key:
            key = parent[key]
        return key

    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if len(grams[a] & grams[b]) / len(grams[a] | grams[b]) >= 0.8:
                low, high = sorted((root(a), root(b)))
                parent[high] = low
    return sorted(key for key in keys if root(key) != key)


def fuzzy(tmp_path: Path, name: str = "out", **settings: object) -> dict:
    settings = {"input_filetype": "jsonl", "id_field": "doc_id", **settings}
    return FuzzyDeduplicationWorkflow(str(tmp_path / name), str(tmp_path / name), str(tmp_path / "input"),
                                      **settings).run().metadata


def test_planted_near_copies_match_brute_force_and_are_removed(tmp_path: Path) -> None:
    texts = write_corpus(tmp_path / "input", files=4, per_file=30)
    metadata = fuzzy(tmp_path, perform_removal=True)
    assert removed(tmp_path / "out") == expected(texts) and metadata["num_duplicates"] == 40
    assert metadata["phases_run"] == ["minhash", "lsh", "edges", "connected_components", "identification", "removal"]
    kept = pd.concat(pd.read_json(path, lines=True) for path in (tmp_path / "out" / "deduplicated").glob("*.jsonl"))
    assert len(kept) == 80 and not set(kept["doc_id"]) & set(expected(texts))
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "out").rglob("*") if path.is_file()}
    again = fuzzy(tmp_path, perform_removal=True)
    assert again["phases_run"] == [] and again["num_duplicates"] == 40
    assert {path: path.stat().st_mtime_ns for path in written} == written, "a rerun with nothing to do wrote"
    signatures = tmp_path / "out" / "MinHashStage"
    before = {path.name: path.stat().st_mtime_ns for path in signatures.glob("*.parquet")}
    (tmp_path / "input" / "part3.jsonl").unlink()
    changed = fuzzy(tmp_path, perform_removal=True)
    after = {path.name: path.stat().st_mtime_ns for path in signatures.glob("*.parquet")}
    assert after == {name: time for name, time in before.items() if not name.startswith("part3")}
    fuzzy(tmp_path, "fresh")
    assert removed(tmp_path / "out") == removed(tmp_path / "fresh") and changed["num_duplicates"] < 40


KILLED_RUN = "FuzzyDeduplicationWorkflow(sys.argv[1], sys.argv[1], sys.argv[2], input_filetype='jsonl', id_field='doc_id')"
KILLED_IN_LSH = ("lsh", "LSHStage/*/[!.]*.parquet", 1)
KILLED_IN_EACH_PHASE = [  # one after another, each run resuming the one before
    ("minhash", "MinHashStage/[!.]*.parquet", 1),
    KILLED_IN_LSH,
    ("edges", "BucketsToEdgesStage/*/[!.]*.parquet", 1),
    ("connected_components", "ConnectedComponentsStage/[!.]*.parquet", 1),
    ("identification", "FuzzyDuplicateIds/[!.]*.parquet", 1),
]


@pytest.mark.parametrize(("phase", "outputs", "at"), [
    ("minhash", "MinHashStage/[!.]*.parquet", 3),
    ("lsh", "fuzzy/band_keys/[!.]*.parquet", 1),
    ("lsh", "LSHStage/*/[!.]*.parquet", 1),
    ("edges", "BucketsToEdgesStage/*/[!.]*.parquet", 1),
    ("connected_components", "ConnectedComponentsStage/[!.]*.parquet", 1),
    ("identification", "FuzzyDuplicateIds/[!.]*.parquet", 1),
])
def test_a_run_killed_in_each_phase_resumes_and_matches_a_fresh_run(tmp_path: Path, phase: str, outputs: str,
                                                                     at: int) -> None:
    """The rerun starts in the killed phase, or in the next where the kill
    came after the phase's last write (connected components in memory write
    their one file and are marked done at once, so that kill lands after;
    the next test kills inside them), and ends where a fresh run ends."""
    texts = write_corpus(tmp_path / "input", files=40, per_file=3)
    phases_run = kill_in_phase_and_resume(tmp_path, KILLED_RUN, outputs, at,
                                          lambda name: fuzzy(tmp_path, name, perform_removal=True), perform_removal=True)
    later = list(PHASES[PHASES.index(phase):])
    assert phases_run in (later, later[1:]), phases_run
    assert removed(tmp_path / "out") == removed(tmp_path / "fresh") == expected(texts)


def test_a_run_killed_in_a_star_round_resumes_from_that_round(tmp_path: Path, monkeypatch) -> None:
    """Connected components forced onto Beam (as in the star-rounds test
    below) in the killed run and its rerun, which starts in round 1 or 2,
    not before; the fresh run finds them in memory (that test shows both
    paths agree), to keep this one short."""
    from beam_curator.workflows.fuzzy import workflow

    def run(name: str) -> dict:
        with monkeypatch.context() as patch:
            if name == "out":
                patch.setattr(workflow, "RECORDS_PER_PARTITION", 100)
                return fuzzy(tmp_path, name, perform_removal=True, in_memory_components_bytes=0)
            return fuzzy(tmp_path, name, perform_removal=True)

    texts = write_corpus(tmp_path / "input", files=3, per_file=12)
    setup = "import beam_curator.workflows.fuzzy.workflow as w; w.RECORDS_PER_PARTITION = 100"
    phases_run = kill_in_phase_and_resume(tmp_path, KILLED_RUN, "fuzzy/star_rounds/round_1/[!.]*", 1, run, setup,
                                          perform_removal=True, in_memory_components_bytes=0)
    assert phases_run[0] in ("star-round-1", "star-round-2") and "edges" not in phases_run, phases_run
    assert removed(tmp_path / "out") == removed(tmp_path / "fresh") == expected(texts)


def test_the_fuzzy_command_prints_a_summary(tmp_path: Path, capsys) -> None:
    write_corpus(tmp_path / "input", files=2, per_file=9)
    command = ["fuzzy", "--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--id-field", "doc_id"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "fuzzy deduplication summary" in printed and "ran minhash, lsh, edges" in printed
    assert "documents in     18" in printed and "removed          6" in printed and "kept             12" in printed
    assert main(command) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main([*command, "--output", str(tmp_path / "rounds"), "--in-memory-components-bytes", "0"]) == 0
    assert "ran minhash, lsh, edges, star-round-0, star-round-1" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--num-band", "3"])
    assert exit_.value.code == 2 and "did you mean --num-bands" in capsys.readouterr().err


def test_runners_with_workers_resume_runs_killed_in_each_phase_to_the_local_runners_ids(tmp_path: Path, worker_runner: dict) -> None:
    texts = write_corpus(tmp_path / "input", files=3, per_file=9)
    killed_on_a_runner_and_resumed(tmp_path, KILLED_RUN, KILLED_IN_EACH_PHASE, list(PHASES[:-1]),
                                   lambda name, **settings: fuzzy(tmp_path, name, **settings),
                                   lambda name: removed(tmp_path / name), worker_runner)
    assert removed(tmp_path / "local") == expected(texts)


def test_star_rounds_on_beam_find_the_components_the_in_memory_path_finds(tmp_path: Path, monkeypatch) -> None:
    """Forced past the in-memory bound, with buckets of a few rows: the same
    groups and ids; a run failing in a round resumes from that round, and a
    rerun reuses every round."""
    from beam_curator.workflows.fuzzy import workflow

    texts = write_corpus(tmp_path / "input", files=3, per_file=12)
    fuzzy(tmp_path, "memory")
    monkeypatch.setattr(workflow, "RECORDS_PER_PARTITION", 100)
    step = workflow.StarRoundStage.process

    def failing_in_round_2(stage, task):
        if stage.previous.endswith("round_1"):
            raise RuntimeError("killed in round 2")
        return step(stage, task)

    monkeypatch.setattr(workflow.StarRoundStage, "process", failing_in_round_2)
    with pytest.raises(Exception, match="star-round-2"):
        fuzzy(tmp_path, "rounds", in_memory_components_bytes=0)
    monkeypatch.setattr(workflow.StarRoundStage, "process", step)
    metadata = fuzzy(tmp_path, "rounds", in_memory_components_bytes=0)  # resumes: rounds 0 and 1 are done
    rounds = [phase for phase in metadata["phases_run"] if phase.startswith("star-round-")]
    print(f"star rounds run after the failure: {rounds}")
    assert rounds[0] == "star-round-2" and metadata["phases_run"][0] == "star-round-2"
    assert removed(tmp_path / "rounds") == removed(tmp_path / "memory") == expected(texts)
    groups = [pd.read_parquet(tmp_path / name / "ConnectedComponentsStage").sort_values("doc_id").reset_index(drop=True)
              for name in ("memory", "rounds")]
    assert groups[0].equals(groups[1]) and len(list((tmp_path / "rounds" / "ConnectedComponentsStage").iterdir())) > 1
    assert fuzzy(tmp_path, "rounds")["phases_run"] == [], "a rerun that could go in memory reuses the rounds' result"


def lsh_buckets(output: Path) -> set[tuple[bytes, tuple]]:
    table = pd.concat(pd.read_parquet(path) for path in (output / "LSHStage").rglob("*.parquet"))
    return {(key, tuple(ids)) for key, ids in zip(table["_bucket_id"], table["doc_id"])}


def test_each_lsh_task_reads_only_its_own_band_keys(tmp_path: Path, monkeypatch) -> None:
    """Eight LSH tasks (two band ranges, four partitions) over two band-key
    files (each of two signature files) in row groups of 16 records: together
    they decode each record about once (every task reading every signature
    would decode eight times as many), find the buckets one task finds, and
    the band keys go once the phase is done."""
    from beam_curator.workflows.fuzzy import stages, workflow

    assert stages.file_groups(list("abcd"), [30, 30, 70, 10], 60) == [["a", "b"], ["c"], ["d"]]

    write_corpus(tmp_path / "input", files=4, per_file=30)
    settings = {"num_bands": 10, "minhashes_per_band": 5}
    fuzzy(tmp_path, "one", bands_per_iteration=10, lsh_num_output_partitions=1, **settings)
    decoded: list[int] = []
    iter_batches = pq.ParquetFile.iter_batches

    def counted(file: pq.ParquetFile, *args, **kwargs):
        for batch in iter_batches(file, *args, **kwargs):
            if stages.BAND_KEY in batch.schema.names:
                decoded.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    monkeypatch.setattr(stages, "ROWS_PER_GROUP", 16)
    monkeypatch.setattr(workflow, "BAND_KEY_RECORDS", 60 * 5)
    fuzzy(tmp_path, "eight", bands_per_iteration=5, lsh_num_output_partitions=4, **settings)
    records = 120 * 10
    print(f"records decoded by the LSH tasks: {sum(decoded)} of {records}, in {len(decoded)} batches")
    assert records <= sum(decoded) < 1.5 * records
    assert lsh_buckets(tmp_path / "eight") == lsh_buckets(tmp_path / "one") and lsh_buckets(tmp_path / "one")
    assert not (tmp_path / "eight" / "fuzzy" / "band_keys").exists()
    assert not (tmp_path / "eight" / "checkpoints" / "lsh-band-keys").exists()


def test_star_rounds_read_in_tiny_batches_find_the_same_components(tmp_path: Path, monkeypatch) -> None:
    """Every star-round task reading its bucket 7 rows at a time (so a key's
    rows span many batches, repeated rows among them): the groups found in memory."""
    from beam_curator.workflows.fuzzy import stages, workflow

    write_corpus(tmp_path / "input", files=3, per_file=12)
    fuzzy(tmp_path, "memory")
    monkeypatch.setattr(workflow, "RECORDS_PER_PARTITION", 100)
    monkeypatch.setattr(stages, "ROWS_PER_BATCH", 7)
    fuzzy(tmp_path, "rounds", in_memory_components_bytes=0)
    groups = [pd.read_parquet(tmp_path / name / "ConnectedComponentsStage").sort_values("doc_id").reset_index(drop=True)
              for name in ("memory", "rounds")]
    assert groups[0].equals(groups[1]) and removed(tmp_path / "rounds") == removed(tmp_path / "memory")


def test_a_giant_component_goes_through_star_rounds_in_batches(tmp_path: Path, monkeypatch) -> None:
    """1,200 near-copies of one text: one component whose least id ends up
    with a row per member, read 32 rows at a time; the groups found in memory."""
    from beam_curator.workflows.fuzzy import stages, workflow

    rng = np.random.default_rng(5)
    text = "".join(rng.choice(np.array(list("abcdefghijklmnopqrstuvwxyz ")), 400))
    (tmp_path / "input").mkdir()
    for number in range(3):
        rows = [{"doc_id": f"d{number}-{row:04d}", "text": f"{text} {number} {row}"} for row in range(400)]
        (tmp_path / "input" / f"part{number}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fuzzy(tmp_path, "memory")
    monkeypatch.setattr(workflow, "RECORDS_PER_PARTITION", 1 << 12)
    monkeypatch.setattr(stages, "ROWS_PER_BATCH", 32)
    metadata = fuzzy(tmp_path, "rounds", in_memory_components_bytes=0)
    groups = [pd.read_parquet(tmp_path / name / "ConnectedComponentsStage").sort_values("doc_id").reset_index(drop=True)
              for name in ("memory", "rounds")]
    assert groups[0].equals(groups[1]) and groups[0][GROUP].nunique() == 1 and len(groups[0]) == 1200
    assert metadata["num_duplicates"] == 1199
