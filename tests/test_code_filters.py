"""The code filters (``stages.text.filters.heuristic.code``) keep and drop what NeMo Curator's do.

Each filter is checked on the facts NeMo Curator's own tests assert for it (``TestCodeFilters`` in
``tests/stages/text/modules/test_filters.py``), on texts of our own, and at its thresholds, where a
``<`` for ``<=`` shows; then on the texts its filter would divide by zero or raise on, which are
dropped here. The SentencePiece model is trained here on Debian's descriptions, and the metadata CSV
written here. Beyond the scores: the missing-extra error, pickling to workers, stable fingerprints,
and a pipeline file in NeMo Curator's layout read by the filter command's loader.
"""

from __future__ import annotations

import gzip
import json
import logging
import pickle
import subprocess
import sys
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pytest
import sentencepiece
import yaml

from shared_data import DEBIAN, shared_data

from beam_curator.configs import load_filter_config
from beam_curator.stages.text.filters import DocumentFilter, Score, ScoreFilter
from beam_curator.stages.text.filters.heuristic import code
from beam_curator.stages.text.filters.heuristic.code import (
    AlphaFilter,
    GeneralCommentToCodeFilter,
    HTMLBoilerplateFilter,
    NumberOfLinesOfCodeFilter,
    PerExtensionFilter,
    PythonCommentToCodeFilter,
    TokenizerFertilityFilter,
    XMLHeaderFilter,
    line_statistics,
)
from beam_curator.stages.text.settings import describe
from beam_curator.tasks import DocumentBatch

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import kept_texts  # noqa: E402


def batch(*texts: str) -> DocumentBatch:
    return DocumentBatch(dataset_name="code", data=pa.table({"text": list(texts)}))


def scores(document_filter: DocumentFilter, *texts: str) -> list:
    return Score(document_filter, score_field="score").process(batch(*texts)).to_pyarrow().column("score").to_pylist()


@pytest.fixture(scope="module")
def tokenizer_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentencePiece model of 200 pieces trained on 300 of Debian's descriptions (half a second)."""
    with gzip.open(shared_data(DEBIAN), "rt", encoding="utf-8") as handle:
        lines = [json.loads(line)["text"].replace("\n", " ") for line in islice(handle, 300)]
    prefix = tmp_path_factory.mktemp("sentencepiece") / "debian"
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=200,
                                             hard_vocab_limit=False, minloglevel=2)
    return prefix.with_suffix(".model")


# NeMo Curator's column names, with an unnamed index column and a column the filter does not read, as its
# file has; the rows are ours. "Custom!" and "remove" are cells of its file that hold no number.
METADATA = """\
,extension,language,count,Include,Long_line_threshold,Alphanum_threshold,Alpha filter
0,cpp,c++,1000,1,40,0.5,
1,h,c++,1000,0,1000,0.25,
2,,c++,12,1,,,
3,cs,c-sharp,1000,1,1000,0.25,0.25
4,asm,assembly,1000,1,Custom! Not a number,0.25,remove
"""


@pytest.fixture
def metadata_csv(tmp_path: Path) -> Path:
    path = tmp_path / "code_meta.csv"
    path.write_text(METADATA)
    return path


# --- comments ---


def test_python_comments_and_docstrings_count_as_natural_text() -> None:
    commented, bare, all_comments, documented = (
        "# add one\nx = y + 1", "x = y + 1", "# one\n# two and then more", '"""Adds one."""\nx = y + 1')
    assert kept_texts(PythonCommentToCodeFilter(), commented, bare, all_comments, documented) == [commented, documented]
    # "# add one" (the # counted) and "Adds one." (the quotes not): characters over the whole text.
    assert scores(PythonCommentToCodeFilter(), commented, bare, documented) == [9 / 19, 0.0, 9 / 25]


def test_python_comment_ratio_bounds_are_both_kept() -> None:
    text = "# ab\nx = 1"  # 4 of 10 characters
    assert kept_texts(PythonCommentToCodeFilter(0.4, 0.4), text) == [text]
    assert kept_texts(PythonCommentToCodeFilter(0.41, 1.0), text) == []
    assert kept_texts(PythonCommentToCodeFilter(0.0, 0.39), text) == []


def test_python_that_does_not_parse_and_empty_text_score_zero() -> None:
    """0 for a syntax error as in NeMo Curator; it divides by zero on an empty text."""
    assert scores(PythonCommentToCodeFilter(), "def f(:\n    # lost\n", "") == [0.0, 0.0]
    assert kept_texts(PythonCommentToCodeFilter(), "def f(:\n    # lost\n", "") == []


