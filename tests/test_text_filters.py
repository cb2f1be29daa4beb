"""The document filters and the stages that run them (issue 47), at NeMo Curator's import paths.

The heuristic filters keep and drop what NeMo Curator's keep and drop: each case below is a fact its
own tests (``tests/stages/text/modules/test_filters.py``) assert, on texts of our own, many placed
right at a threshold, since that is where an off-by-one or a ``<`` for ``<=`` shows. ``Score``,
``Filter`` and ``ScoreFilter`` follow its rules for score columns, ``invert`` and lists of filters.
The end-to-end test runs a ported pipeline on Debian's package descriptions with a checkpoint.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import output_rows  # noqa: E402

from beam_curator import Pipeline  # noqa: E402
from beam_curator.stages.io import JsonlReader, JsonlWriter  # noqa: E402
from beam_curator.stages.text.filters import DocumentFilter, Filter, Score, ScoreFilter  # noqa: E402
from beam_curator.stages.text.filters.heuristic import (  # noqa: E402
    BoilerPlateStringFilter,
    BulletsFilter,
    CommonEnglishWordsFilter,
    EllipsisFilter,
    LongWordFilter,
    MeanWordLengthFilter,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParenthesesFilter,
    PornographicUrlsFilter,
    PunctuationFilter,
    SubstringFilter,
    SymbolsToWordsFilter,
    UrlsFilter,
    WhiteSpaceFilter,
    WordCountFilter,
    WordsWithoutAlphabetsFilter,
)
from beam_curator.stages.text.filters.heuristic.repetition import (  # noqa: E402
    RepeatedLinesByCharFilter,
    RepeatedLinesFilter,
    RepeatedParagraphsByCharFilter,
    RepeatedParagraphsFilter,
    RepeatingDuplicateNGramsFilter,
    RepeatingTopNGramsFilter,
)
from beam_curator.stages.text.modifiers import Modify, UnicodeReformatter  # noqa: E402
from beam_curator.tasks import DocumentBatch  # noqa: E402
from beam_curator.transforms import PipelineChangedError  # noqa: E402
from shared_data import DEBIAN, MULTILINGUAL, shared_data  # noqa: E402



def batch(**columns: list) -> DocumentBatch:
    return DocumentBatch(dataset_name="letters", data=pa.table(columns))


def rows(result: DocumentBatch) -> dict[str, list]:
    return result.to_pyarrow().to_pydict()


class AtLeast(DocumentFilter):
    """Keeps a text with at least ``least`` of ``letter``; its score is the count."""

    def __init__(self, letter: str, least: int) -> None:
        super().__init__()
        self.letter, self.least = letter, least
        self._name = f"{letter}_count"

    def score_document(self, text: str) -> int:
        return text.count(self.letter)

    def keep_document(self, score: int) -> bool:
        return score >= self.least


WORDS = ["bob", "banana", "abracadabra", "a cab"]  # b: 2 1 2 1, a: 0 3 5 2


# --- Score, Filter, ScoreFilter ---


def test_score_filter_keeps_what_the_filter_keeps_and_drops_the_scores_unless_asked() -> None:
    bees = AtLeast("b", 2)
    assert rows(ScoreFilter(bees).process(batch(text=WORDS))) == {"text": ["bob", "abracadabra"]}
    kept = ScoreFilter(bees, score_field="bees").process(batch(text=WORDS))
    assert rows(kept) == {"text": ["bob", "abracadabra"], "bees": [2, 2]}
    assert rows(ScoreFilter(bees, invert=True).process(batch(text=WORDS))) == {"text": ["banana", "a cab"]}


def test_score_adds_a_column_for_a_filter_a_method_or_a_function_and_keeps_every_row() -> None:
    bees = AtLeast("b", 2)
    for score_fn in (bees, bees.score_document, lambda text: text.count("b")):
        assert rows(Score(score_fn, score_field="bees").process(batch(text=WORDS)))["bees"] == [2, 1, 2, 1]


def test_filter_decides_on_a_stored_score_with_a_filter_or_a_function() -> None:
    scored = batch(text=WORDS, bees=[2, 1, 2, 1])
    for filter_fn in (AtLeast("b", 2), AtLeast("b", 2).keep_document, lambda count: count >= 2):
        assert rows(Filter(filter_fn, "bees").process(scored)) == {"text": ["bob", "abracadabra"], "bees": [2, 2]}
    assert rows(Filter(AtLeast("b", 2), "bees", invert=True).process(scored))["text"] == ["banana", "a cab"]


def test_a_list_of_filters_applies_in_order_each_scoring_only_what_the_ones_before_kept() -> None:
    chain = [AtLeast("b", 1), AtLeast("a", 3)]
    kept = ScoreFilter(chain, score_field=["bees", "ays"]).process(batch(text=WORDS))
    assert rows(kept) == {"text": ["banana", "abracadabra"], "bees": [1, 2], "ays": [3, 5]}
    assert rows(ScoreFilter(chain).process(batch(text=WORDS))) == {"text": ["banana", "abracadabra"]}
    # A None entry drops that filter's score only; invert may differ per filter.
    kept = ScoreFilter(chain, score_field=[None, "ays"], invert=[False, True]).process(batch(text=WORDS))
    assert rows(kept) == {"text": ["bob", "a cab"], "ays": [0, 2]}


def test_a_list_of_filters_reads_one_text_field_each_or_one_shared() -> None:
    data = batch(title=["bb", "b", "bbb"], body=["aaa", "aaaa", "a"])
    kept = ScoreFilter([AtLeast("b", 2), AtLeast("a", 3)], text_field=["title", "body"]).process(data)
    assert rows(kept) == {"title": ["bb"], "body": ["aaa"]}
    scored = Score([AtLeast("b", 2), AtLeast("a", 3)], score_field=["bees", "ays"], text_field="body").process(data)
    assert rows(scored)["bees"] == [0, 0, 0] and rows(scored)["ays"] == [3, 4, 1]
    assert rows(Filter([AtLeast("b", 2), AtLeast("a", 3)], ["bees", "ays"]).process(scored)) == {
        "title": [], "body": [], "bees": [], "ays": []}


@pytest.mark.parametrize("stage", [
    lambda: ScoreFilter([AtLeast("b", 1), AtLeast("a", 3)], score_field="shared"),
    lambda: ScoreFilter([AtLeast("b", 1), AtLeast("a", 3)], score_field=["only_one"]),
    lambda: Score([AtLeast("b", 1), AtLeast("a", 3)], score_field="shared"),
    lambda: Score([AtLeast("b", 1), AtLeast("a", 3)], score_field=None),
    lambda: Score(AtLeast("b", 1), score_field=None),
    lambda: Filter([AtLeast("b", 1), AtLeast("a", 3)], filter_field="shared"),
    lambda: ScoreFilter([AtLeast("b", 1), AtLeast("a", 3)], text_field=["a", "b", "c"]),
    lambda: ScoreFilter(AtLeast("b", 1), text_field=["a", "b"]),
    lambda: ScoreFilter(AtLeast("b", 1), text_field=None),
    lambda: ScoreFilter([]),
], ids=["shared-score-field", "one-score-field-in-a-list", "score-shared", "score-none", "score-none-single",
        "filter-shared-field", "more-fields-than-filters", "fields-for-one-filter", "no-text-field", "no-filters"])
def test_settings_that_would_lose_or_mix_up_columns_are_refused(stage) -> None:
    """Several filters writing one score column would overwrite each other's scores."""
    with pytest.raises(ValueError):
        stage()


