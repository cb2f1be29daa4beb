"""The text workflow with the real vLLM engine (CPU build), on ~60 documents.

vLLM spawns its engine processes, so the workflow runs in a script under
``if __name__ == "__main__":`` (``scripts/semdedup_vllm_run.py``); start-up
alone takes about a minute here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import canonical, output_rows  # noqa: E402
from semdedup_helpers import SCRIPTS_DIR, exact_groups, jsonl_rows, write_jsonl  # noqa: E402

from beam_curator.data import sample_corpus_path  # noqa: E402
from stages_for_tests import vllm_missing  # noqa: E402

if vllm_missing():
    pytest.skip(vllm_missing(), allow_module_level=True)


def tiny_corpus(folder: Path, size: int = 60) -> list[dict]:
    """Every record of corpus files 0 and 4 whose text occurs twice, topped up with distinct ones."""
    rows = [row for name in ("part-00000.jsonl", "part-00004.jsonl") for row in jsonl_rows(Path(sample_corpus_path()) / name)]
    repeated = {doc_id for group in exact_groups(rows, "doc_id") for doc_id in group}
    picked = [row for row in rows if row["doc_id"] in repeated]
    picked += [row for row in rows if row["doc_id"] not in repeated][: size - len(picked)]
    write_jsonl(folder / "part-0.jsonl", picked[::2])
    write_jsonl(folder / "part-1.jsonl", picked[1::2])
    return picked


@pytest.mark.slow
def test_vllm_embeddings_find_every_exact_duplicate(tmp_path: Path) -> None:
    rows = tiny_corpus(tmp_path / "input")
    groups = exact_groups(rows, "doc_id")
    assert len(rows) == 60 and len(groups) == 4
    command = [sys.executable, str(SCRIPTS_DIR / "semdedup_vllm_run.py"),
               str(tmp_path / "input"), str(tmp_path / "output"), str(tmp_path / "cache")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=420, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    tagged = [line for line in result.stdout.splitlines() if line.startswith("METADATA ")]
    metadata = json.loads(tagged[-1].removeprefix("METADATA "))

    removed = set(pd.read_parquet(tmp_path / "output" / "duplicates" / "duplicates.parquet")["id"])
    for group in groups:
        assert len(removed & set(group)) >= len(group) - 1, f"copies of one text left in the output: {group}"
    assert metadata["num_duplicates"] == metadata["num_duplicates_removed"] == len(removed)
    expected = canonical([row for row in rows if row["doc_id"] not in removed])
    assert output_rows(tmp_path / "output" / "deduplicated") == expected
    vectors = pd.read_parquet(next((tmp_path / "cache" / "embeddings").glob("*.parquet")))["embeddings"]
    assert len(vectors.iloc[0]) == 384