def test_docstrings_are_counted_cleaned_and_only_for_modules_classes_and_plain_functions() -> None:
    nested = 'class A:\n    """Two\n    lines."""\n    def f(self):\n        """One."""\n'
    assert scores(PythonCommentToCodeFilter(), nested) == [len("Two\nlines.\nOne.") / len(nested)]
    assert scores(PythonCommentToCodeFilter(), 'async def f():\n    """Not counted."""\n') == [0.0]


def test_general_comments_are_counted_without_their_markers() -> None:
    line, bare, all_comments, block = (
        '// say hi\nputs("hi");', 'puts("hi");', "//only a comment here", '/*\nsay hi\n*/\nputs("hi");')
    cpp = GeneralCommentToCodeFilter("text/x-c++")
    assert kept_texts(cpp, line, bare, all_comments, block) == [line, block]
    assert scores(cpp, line, block) == [len(" say hi") / len(line), len("\nsay hi\n") / len(block)]
    assert scores(cpp, "// a\n// b") == [len(" a  b") / 9]  # comments joined by a space


def test_general_comment_ratio_bounds_are_both_kept() -> None:
    text = "//ab\nx = 1;"  # "ab": 2 of 11 characters
    assert kept_texts(GeneralCommentToCodeFilter("text/x-c", 2 / 11, 2 / 11), text) == [text]
    assert kept_texts(GeneralCommentToCodeFilter("text/x-c", 0.19, 1.0), text) == []


def test_code_the_comment_parser_fails_on_scores_9999_and_empty_text_zero() -> None:
    assert scores(GeneralCommentToCodeFilter("text/x-c"), "/* never closed", "") == [9999.0, 0.0]
    assert kept_texts(GeneralCommentToCodeFilter("text/x-c", 0.0, 10_000.0), "/* never closed", "") == ["/* never closed", ""]


def test_a_mime_type_the_comment_parser_does_not_read_is_refused_as_the_filter_is_built() -> None:
    with pytest.raises(ValueError, match=r"comment-parser reads no 'text/x-cobol'; it reads .*text/x-c\+\+"):
        GeneralCommentToCodeFilter("text/x-cobol")


# --- length and tokens ---


def test_number_of_lines_keeps_the_bounds() -> None:
    texts = ["one", "one\ntwo", "one\ntwo\nthree", "one\ntwo\nthree\nfour"]
    assert kept_texts(NumberOfLinesOfCodeFilter(min_lines=2, max_lines=3), *texts) == texts[1:3]
    assert scores(NumberOfLinesOfCodeFilter(), "", "x\n") == [1, 2]  # newlines plus one


def test_tokenizer_fertility_is_characters_per_piece(tokenizer_model: Path) -> None:
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(tokenizer_model))
    texts = ["A library for reading and writing files", "zqxj vkwp 0x7f3a9c"]
    expected = [len(text) / len(pieces.encode_as_pieces(text)) for text in texts]
    assert scores(TokenizerFertilityFilter(tokenizer_model), *texts) == expected
    assert expected[0] > 2.5 > expected[1]  # the default keeps English prose and drops the rest
    assert kept_texts(TokenizerFertilityFilter(tokenizer_model), *texts) == texts[:1]
    assert kept_texts(TokenizerFertilityFilter(tokenizer_model, min_char_to_token_ratio=expected[1]), *texts) == texts


def test_text_without_pieces_scores_minus_one(tokenizer_model: Path) -> None:
    assert scores(TokenizerFertilityFilter(tokenizer_model), "") == [-1.0]
    assert kept_texts(TokenizerFertilityFilter(tokenizer_model), "") == []


def test_the_tokenizer_path_is_required_and_checked_as_the_filter_is_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs path_to_tokenizer"):
        TokenizerFertilityFilter()
    with pytest.raises(FileNotFoundError, match="no SentencePiece model file at .*absent.model"):
        TokenizerFertilityFilter(tmp_path / "absent.model")
    (tmp_path / "text.model").write_text("not a model")
    with pytest.raises(ValueError, match="text.model is not a SentencePiece model file"):
        TokenizerFertilityFilter(tmp_path / "text.model")


# --- files that are not what their extension says ---


