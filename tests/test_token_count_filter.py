"""NeMo Curator's ``TokenCountFilter`` (issue 47): the facts its tests assert, with a tokenizer of
the user's own; the bundled model's real tokenizer found offline by name and loaded once per worker;
and the errors a filter that cannot count gives as it is built."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import kept_texts, output_rows  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.models import DEFAULT_MODEL, ModelNotFoundError, resolve_model  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.stages.text.filters import ScoreFilter  # noqa: E402
from beam_curator.stages.text.filters.token import TokenCountFilter  # noqa: E402
from shared_data import DEBIAN, shared_data  # noqa: E402

TEXTS = ["hello", "hello world", "this is a test", "another test case"]


class Words:
    """A tokenizer of the user's own: a token per word."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def test_documents_within_the_bounds_are_kept_both_bounds_included() -> None:
    counting = TokenCountFilter(Words(), min_tokens=2, max_tokens=3)
    assert counting.score_document("another test case") == 3
    assert [counting.keep_document(score) for score in (1, 2, 3, 4)] == [False, True, True, False]
    assert kept_texts(counting, *TEXTS) == ["hello world", "another test case"]
    assert kept_texts(TokenCountFilter(Words()), *TEXTS) == TEXTS, "the defaults keep every document"


def test_the_bundled_models_tokenizer_is_found_by_name_offline_and_counts_special_tokens() -> None:
    from transformers import AutoTokenizer

    real = AutoTokenizer.from_pretrained(resolve_model(DEFAULT_MODEL), local_files_only=True)
    by_name = TokenCountFilter(hf_model_name=DEFAULT_MODEL, max_tokens=4)
    by_name.load_tokenizer()
    assert [by_name.score_document(text) for text in TEXTS] == [len(real.encode(text)) for text in TEXTS]
    assert by_name.score_document("hello") == 3, "[CLS] hello [SEP]"
    assert kept_texts(by_name, *TEXTS) == ["hello", "hello world"]
    assert kept_texts(TokenCountFilter(real, max_tokens=4), *TEXTS) == ["hello", "hello world"], "a loaded tokenizer too"


@pytest.mark.parametrize("settings, error", [
    ({}, "not neither"),
    ({"tokenizer": Words(), "hf_model_name": DEFAULT_MODEL}, "not both"),
    ({"hf_model_name": DEFAULT_MODEL, "transformers_init_kwargs": {"local_files_only": False}}, "local_files_only"),
])
def test_a_filter_that_cannot_tell_which_tokenizer_is_refused(settings: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        TokenCountFilter(**settings)


def test_a_model_on_no_local_path_is_an_error_as_the_filter_is_built(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"(?s)'someone/no-such-model' was not found locally.*huggingface-cli download"):
        TokenCountFilter(hf_model_name="someone/no-such-model", transformers_init_kwargs={"cache_dir": str(tmp_path)})


def test_debian_descriptions_filtered_in_a_pipeline_and_a_rerun_skips(tmp_path: Path) -> None:
    """The filter travels pickled to the stage without its tokenizer, which the stage's set-up loads,
    and the documents kept are those the tokenizer puts in the bounds; the settings a checkpoint
    records do not change between runs, so the rerun finds every partition done."""
    from transformers import AutoTokenizer

    with gzip.open(shared_data(DEBIAN), "rt") as handle:
        records = [json.loads(next(handle)) for _ in range(200)]
    (tmp_path / "in").mkdir()
    for part in range(2):
        (tmp_path / "in" / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[part::2]))
    real = AutoTokenizer.from_pretrained(resolve_model(DEFAULT_MODEL), local_files_only=True)
    counts = [len(real.encode(record["text"])) for record in records]
    low, high = sorted(counts)[50], sorted(counts)[150]

    def run() -> object:
        return Pipeline("tokens", stages=[
            JsonlReader(str(tmp_path / "in"), files_per_partition=1),
            ScoreFilter(TokenCountFilter(hf_model_name=DEFAULT_MODEL, min_tokens=low, max_tokens=high),
                        score_field="tokens"),
            JsonlWriter(str(tmp_path / "out")),
        ]).run(checkpoint_path=str(tmp_path / "checkpoint"), runner="local")

    assert run().partitions_completed == 2
    expected = sorted((record["package"], count) for record, count in zip(records, counts) if low <= count <= high)
    assert sorted((row["package"], row["tokens"]) for row in output_rows(tmp_path / "out")) == expected
    assert 80 <= len(expected) < 200
    again = run()
    assert (again.partitions_skipped, again.partitions_completed) == (2, 0)