def test_settings_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(TypeError):
        ScoreFilter(AtLeast("b", 1), invert="yes")
    with pytest.raises(TypeError, match="DocumentFilter"):
        ScoreFilter(len)  # a function has no decision to take


def test_stages_are_named_after_their_filters() -> None:
    assert ScoreFilter(WordCountFilter()).stage_name == "word_count"
    assert Score(len, score_field="n").stage_name == "score_fn"
    assert Filter(bool, "n").stage_name == "filter_fn"
    assert ScoreFilter([AtLeast("b", 1), AtLeast("a", 1)]).stage_name == "score_filter_chain_of_b_count_a_count"
    assert ScoreFilter(WordCountFilter(), name="long_enough").stage_name == "long_enough"


def test_an_empty_batch_stays_empty_and_keeps_its_columns() -> None:
    nothing = ScoreFilter(AtLeast("z", 1)).process(batch(text=WORDS))
    assert rows(nothing) == {"text": []}
    assert rows(ScoreFilter(AtLeast("a", 1), score_field="ays").process(nothing)) == {"text": [], "ays": []}


def test_a_missing_text_field_is_named_with_the_fields_there_are() -> None:
    with pytest.raises(KeyError, match=re.escape("no field 'body'; its fields are ['text']")):
        ScoreFilter(AtLeast("b", 1), text_field="body").process(batch(text=WORDS))