def test_an_xml_header_within_the_searched_prefix_drops_the_file() -> None:
    header = "<?xml version="
    texts = ["int main() {}", f'{header}"1.0"?>', f"shifted a little {header}", "x" * 86 + header, "x" * 87 + header]
    assert kept_texts(XMLHeaderFilter(), *texts) == [texts[0], texts[4]]  # the last one's header ends at character 101
    assert kept_texts(XMLHeaderFilter(char_prefix_search_length=101), texts[4]) == []


def test_alpha_share_keeps_text_and_drops_symbols() -> None:
    texts = ["plain words only", "{}[]<>;#@!", "mix <>", "a===", "a===="]
    assert kept_texts(AlphaFilter(), *texts) == ["plain words only", "mix <>", "a==="]  # 1/4 is the default minimum
    assert scores(AlphaFilter(), "é1", "\u0915\u093f", "") == [0.5, 1.0, 0.0]  # Unicode Alphabetic; a vowel sign counts


PAGE = """<!DOCTYPE html>
<html><head><title>Release notes</title></head>
<body><h1>What changed in this release</h1>
<p>The reader now accepts compressed files, and the writer keeps the order of the input records.</p>
</body></html>"""
BOILERPLATE = """<!DOCTYPE html>
<html><head><title>Shop</title></head>
<body><div class="nav"><div class="row"><span>Home</span> <span>Cart</span></div></div>
<div class="main"><div class="row"><div class="cell"><p>Hi</p></div></div>
<div class="row"><div class="cell"><p>Sale</p></div></div></div></body></html>"""
SHORT = "<html><body>hello world</body></html>"


def test_html_with_little_visible_text_is_boilerplate() -> None:
    assert kept_texts(HTMLBoilerplateFilter(), PAGE, BOILERPLATE, SHORT) == [PAGE]
    assert scores(HTMLBoilerplateFilter(), SHORT) == [0.0]  # under 100 visible characters


def test_html_visible_text_share_at_the_bounds_and_without_scripts() -> None:
    page = "<p>" + "a" * 100 + "</p>"
    assert scores(HTMLBoilerplateFilter(), page) == [100 / 107]
    assert kept_texts(HTMLBoilerplateFilter(min_lang_content_ratio=100 / 107), page) == [page]
    assert kept_texts(HTMLBoilerplateFilter(min_lang_content_num_chars=101), page) == []
    scripted = "<script>" + "var a = 1; " * 20 + "</script><style>p {}</style><p>short</p>"
    assert scores(HTMLBoilerplateFilter(min_lang_content_num_chars=0), scripted) == [len("short") / len(scripted)]


def test_markup_the_parser_rejects_and_empty_text_score_zero() -> None:
    """NeMo Curator's filter raises on both (bs4's ParserRejectedMarkup, ZeroDivisionError)."""
    assert scores(HTMLBoilerplateFilter(min_lang_content_num_chars=0), "<![ x", "") == [0.0, 0.0]


# --- limits per language and extension ---


def test_a_short_cpp_file_passes_its_extension_limits(metadata_csv: Path) -> None:
    source = '#include <cstdio>\nint main() {\n    puts("Hi!");\n    return 0;\n}\n'
    assert kept_texts(PerExtensionFilter("c++", "cpp", metadata_file=metadata_csv), source) == [source]


@pytest.mark.parametrize("text, expected", [
    ("", (0, 0.0)), ("\n", (0, 0.0)), ("ab\n", (2, 1.0)), ("a longer line\nshort", (13, 9.0))])
def test_line_statistics_are_the_longest_and_mean_line_length(text: str, expected: tuple[int, float]) -> None:
    assert line_statistics(text) == expected


def test_the_longest_line_and_the_alphanumeric_share_limits(metadata_csv: Path) -> None:
    cpp = PerExtensionFilter("c++", "cpp", metadata_file=metadata_csv)  # lines up to 40, alphanumerics from 0.5
    forty, forty_one = "a" * 40, "a" * 41
    half, under_half = "ab;;", "ab;;;"  # 2 of 4, 2 of 5
    assert kept_texts(cpp, forty, forty_one, half, under_half) == [forty, half]
    assert scores(cpp, forty, forty_one, "") == [1, 0, 0]  # empty: no alphanumeric share, NeMo divides by zero


def test_the_mean_line_length_and_letter_share_limits(metadata_csv: Path) -> None:
    cs = PerExtensionFilter("c-sharp", "cs", metadata_file=metadata_csv)  # mean 100 (long lines 1000), letters 0.25
    mean_100, mean_101 = "a" * 100 + "\n" + "a" * 100, "a" * 101 + "\n" + "a" * 101
    letters, too_few = "a1.,", "a1.,."  # 1 of 4, 1 of 5
    assert kept_texts(cs, mean_100, mean_101, letters, too_few) == [mean_100, letters]


