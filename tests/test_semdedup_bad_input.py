"""Bad input stops the semantic-dedup workflows with an error that says where and what to do.

Errors raised inside Beam workers reach the caller re-raised by Beam, with
the step name appended; the original message must survive that, so every
test checks the text of ``str(error)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from semdedup_helpers import write_embeddings, write_jsonl  # noqa: E402

from beam_curator.dedup.semantic.normalize import InvalidEmbeddingError  # noqa: E402
from beam_curator.stages.io.errors import CuratorInputError  # noqa: E402
from beam_curator.workflows import SemanticDeduplicationWorkflow, TextSemanticDeduplicationWorkflow  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def run_text(input_path: Path | str, base: Path, **settings: object) -> None:
    settings = {"embedding_backend": "sentence-transformers", "n_clusters": 2, "eps": 0.01, "runner": "local",
                "input_filetype": "jsonl", "output_filetype": "jsonl", **settings}
    TextSemanticDeduplicationWorkflow(str(input_path), str(base / "output"), str(base / "cache"), **settings).run()


def run_embeddings(embeddings: Path, base: Path, **settings: object) -> None:
    SemanticDeduplicationWorkflow(str(embeddings), str(base / "output"), runner="local", **settings).run()


def records(prefix: str, count: int) -> list[dict]:
    return [{"doc_id": f"{prefix}{i}", "text": f"document {prefix}{i} about topic {i}"} for i in range(count)]


def test_input_of_empty_files_says_there_is_nothing_to_deduplicate(tmp_path: Path) -> None:
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "part-0.jsonl").write_text("")
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path)
    assert f"input '{tmp_path / 'input'}' holds no records to deduplicate; check input_path" in str(caught.value)
    assert not (tmp_path / "cache" / "checkpoints" / "phases" / "embedding.done.json").exists()


def test_a_glob_matching_nothing_names_the_glob(tmp_path: Path) -> None:
    pattern = str(tmp_path / "nowhere" / "*.jsonl")
    with pytest.raises(CuratorInputError, match="matches no .jsonl") as caught:
        run_text(pattern, tmp_path)
    assert pattern in str(caught.value) and "check the path or glob" in str(caught.value)


def test_a_folder_of_other_files_names_what_it_holds_and_the_setting(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 4))
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, input_filetype="parquet")
    assert "matches no .parquet files" in str(caught.value)
    assert "it holds 1 .jsonl files: if those are the input, name their format (input_filetype=" in str(caught.value)
    assert not (tmp_path / "output").exists() and not (tmp_path / "cache").exists()


def test_a_record_without_the_text_field_names_file_and_line(tmp_path: Path) -> None:
    rows = records("a", 4)
    rows[2] = {"doc_id": "a2", "body": "the text is under another name"}
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", rows)
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    message = str(caught.value)
    assert f"{file}, line 3: missing field(s) text" in message and "on_bad_record='skip'" in message


def test_repeated_user_ids_in_one_file_are_named_with_the_file(tmp_path: Path) -> None:
    rows = records("a", 4) + [{"doc_id": "a1", "text": "another text reusing the id a1"}]
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", rows)
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    message = str(caught.value)
    assert str(file) in message and "repeats the ids ['a1']" in message and "ids must be unique" in message


def test_a_user_id_repeated_across_files_is_named(tmp_path: Path) -> None:
    """One id on two different records in two files: checked across the whole
    input before clustering, since removing that id would drop both."""
    rows = records("a", 4)
    write_jsonl(tmp_path / "input" / "part-0.jsonl", rows)
    clash = {**records("b", 1)[0], "doc_id": "a0"}
    write_jsonl(tmp_path / "input" / "part-1.jsonl", [clash, *records("b", 3)[1:]])
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    assert "1 id(s) in 'doc_id' occur more than once across the input, e.g. ['a0']; ids must be unique" in str(
        caught.value
    )


def test_more_clusters_than_documents_says_how_many_are_possible(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).normal(size=(3, 8))
    embeddings = write_embeddings(tmp_path / "embeddings", ["x0", "x1", "x2"], vectors)
    with pytest.raises(ValueError) as caught:
        run_embeddings(embeddings, tmp_path, n_clusters=10)
    assert "n_clusters=10 is more than the 3 embeddings to cluster; pass n_clusters <= 3" in str(caught.value)


def test_a_nan_embedding_names_the_document(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).normal(size=(6, 8))
    vectors[4, 3] = np.nan
    embeddings = write_embeddings(tmp_path / "embeddings", [f"x{i}" for i in range(6)], vectors, files=2)
    with pytest.raises(InvalidEmbeddingError) as caught:
        run_embeddings(embeddings, tmp_path, n_clusters=2)
    message = str(caught.value)
    assert "documents ['x4'] have zero-length or NaN/inf embeddings" in message and "re-embed them" in message


def test_embeddings_without_the_id_column_name_the_file_and_setting(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).normal(size=(4, 8))
    embeddings = write_embeddings(tmp_path / "embeddings", ["x0", "x1", "x2", "x3"], vectors)
    with pytest.raises(ValueError) as caught:
        run_embeddings(embeddings, tmp_path, n_clusters=2, id_field="doc_id")
    message = str(caught.value)
    assert f"{embeddings / 'part-000.parquet'} has no column(s) ['doc_id']" in message
    assert "set id_field and embedding_field" in message


def test_an_empty_embeddings_folder_names_the_folder(tmp_path: Path) -> None:
    (tmp_path / "embeddings").mkdir()
    with pytest.raises(FileNotFoundError) as caught:
        run_embeddings(tmp_path / "embeddings", tmp_path, n_clusters=2)
    assert f"no embedding parquet files in {tmp_path / 'embeddings'}" in str(caught.value)


@pytest.mark.parametrize("eps", [-0.1, 1.0])
def test_eps_outside_zero_one_is_refused_before_any_work(tmp_path: Path, eps: float) -> None:
    with pytest.raises(ValueError, match=rf"eps must be in \[0, 1\) or None, got {eps}"):
        SemanticDeduplicationWorkflow(str(tmp_path / "embeddings"), str(tmp_path / "output"), eps=eps)
    assert not (tmp_path / "output").exists()


def assert_nothing_embedded(base: Path) -> None:
    assert not (base / "cache" / "embeddings").exists(), "the error must come before any embedding"


@pytest.mark.parametrize("setting, value", [
    ("n_clusters", 0), ("n_clusters", "10"), ("pairwise_batch_size", 0), ("pairwise_batch_size", 2.5),
])
def test_counts_that_are_not_positive_integers_are_refused_at_construction(tmp_path: Path, setting: str, value) -> None:
    with pytest.raises(ValueError, match=rf"{setting} must be a positive integer, got {value!r}"):
        TextSemanticDeduplicationWorkflow(str(tmp_path), str(tmp_path / "out"), str(tmp_path / "cache"),
                                          **{setting: value})


def test_more_clusters_than_records_is_refused_before_embedding(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 3))
    with pytest.raises(CuratorInputError, match="n_clusters=5 is more than the 3 records"):
        run_text(tmp_path / "input", tmp_path, n_clusters=5)
    assert_nothing_embedded(tmp_path)


def test_an_output_path_under_a_regular_file_is_refused_before_embedding(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 4))
    (tmp_path / "taken").write_text("a file, not a folder")
    with pytest.raises(CuratorInputError) as caught:
        TextSemanticDeduplicationWorkflow(
            str(tmp_path / "input"), str(tmp_path / "taken" / "output"), str(tmp_path / "cache"), n_clusters=2,
            input_filetype="jsonl",
        ).run()
    assert f"output_path '{tmp_path / 'taken' / 'output'}' lies under '{tmp_path / 'taken'}', which is a file" in str(
        caught.value)
    assert_nothing_embedded(tmp_path)


def test_an_unwritable_cache_path_is_refused_before_embedding(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 4))
    with pytest.raises(CuratorInputError, match="cache_path '/proc/beam-curator-cache' is not writable"):
        TextSemanticDeduplicationWorkflow(
            str(tmp_path / "input"), str(tmp_path / "output"), "/proc/beam-curator-cache", n_clusters=2,
            input_filetype="jsonl",
        ).run()


def test_float_ids_are_refused_before_embedding_naming_file_and_line(tmp_path: Path) -> None:
    rows = [{"doc_id": 1.5 + i, "text": f"text {i}"} for i in range(4)]
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", rows)
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    assert f"{file}, line 1: id_field 'doc_id' holds a float; ids must be integers or strings" in str(caught.value)
    assert_nothing_embedded(tmp_path)


def test_integer_ids_in_one_file_and_strings_in_another_name_both_files(tmp_path: Path) -> None:
    ints = write_jsonl(tmp_path / "input" / "a.jsonl", [{"doc_id": i, "text": f"text {i}"} for i in range(3)])
    strings = write_jsonl(tmp_path / "input" / "b.jsonl", records("b", 3))
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    assert f"holds integers in {ints} but strings in {strings}" in str(caught.value)
    assert_nothing_embedded(tmp_path)


@pytest.mark.parametrize("text, kind", [(42, "int"), (["a", "list"], "list")])
def test_a_text_that_is_not_a_string_names_file_line_and_id(tmp_path: Path, text, kind: str) -> None:
    rows = records("a", 5)
    rows[3]["text"] = text
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", rows)
    with pytest.raises(CuratorInputError) as caught:
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    message = str(caught.value)
    assert f"{file}: line 4: field 'text' holds a {kind} where line 1 holds a str" in message
    assert '"doc_id": "a3"' in message


def test_a_first_text_that_is_a_number_is_refused_before_embedding(tmp_path: Path) -> None:
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", [{"doc_id": "x", "text": 7}, *records("a", 3)])
    with pytest.raises(CuratorInputError, match=rf"{file}, line 1: text_field 'text' holds a integer, not text"):
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    assert_nothing_embedded(tmp_path)


def test_a_json_file_that_is_not_json_is_refused_before_embedding(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 4))
    (tmp_path / "input" / "notes.json").write_text("these are notes, not JSON\n")
    with pytest.raises(CuratorInputError, match=r"notes.json, line 1: malformed JSON .*on_bad_record='skip'"):
        run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    assert_nothing_embedded(tmp_path)
    # With bad records skipped, the same folder runs: the file contributes nothing.
    run_text(tmp_path / "input", tmp_path, id_field="doc_id", on_bad_record="skip")


def test_a_byte_order_mark_opening_a_file_is_read_as_utf8(tmp_path: Path) -> None:
    file = write_jsonl(tmp_path / "input" / "part-0.jsonl", records("a", 4))
    file.write_bytes(b"\xef\xbb\xbf" + file.read_bytes())
    run_text(tmp_path / "input", tmp_path, id_field="doc_id")
    kept = [line for path in (tmp_path / "output" / "deduplicated").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert len(kept) == 4


def test_an_unreadable_embeddings_file_is_named(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).normal(size=(4, 8))
    embeddings = write_embeddings(tmp_path / "embeddings", ["x0", "x1", "x2", "x3"], vectors)
    (embeddings / "part-001.parquet").write_bytes(b"PAR1 but not really parquet")
    with pytest.raises(CuratorInputError) as caught:
        run_embeddings(embeddings, tmp_path, n_clusters=2)
    assert f"{embeddings / 'part-001.parquet'}: not a readable parquet file" in str(caught.value)


def test_repeated_ids_are_found_by_workers_bucket_by_bucket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The uniqueness check runs as one Beam task per bucket of ids; with
    buckets of 8 ids, 60 documents make 8 tasks, and ids repeated in other
    files still meet in their bucket: every repeated id is counted, and the
    error is raised before k-means is fitted."""
    from beam_curator.workflows.semantic import id_check

    monkeypatch.setattr(id_check, "IDS_PER_BUCKET", 8)
    vectors = np.random.default_rng(1).normal(size=(60, 8))
    ids = [f"d{i}" for i in range(60)]
    ids[41], ids[58], ids[17] = "d3", "d3", "d9"  # d3 three times, d9 twice, across files
    embeddings = write_embeddings(tmp_path / "embeddings", ids, vectors, files=3)
    with pytest.raises(CuratorInputError) as caught:
        run_embeddings(embeddings, tmp_path, n_clusters=2, eps=0.01)
    assert "2 id(s) in 'id' occur more than once across the input, e.g. ['d3', 'd9']" in str(caught.value)
    repeated = tmp_path / "output" / "id_check" / "repeated"
    assert len(list(repeated.glob("bucket_*.parquet"))) == 8
    assert not (tmp_path / "output" / "kmeans_results" / "kmeans_centroids.npy").exists()