def test_setup_loads_each_filters_model_once_per_worker() -> None:
    class Modelled(AtLeast):
        loaded = 0

        def load_model(self) -> None:
            self.loaded += 1

    first, second = Modelled("a", 1), Modelled("b", 1)
    ScoreFilter([first, second]).setup()
    assert (first.loaded, second.loaded) == (1, 1)


def test_the_fingerprint_changes_with_a_filters_settings() -> None:
    """A rerun after changing a threshold must not keep the first run's output as complete."""
    five, six = ScoreFilter(WordCountFilter(min_words=5)), ScoreFilter(WordCountFilter(min_words=6))
    assert five.fingerprint() != six.fingerprint()
    assert ScoreFilter(UrlsFilter(url_regex="ftp://")).fingerprint() != ScoreFilter(UrlsFilter()).fingerprint()
    assert ScoreFilter(WordCountFilter()).fingerprint() == ScoreFilter(WordCountFilter()).fingerprint()


# --- the heuristic filters: which texts each keeps ---

TEN_BULLETS = "\n".join(["\u2022 item"] * 9 + ["closing line"])  # 9 of 10 lines: the 0.9 limit itself
CONTENT_AND_BOILERPLATE = "\n\n".join(  # 4 of 10 paragraphs: the 0.4 limit itself
    ["content"] * 6 + ["Terms of Use", "privacy policy", "cookie policy", "we use cookies"])
ONE_LINK = "a long sentence with plenty of ordinary words, and one https://example.org link in the middle of it"
ELLIPSES = "a...\nb\u2026\nc read more\nd (...)\ne."

KEPT = [
    (NonAlphaNumericFilter(), ["", "Plain words only.", "@@##$$%%", "#abc"], ["Plain words only.", "#abc"]),
    (SymbolsToWordsFilter(), ["w1 w2 w3 w4 w5 w6 w7 w8 w9 #", "so ... many \u2026 marks", "#", "## is not one"],
     ["w1 w2 w3 w4 w5 w6 w7 w8 w9 #", "## is not one"]),
    (NumbersFilter(max_number_to_text_ratio=0.1), ["no digits", "2024", "abcdefghi1", "abc1", "\u0663\u0663\u0663 x"],
     ["no digits", "abcdefghi1", "\u0663\u0663\u0663 x"]),
    (UrlsFilter(), ["https://example.org/a/b", "no links at all", "see https://example.org",
                    ONE_LINK], ["no links at all", ONE_LINK]),
    (UrlsFilter(url_regex=r"ftp://\S+"), ["ftp://files.example.org/x.tgz", "https://example.org/a/b"],
     ["https://example.org/a/b"]),
    (BulletsFilter(), ["\u2022 just one", "no bullets", TEN_BULLETS, "\u29be a\n\u29be b"],
     ["no bullets", TEN_BULLETS]),
    (WhiteSpaceFilter(), ["\t\n \r", "word", "ab \n", "abc\b"], ["word", "abc\b"]),
    (ParenthesesFilter(), ["[]", "(x)", "no brackets here", "abcdefghi{", "\u27e8abc\u27e9"],
     ["no brackets here", "abcdefghi{"]),
    (LongWordFilter(max_word_length=5), ["short words only", "extraordinary"], ["short words only"]),
    (WordCountFilter(min_words=2, max_words=4), ["", "one", "two words", "%% && ##", "a b c d e"],
     ["two words", "%% && ##"]),
    (BoilerPlateStringFilter(), ["nothing to see", CONTENT_AND_BOILERPLATE, "body\n\nread our Privacy Policy",
                                 "Lorem ipsum dolor sit amet"], ["nothing to see", CONTENT_AND_BOILERPLATE]),
    (MeanWordLengthFilter(), ["a", "abc", "abcdefghijk", "tiny enormousness"], ["abc", "tiny enormousness"]),
    (RepeatedLinesFilter(), ["unique", "x\nx", "a\nb\nc\na"], ["unique", "a\nb\nc\na"]),
    (RepeatedParagraphsFilter(), ["unique", "x\n\nx", "p\n\nq"], ["unique", "p\n\nq"]),
    (RepeatedLinesByCharFilter(), ["unique", "ab.\nab.\nlonger distinct line.", "same line here\nsame line here\nx"],
     ["unique", "ab.\nab.\nlonger distinct line."]),
    (RepeatedParagraphsByCharFilter(),
     ["unique", "ab.\n\nab.\n\nlonger distinct line.", "same line here\n\nsame line here\n\nx"],
     ["unique", "ab.\n\nab.\n\nlonger distinct line."]),
    (RepeatingTopNGramsFilter(), ["one", "x y . x y", "z z z z", "it is so on to go by me up at we do",
                                  "a long run of different words and then a b a b"],
     ["it is so on to go by me up at we do", "a long run of different words and then a b a b"]),
    (RepeatingDuplicateNGramsFilter(), ["p p q q p p q q", "nothing repeats", "z z z z and then many more words"],
     ["nothing repeats", "z z z z and then many more words"]),
    (PunctuationFilter(max_num_sentences_without_endmark_ratio=0.8), ["no end mark", "ends well.", "a\nb\nc\nd\ne."],
     ["ends well.", "a\nb\nc\nd\ne."]),
    (EllipsisFilter(max_num_lines_ending_with_ellipsis_ratio=0.8),
     ["trailing off...", "done.", ELLIPSES], ["done.", ELLIPSES]),
    (CommonEnglishWordsFilter(), ["nothing common", "the and", "THE AND", "to be or not to be"],
     ["the and", "to be or not to be"]),
    (WordsWithoutAlphabetsFilter(), ["fine words", "word word word word 42", "42 !", "\u093f \u093f"],
     ["fine words", "word word word word 42", "\u093f \u093f"]),
    (PornographicUrlsFilter(), ["no url", "https://example.com/recipes", "http://porn.example.com", "porn, no url"],
     ["no url", "https://example.com/recipes", "porn, no url"]),
    (SubstringFilter("Hello", "prefix"), ["Hello world", "world Hello"], ["Hello world"]),
    (SubstringFilter("end", "suffix"), ["the end", "end of it"], ["the end"]),
    (SubstringFilter("mid", "any"), ["a mid b", "a b"], ["a mid b"]),
]


