"""From pairwise scores to the ids to remove, and a look at the scores.

A document is a duplicate when any of its score rows reaches 1 - eps, so
only those rows are kept while scanning: memory grows with the number of
duplicates, not of documents.
"""

from __future__ import annotations

import logging

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from beam_curator.dedup.semantic.cross_cluster import combine_scores
from beam_curator.dedup.semantic.pairwise import MAX_RANK_KEY, SCORE
from beam_curator.stages.io.parquet import ParquetFolder
from beam_curator.writing import write_atomically

logger = logging.getLogger(__name__)
DUPLICATES_ROW_GROUPS = 10  # NeMo Curator's default hint
EPS_GRID = (0.0001, 0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)


def identify(
    pairwise_results: str, eps: float, which_to_keep: str, duplicates_folder: str, pairs_folder: str,
    row_groups: int | None = None,
) -> int:
    """Write ``<duplicates_folder>/duplicates.parquet`` (``id``, sorted, as NeMo
    Curator, in about ``row_groups`` row groups so that removal workers can
    read it in parts; default :data:`DUPLICATES_ROW_GROUPS`) and
    ``<pairs_folder>/duplicate_pairs.parquet`` (id, max_id, cosine_sim_score);
    return the count."""
    table = ParquetFolder(pairwise_results).to_table(filter=ds.field(SCORE) >= (1 - eps))
    frame = table.to_pandas()
    if len(frame) and MAX_RANK_KEY in frame.columns:  # several passes: each id's best row
        frame = combine_scores([frame], which_to_keep)
    frame = frame[["id", "max_id", SCORE]].sort_values("id", kind="stable").reset_index(drop=True)
    ids = pa.Table.from_pandas(frame[["id"]], preserve_index=False)
    group_rows = max(1, len(frame) // (row_groups or DUPLICATES_ROW_GROUPS))
    write_atomically(f"{duplicates_folder}/duplicates.parquet",
                     lambda handle: pq.write_table(ids, handle, row_group_size=group_rows))
    write_atomically(f"{pairs_folder}/duplicate_pairs.parquet", lambda handle: frame.to_parquet(handle, index=False))
    return len(frame)


def best_scores(pairwise_results: str, which_to_keep: str) -> pd.Series:
    """Each document's highest score over all passes."""
    dataset = ParquetFolder(pairwise_results)
    if MAX_RANK_KEY not in dataset.schema.names:  # one pass: one row per id
        return dataset.to_table(columns=[SCORE]).column(0).to_pandas()
    frame = dataset.to_table(columns=["id", "max_id", SCORE, MAX_RANK_KEY]).to_pandas()
    return combine_scores([frame], which_to_keep)[SCORE] if len(frame) else pd.Series([], dtype=float)


def eps_table(scores: pd.Series, grid: tuple[float, ...] = EPS_GRID) -> pd.DataFrame:
    """How many documents each eps would remove."""
    values = scores.to_numpy()
    # Thresholds are rounded so that the table reads 0.93, not 0.9299999999999999.
    rows = [{"eps": eps, "threshold": round(1 - eps, 10), "duplicates": int((values >= 1 - eps).sum())} for eps in grid]
    frame = pd.DataFrame(rows)
    frame["share"] = (frame["duplicates"] / max(len(values), 1)).round(6)
    return frame


def write_analysis(pairwise_results: str, which_to_keep: str, folder: str) -> pd.DataFrame:
    """``eps_table.csv``, ``eps_table.txt``, ``similarity_histogram.csv`` and ``similarity.png`` in ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = best_scores(pairwise_results, which_to_keep)
    table = eps_table(scores)
    counts, edges = np.histogram(scores.to_numpy(), bins=50, range=(float(scores.to_numpy().min(initial=0.0)), 1.0))
    histogram = pd.DataFrame({"low": edges[:-1], "high": edges[1:], "documents": counts})
    fs, path = fsspec.core.url_to_fs(folder)
    fs.makedirs(path, exist_ok=True)
    outputs = {
        "eps_table.csv": table.to_csv(index=False).encode(),
        "eps_table.txt": table.to_string(index=False).encode(),
        "similarity_histogram.csv": histogram.to_csv(index=False).encode(),
    }
    for name, payload in outputs.items():
        write_atomically(f"{folder}/{name}", lambda handle, payload=payload: handle.write(payload))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.hist(scores.to_numpy(), bins=50, color="#4C72B0")
    left.set(title="Highest similarity to an earlier-ranked document", xlabel="cosine_sim_score", ylabel="documents")
    right.plot(table["eps"], table["duplicates"], marker="o")
    right.set(title="Documents removed per eps", xlabel="eps", ylabel="duplicates", xscale="log")
    figure.tight_layout()
    write_atomically(f"{folder}/similarity.png", lambda handle: figure.savefig(handle, format="png", dpi=110))
    plt.close(figure)
    logger.info("similarity analysis written to %s", folder)
    return table