def test_excluded_rows_unnumbered_cells_and_files_without_extension(metadata_csv: Path) -> None:
    assert kept_texts(PerExtensionFilter("c++", "h", metadata_file=metadata_csv), "int f();") == []  # Include 0
    no_limits = ";" * 2000
    assert kept_texts(PerExtensionFilter("c++", None, metadata_file=metadata_csv), no_limits, "") == [no_limits, ""]
    assembly = PerExtensionFilter("assembly", "asm", metadata_file=metadata_csv)  # no line or letter limit
    assert kept_texts(assembly, "mov ax, 1 " * 500) == ["mov ax, 1 " * 500]


def test_an_extension_without_a_row_drops_every_file_with_one_warning(metadata_csv: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=code.__name__):
        docker = PerExtensionFilter("c++", "dockerfile", metadata_file=metadata_csv)
    assert "no row for language 'c++' and extension 'dockerfile'" in caplog.text
    assert kept_texts(docker, "FROM debian", "int main() {}") == []


def test_a_dataset_language_name_finds_the_metadata_rows(metadata_csv: Path) -> None:
    assert PerExtensionFilter("C#", "cs", metadata_file=metadata_csv).score_document("class A {}") == 1


def test_the_metadata_file_is_checked_as_the_filter_is_built(tmp_path: Path, metadata_csv: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Include, Long_line_threshold, Alphanum_threshold, Alpha filter"):
        PerExtensionFilter("c++", "cpp", metadata_file=tmp_path / "absent.csv")
    with pytest.raises(FileNotFoundError, match="no metadata file code_meta.csv"):
        PerExtensionFilter("c++", "cpp")  # NeMo Curator's default: a file in the working folder
    (tmp_path / "short.csv").write_text("language,extension,Include\nc++,cpp,1\n")
    with pytest.raises(ValueError, match="lacks the column.s. Long_line_threshold, Alphanum_threshold, Alpha filter"):
        PerExtensionFilter("c++", "cpp", metadata_file=tmp_path / "short.csv")
    with pytest.raises(ValueError, match="no rows for the language 'rust'"):
        PerExtensionFilter("rust", "rs", metadata_file=metadata_csv)


# --- the extra, the workers and the checkpoint ---


@pytest.mark.parametrize("blocked, build", [
    (("bs4",), lambda model: HTMLBoilerplateFilter()),
    (("sentencepiece",), lambda model: TokenizerFertilityFilter(model)),
    (("comment_parser", "comment_parser.comment_parser"), lambda model: GeneralCommentToCodeFilter("text/x-c")),
    (("magic",), lambda model: GeneralCommentToCodeFilter("")),
], ids=["beautifulsoup4", "sentencepiece", "comment-parser", "python-magic"])
def test_a_missing_package_of_the_extra_is_named_with_the_extra(
        blocked: tuple[str, ...], build: Callable, tokenizer_model: Path, monkeypatch) -> None:
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r"pip install 'beam-curator\[code\]'"):
        build(tokenizer_model)


def test_the_module_imports_without_the_extra() -> None:
    blocked = "bs4", "sentencepiece", "comment_parser", "magic"
    script = (f"import sys; sys.modules.update(dict.fromkeys({blocked!r})); "
              "from beam_curator.stages.text.filters.heuristic.code import NumberOfLinesOfCodeFilter as F; "
              "print(F().score_document('a\\nb'))")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout == "2\n"


def every_filter(model: Path, metadata: Path) -> list[Callable[[], DocumentFilter]]:
    return [PythonCommentToCodeFilter, lambda: GeneralCommentToCodeFilter("text/x-c"), NumberOfLinesOfCodeFilter,
            lambda: TokenizerFertilityFilter(model), XMLHeaderFilter, AlphaFilter, HTMLBoilerplateFilter,
            lambda: PerExtensionFilter("c++", "cpp", metadata_file=metadata)]


SAMPLES = ["# sum\nx = 1 + 2\n", "/* note */ int x;", PAGE, "", "<?xml version='1.0'?>"]