@pytest.mark.parametrize("document_filter, texts, kept", KEPT, ids=[type(case[0]).__name__ for case in KEPT])
def test_each_heuristic_filter_keeps_what_nemo_curators_keeps(document_filter: DocumentFilter, texts: list[str],
                                                               kept: list[str]) -> None:
    assert rows(ScoreFilter(document_filter).process(batch(text=texts)))["text"] == kept


SCORES = [
    (NonAlphaNumericFilter(), "#abc", 0.25),
    (SymbolsToWordsFilter(), "w1 w2 w3 w4 w5 w6 w7 w8 w9 #", 0.1),
    (UrlsFilter(), "see https://example.org", 19 / 23),
    (BulletsFilter(), TEN_BULLETS, 0.9),
    (LongWordFilter(), "a bb ccc", 3),
    (WordCountFilter(), "  three short words \n", 3),
    (BoilerPlateStringFilter(), CONTENT_AND_BOILERPLATE, 0.4),
    (BoilerPlateStringFilter(), "Lorem ipsum", 1.0),
    (MeanWordLengthFilter(), "tiny enormousness", 8.0),
    (CommonEnglishWordsFilter(), "the of to and", 2),  # counting stops at the minimum...
    (CommonEnglishWordsFilter(stop_at_false=False), "the of to and", 4),  # ...unless told not to
    (RepeatedLinesFilter(), "a\nb\nc\na", 0.75),
    (RepeatingTopNGramsFilter(), "x y . x y", 6 / 9),  # "x y" twice in 9 characters
    (RepeatingTopNGramsFilter(n=3), "a b", 1.0),  # fewer words than n
    (RepeatingDuplicateNGramsFilter(), "p p q q p p q q", 7 / 15),  # the second "p p q q": 7 of 15 characters
    (PornographicUrlsFilter(), "http://porn.example.com", 1),
    (SubstringFilter("x", "any"), "abc", 0),
]


@pytest.mark.parametrize("document_filter, text, score", SCORES, ids=[type(case[0]).__name__ for case in SCORES])
def test_scores_are_nemo_curators(document_filter: DocumentFilter, text: str, score: float) -> None:
    assert document_filter.score_document(text) == pytest.approx(score)


