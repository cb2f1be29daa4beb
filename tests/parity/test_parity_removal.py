"""NeMo Curator's removal workflow test: 100 parquet files of 10 rows whose
ids are in NeMo's ``_curator_dedup_id`` column, every fifth id listed for
removal in 5 files; 800 rows remain, with all their columns, the id column
included, and the count of removed rows is 200. Five files per partition
make 20 partitions (one output file each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from beam_curator.workflows import TextDuplicatesRemovalWorkflow

ID = "_curator_dedup_id"


@pytest.fixture(scope="module")
def removed(tmp_path_factory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("removal")
    (base / "input").mkdir()
    for number, ids in enumerate(np.array_split(np.arange(1000), 100)):
        pd.DataFrame({
            ID: ids, "text": [f"Document {i}" for i in ids], "category": [f"category_{i % 10}" for i in ids],
            "score": [0.9 + (i % 10) * 0.01 for i in ids],
        }).to_parquet(base / "input" / f"input_file_{number}.parquet", index=False)
    (base / "ids").mkdir()
    for number, chunk in enumerate(np.array_split(np.arange(0, 1000, 5), 5)):
        pd.DataFrame({"id": chunk}).to_parquet(base / "ids" / f"ids_to_remove_{number}.parquet", index=False)
    result = TextDuplicatesRemovalWorkflow(
        input_path=str(base / "input"), ids_to_remove_path=str(base / "ids"), output_path=str(base / "output"),
        input_filetype="parquet", output_filetype="parquet", id_field=ID, duplicate_id_field="id",
        input_files_per_partition=5, input_kwargs={}, duplicate_id_read_kwargs={}, output_kwargs={},
    ).run()
    return base / "output", result


def test_every_listed_id_is_gone_and_every_other_row_kept(removed):
    output, result = removed
    frame = pd.read_parquet(output)
    assert sorted(frame[ID]) == [i for i in range(1000) if i % 5]
    assert set(frame.columns) == {ID, "text", "category", "score"}
    assert result["num_duplicates_removed"] == 200


def test_one_output_file_per_partition_of_five_files(removed):
    files = sorted(removed[0].glob("*.parquet"))
    assert len(files) == 20
    assert all(set(pd.read_parquet(path).columns) == {ID, "text", "category", "score"} for path in files)


def test_drop_id_field_leaves_the_id_out(removed, tmp_path):
    ids = removed[0].parent / "ids"
    TextDuplicatesRemovalWorkflow(
        input_path=str(removed[0].parent / "input"), ids_to_remove_path=str(ids), output_path=str(tmp_path / "out"),
        input_filetype="parquet", id_field=ID, drop_id_field=True, input_files_per_partition=50,
    ).run()
    assert set(pd.read_parquet(tmp_path / "out").columns) == {"text", "category", "score"}


def test_input_fields_choose_the_columns_and_the_id_is_always_read(removed, tmp_path):
    TextDuplicatesRemovalWorkflow(
        input_path=str(removed[0].parent / "input"), ids_to_remove_path=str(removed[0].parent / "ids"),
        output_path=str(tmp_path / "out"), id_field=ID, input_fields=["text"], input_files_per_partition=50,
    ).run()
    frame = pd.read_parquet(tmp_path / "out")
    assert set(frame.columns) == {ID, "text"} and len(frame) == 800


def test_blocksize_extensions_and_output_extension_as_in_nemo(removed, tmp_path):
    """``input_blocksize`` groups whole files up to a size, ``input_file_extensions``
    picks the files, ``output_file_extension`` names the outputs."""
    source = removed[0].parent / "input"
    renamed = tmp_path / "input"
    renamed.mkdir()
    for path in source.glob("*.parquet"):
        (renamed / f"{path.stem}.pq").write_bytes(path.read_bytes())
    (renamed / "notes.txt").write_text("not data")
    size = sum(path.stat().st_size for path in list(source.glob("*.parquet"))[:10])
    result = TextDuplicatesRemovalWorkflow(
        input_path=str(renamed), ids_to_remove_path=str(removed[0].parent / "ids"), output_path=str(tmp_path / "out"),
        id_field=ID, input_blocksize=size, input_file_extensions=["pq"], output_file_extension=".clean.parquet",
    ).run()
    written = sorted((tmp_path / "out").iterdir())
    assert 5 <= len(written) <= 20 and all(path.name.endswith(".clean.parquet") for path in written)
    assert len(pd.concat([pd.read_parquet(path) for path in written])) == 800
    assert result["num_duplicates_removed"] == 200


def test_a_file_count_and_a_blocksize_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="give files_per_partition or input_blocksize, not both"):
        TextDuplicatesRemovalWorkflow(str(tmp_path), str(tmp_path), str(tmp_path / "out"), id_field=ID,
                                      input_blocksize="64MiB", input_files_per_partition=2)