def test_each_filter_pickles_to_a_worker_and_scores_the_same(tokenizer_model: Path, metadata_csv: Path) -> None:
    for build in every_filter(tokenizer_model, metadata_csv):
        document_filter = build()
        expected = [document_filter.score_document(text) for text in SAMPLES]
        code.sentencepiece_model.cache_clear()  # a fresh worker: no model loaded yet
        copy = pickle.loads(pickle.dumps(document_filter))
        ScoreFilter(copy).setup()
        assert [copy.score_document(text) for text in SAMPLES] == expected, type(copy).__name__
        assert copy.name == document_filter.name


def test_the_fingerprint_is_the_same_for_the_same_settings(tokenizer_model: Path, metadata_csv: Path) -> None:
    for build in every_filter(tokenizer_model, metadata_csv):
        assert describe(build()) == describe(build())
        json.dumps(describe(build()))  # a JSON value, the model or parser nowhere in it
    assert describe(TokenizerFertilityFilter(tokenizer_model, 2.0)) != describe(TokenizerFertilityFilter(tokenizer_model))
    changed = metadata_csv.parent / "changed.csv"
    changed.write_text(METADATA.replace("0,cpp,c++,1000,1,40,", "0,cpp,c++,1000,1,80,"))
    assert (describe(PerExtensionFilter("c++", "cpp", metadata_file=changed))["settings"]["_rules"]
            != describe(PerExtensionFilter("c++", "cpp", metadata_file=metadata_csv))["settings"]["_rules"])


def score_filter(code_filter: str, score_field: str | None = None, **parameters: object) -> dict:
    """A ``ScoreFilter`` entry of NeMo Curator's pipeline files around one of its code filters."""
    return {"_target_": "nemo_curator.stages.text.filters.score_filter.ScoreFilter",
            "filter_obj": {"_target_": f"nemo_curator.stages.text.filters.heuristic.code.{code_filter}", **parameters},
            "text_field": "${text_field}", "score_field": score_field}


# The layout of NeMo Curator's config/text/code_filter_pipeline.yaml (Hydra's keys, values left ??? for the
# command line, a reader and a writer around ScoreFilter entries), with filters and settings of our choosing.
PIPELINE = {
    "defaults": ["_self_", {"override hydra/job_logging": "none"}, {"override hydra/hydra_logging": "none"}],
    "hydra": {"run": {"dir": "."}, "output_subdir": None},
    "documentation": "Python files with some comments, a few lines at least, and text the tokenizer knows.\n",
    "input_path": "???", "output_path": "???", "text_field": "text", "path_to_tokenizer": "???",
    "stages": [
        {"_target_": "nemo_curator.stages.text.io.reader.JsonlReader", "file_paths": "${input_path}", "fields": None},
        score_filter("PythonCommentToCodeFilter", min_comment_to_code_ratio=0.001, max_comment_to_code_ratio=0.85),
        score_filter("NumberOfLinesOfCodeFilter", min_lines=3),
        score_filter("TokenizerFertilityFilter", "fertility", path_to_tokenizer="${path_to_tokenizer}",
                     min_char_to_token_ratio=1.2),
        {"_target_": "nemo_curator.stages.text.io.writer.JsonlWriter", "path": "${output_path}", "fields": None},
    ],
}


def test_a_nemo_curator_code_pipeline_file_builds_our_filters(tokenizer_model: Path, tmp_path: Path) -> None:
    config_file = tmp_path / "code_filters.yaml"
    config_file.write_text(yaml.safe_dump(PIPELINE, sort_keys=False))
    config = load_filter_config(str(config_file), {"path_to_tokenizer": str(tokenizer_model)})
    built = [stage.filter_obj[0] for stage in config.stages]
    assert [type(document_filter) for document_filter in built] == [
        PythonCommentToCodeFilter, NumberOfLinesOfCodeFilter, TokenizerFertilityFilter]
    assert [stage.stage_name for stage in config.stages] == ["python_comment_ratio", "num_lines", "tokenizer_fertility"]
    good = "# Reads the list of files.\nfiles = open('list').read()\nprint(files)\n"
    # Dropped by each filter in turn: no comment, two lines, hex the tokenizer cuts into a piece a character.
    texts = [good, "x = 1\ny = 2\nz = 3\n", "# short\nx = 1", "# q\nq = [0x1f, 0x2e, 0x3d]\nz = 7\n"]
    documents, remaining = batch(*texts), []
    for stage in config.stages:
        stage.setup()
        documents = stage.process(documents)
        remaining.append(documents.num_items)
    assert remaining == [3, 2, 1]
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(tokenizer_model)).encode_as_pieces(good)
    assert documents.to_pyarrow().to_pydict() == {"text": [good], "fertility": [len(good) / len(pieces)]}