def test_filters_are_named_as_in_nemo_curator() -> None:
    """The names become stage names and, often, score column names in ported code."""
    names = {type(f).__name__: f.name for f in (
        NonAlphaNumericFilter(), SymbolsToWordsFilter(), NumbersFilter(), UrlsFilter(), BulletsFilter(),
        WhiteSpaceFilter(), ParenthesesFilter(), LongWordFilter(), WordCountFilter(), BoilerPlateStringFilter(),
        MeanWordLengthFilter(), PunctuationFilter(), EllipsisFilter(), CommonEnglishWordsFilter(),
        WordsWithoutAlphabetsFilter(), PornographicUrlsFilter(), RepeatedLinesFilter(), RepeatedParagraphsFilter(),
        RepeatedLinesByCharFilter(), RepeatedParagraphsByCharFilter(), RepeatingTopNGramsFilter(n=3),
        RepeatingDuplicateNGramsFilter(n=3))}
    assert names == {
        "NonAlphaNumericFilter": "alpha_numeric", "SymbolsToWordsFilter": "symbol_to_word",
        "NumbersFilter": "numbers_ratio", "UrlsFilter": "urls_ratio", "BulletsFilter": "bullet_ratio",
        "WhiteSpaceFilter": "white_space", "ParenthesesFilter": "parentheses_ratio",
        "LongWordFilter": "max_word_length", "WordCountFilter": "word_count",
        "BoilerPlateStringFilter": "boilerplate_string_ratio", "MeanWordLengthFilter": "mean_word_length",
        "PunctuationFilter": "punctuation", "EllipsisFilter": "ellipsis",
        "CommonEnglishWordsFilter": "common_english_words", "WordsWithoutAlphabetsFilter": "words_without_alphabets",
        "PornographicUrlsFilter": "PornographicUrlsFilter", "RepeatedLinesFilter": "repeated_lines",
        "RepeatedParagraphsFilter": "repeated_paragraphs", "RepeatedLinesByCharFilter": "repeated_lines_char",
        "RepeatedParagraphsByCharFilter": "repeated_paragraphs_char",
        "RepeatingTopNGramsFilter": "repeating_top_3grams", "RepeatingDuplicateNGramsFilter": "repeating_dup_3gram",
    }


def test_documents_without_words_or_lines_are_dropped_not_an_error() -> None:
    """NeMo Curator's word and line ratios divide by zero on these; a run must not stop on one document."""
    blank = batch(text=["", "   ", "\n\n"])
    for document_filter in (SymbolsToWordsFilter(), BulletsFilter(), MeanWordLengthFilter(), PunctuationFilter(),
                            EllipsisFilter(), WordsWithoutAlphabetsFilter(), RepeatedLinesFilter(),
                            RepeatedLinesByCharFilter()):
        assert rows(ScoreFilter(document_filter).process(blank))["text"] == [], type(document_filter).__name__


def test_chinese_and_japanese_are_split_into_words_as_nemo_curator_splits_them() -> None:
    """NeMo Curator's word counts with jieba and MeCab: "你好。" is two words and "我喜欢学习中文。" at
    most five; "猫が寝ます。" at least five and "私は日本語のテキストを分割します。" at most eleven."""
    for lang, least, most, texts in (("zh", 2, 5, ["", "你好。", "我喜欢学习中文。"]),
                                     ("ja", 5, 11, ["", "猫が寝ます。", "私は日本語のテキストを分割します。"])):
        kept = rows(ScoreFilter(WordCountFilter(min_words=least, max_words=most, lang=lang)).process(batch(text=texts)))
        assert kept["text"] == texts[1:], lang
    assert WordCountFilter(lang="zh").score_document("我喜欢 学习中文。") == 5, "the space between words is no word"
    assert WordCountFilter(min_words=2, lang="de").score_document("zwei Wörter") == 2


@pytest.mark.parametrize("lang, blocked, named", [("zh", "jieba", "jieba"), ("ja", "MeCab", "mecab-python3"),
                                                  ("ja", "unidic_lite", "unidic-lite")])
def test_a_missing_word_segmenter_is_an_error_naming_the_extra_as_the_filter_is_built(
    lang: str, blocked: str, named: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)  # Python's own way to make a module not importable
    monkeypatch.setitem(sys.modules, "unidic", None)
    with pytest.raises(ImportError, match=rf"lang='{lang}'.*{named} is not installed.*beam-curator\[cjk\]"):
        RepeatingTopNGramsFilter(lang=lang)


def test_an_invalid_substring_position_is_refused() -> None:
    with pytest.raises(ValueError, match="middle"):
        SubstringFilter("x", "middle")


# --- end to end ---


def debian_slice(folder: Path, files: int = 3, per_file: int = 40) -> list[dict]:
    """The first ``files * per_file`` Debian descriptions as JSONL files; every fifth text made
    mojibake (its UTF-8 bytes read as Windows-1252), which UnicodeReformatter repairs."""
    with gzip.open(shared_data(DEBIAN), "rt") as handle:
        records = [json.loads(next(handle)) for _ in range(files * per_file)]
    for number, record in enumerate(records):
        if number % 5 == 0:
            record["text"] = (record["text"] + " \u2014 caf\u00e9").encode("utf-8").decode("cp1252", errors="replace")
    folder.mkdir(parents=True)
    for index in range(files):
        part = records[index * per_file:(index + 1) * per_file]
        (folder / f"part-{index}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in part))
    return records


def test_a_ported_pipeline_filters_and_repairs_as_the_functions_do_and_a_rerun_skips(tmp_path: Path) -> None:
    records = debian_slice(tmp_path / "in")
    words, repair = WordCountFilter(min_words=40), UnicodeReformatter()

    def pipeline(min_words: int = 40) -> Pipeline:
        return Pipeline("ported", stages=[
            JsonlReader(str(tmp_path / "in"), files_per_partition=1),
            ScoreFilter(WordCountFilter(min_words=min_words), score_field="words"),
            Modify(UnicodeReformatter()),
            JsonlWriter(str(tmp_path / "out")),
        ])

    checkpoint = str(tmp_path / "checkpoint")
    first = pipeline().run(checkpoint_path=checkpoint, runner="local")
    assert (first.partitions_pending, first.partitions_completed) == (3, 3)

    expected = [{**record, "text": repair.modify_document(record["text"]), "words": count}
                for record in records if words.keep_document(count := words.score_document(record["text"]))]
    assert 0 < len(expected) < len(records), "the slice must have documents on both sides of the threshold"
    assert any("\u00c3" in record["text"] for record in records), "the slice must have mojibake to repair"
    assert output_rows(tmp_path / "out") == sorted(expected, key=lambda row: json.dumps(row, sort_keys=True))
    assert not any("\u00c3" in row["text"] for row in output_rows(tmp_path / "out"))

    again = pipeline().run(checkpoint_path=checkpoint, runner="local")
    assert (again.partitions_pending, again.partitions_skipped, again.partitions_completed) == (0, 3, 0)
    with pytest.raises(PipelineChangedError, match="min_words"):
        pipeline(min_words=41).run(checkpoint_path=checkpoint, runner="local")


def test_chinese_and_japanese_descriptions_are_filtered_by_their_words_on_workers(tmp_path: Path) -> None:
    """The shared file's Chinese and Japanese descriptions through a pipeline on worker processes (the
    filters travel pickled, and each worker loads jieba and MeCab): kept are the documents whose word
    counts by both reach the threshold, where whitespace would have counted far fewer words."""
    with gzip.open(shared_data(MULTILINGUAL), "rt") as handle:
        records = [record for record in map(json.loads, handle) if record["lang"] in ("zh_CN", "ja")]
    (tmp_path / "in").mkdir()
    for lang in ("zh_CN", "ja"):
        chosen = [record for record in records if record["lang"] == lang][:100]
        (tmp_path / "in" / f"{lang}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in chosen))
    least = 40
    chinese, japanese = WordCountFilter(min_words=least, lang="zh"), WordCountFilter(min_words=least, lang="ja")
    summary = Pipeline("cjk", stages=[
        JsonlReader(str(tmp_path / "in"), files_per_partition=1),
        ScoreFilter([chinese, japanese], score_field=["zh_words", "ja_words"]),
        JsonlWriter(str(tmp_path / "out")),
    ]).run(checkpoint_path=str(tmp_path / "checkpoint"), runner="local-multiprocess", num_workers=2)
    assert summary.partitions_completed == 2

    input_rows = [row for row in map(json.loads, "".join(
        path.read_text() for path in sorted((tmp_path / "in").glob("*.jsonl"))).splitlines())]
    expected = [(row["package"], row["lang"], zh, ja) for row in input_rows
                if (zh := chinese.score_document(row["text"])) >= least and (ja := japanese.score_document(row["text"])) >= least]
    written = sorted((row["package"], row["lang"], row["zh_words"], row["ja_words"]) for row in output_rows(tmp_path / "out"))
    assert written == sorted(expected)
    assert {row[1] for row in written} == {"zh_CN", "ja"} and len(written) < len(input_rows)
    by_whitespace = sum(len(row["text"].split()) >= least for row in input_rows)
    assert by_whitespace < len(written) / 2, "the test must tell segmented words from whitespace-separated ones"
