"""datatrove's rule sets (issue 47): ours keep and drop exactly what datatrove 0.10's do, for the same
reasons, and C4's line removals leave the same text.

Each comparison runs datatrove's filter and ours side by side on real package descriptions (English,
and 18 languages) and on texts made to sit on each rule's edges; the settings are varied so that the
later checks of each filter decide some documents too (with the defaults, most short descriptions
stop at the first check). datatrove is a test dependency: without it the comparisons are skipped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest

from beam_curator import Pipeline
from beam_curator.stages.io import JsonlReader, JsonlWriter
from beam_curator.stages.text.filters import ScoreFilter
from beam_curator.stages.text.filters.datatrove_rules import (
    C4BadWordsFilter,
    C4ParagraphFilter,
    C4QualityFilter,
    DatatroveRules,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from beam_curator.tasks import DocumentBatch
from shared_data import DEBIAN, MULTILINGUAL, shared_data

PROSE = ("The quick brown fox jumps over the lazy dog and then it runs to the forest with the other animals. "
         "It is known that the dog has to be fed twice a day. ")
EDGE_CASES = [
    "", " ", "\n\n", "word", "one two three.", "#", "...", "\u2026",
    "\n".join(["- item"] * 10), "\n".join(["\u2022 bullet point of the list"] * 10),
    "\n".join(["and so it goes on..."] * 6), "\n".join(["This sentence ends well." for _ in range(6)]),
    PROSE * 6, (PROSE + "\n") * 6, (PROSE + "\n\n") * 4 + "An end of the text, with the words.",
    "Please enable javascript to see the page of the site.\n" + (PROSE + "\n") * 6,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n" + (PROSE + "\n") * 6,
    "We use {curly} brackets in this line.\n" + (PROSE + "\n") * 6,
    "This site uses cookies to track you.\nRead our privacy policy now.\n" + (PROSE + "\n") * 6,
    "A word " + "x" * 1001 + " that is very long.\n" + (PROSE + "\n") * 6,
    "It was cited [1] and [citation needed] with an [edit] mark.\n" + (PROSE + "\n") * 6,
    "e.g. this is it. And that!! ok... Mr. Smith went to Washington. U.S.A. is big.\nDon't stop; it's fine.",
    "Hello.  \t. World! Two  spaces. Here.\n\t Tabbed line here. It ends.",
    " ".join(["the cat sat on the mat"] * 30), " ".join(["alpha beta gamma delta epsilon"] * 12) + " end.",
    "# Heading\n## Sub\n### More # signs # everywhere # here #",
    ("x" * 250 + "\n") * 3, ("x" * 199 + "\n") * 5, ("y" * 300 + "\n") * 2,
    "\n".join(f"Line number {i} is a short one." for i in range(40)),
    "1234 5678 9012 3456 7890 !!! ??? ### $$$ %%% ^^^ &&& *** ((( )))",
]

STOPPED = "datatrove stops: ZeroDivisionError"

# Settings under which the later checks of each filter decide too.
GOPHER_QUALITY = [{}, {"min_doc_words": 5, "max_avg_word_length": 6, "min_stop_words": 1},
                  {"min_doc_words": None, "max_symbol_word_ratio": 0.01, "max_bullet_lines_ratio": 0.1}]
GOPHER_REPETITION = [{}, {"dup_para_frac": None, "dup_line_frac": None, "dup_para_char_frac": None,
                          "dup_line_char_frac": None, "top_n_grams": ((2, 0.02), (3, 0.03), (4, 0.04)),
                          "dup_n_grams": ((5, 0.02), (6, 0.02), (7, 0.01), (8, 0.01), (9, 0.01), (10, 0.01))}]
C4_QUALITY = [{}, {"min_num_sentences": 2, "filter_no_terminal_punct": False},
              {"min_num_sentences": 8, "min_words_per_line": 1}, {"split_paragraph": False, "min_num_sentences": 3}]
FINEWEB = [{}, {"line_punct_thr": 0.0, "short_line_thr": 1.0,
                                                                  "char_duplicates_ratio": 1.0, "new_line_ratio": 0.05}]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """700 English descriptions, 340 in other languages, and the edge cases."""
    def read(name: str, count: int) -> list[str]:
        with gzip.open(shared_data(name), "rt", encoding="utf-8") as lines:
            return [json.loads(line)["text"] for _, line in zip(range(count), lines)]
    multilingual = read(MULTILINGUAL, 5100)[::15]
    return read(DEBIAN, 700) + multilingual + EDGE_CASES


def datatrove_results(datatrove_filter, texts: list[str], languages: list[str] | None = None):
    """datatrove's reason for each text (None where kept), and each text as the filter left it."""
    from datatrove.data import Document

    reasons, outputs = [], []
    for index, text in enumerate(texts):
        metadata = {"language": languages[index]} if languages else {}
        doc = Document(text=text, id=str(index), metadata=metadata)
        try:
            result = datatrove_filter.filter(doc)
        except ZeroDivisionError:  # a text with no words or lines, where ours drops (see ratios.py)
            result = (False, STOPPED)
        kept, reason = (result, None) if isinstance(result, bool) else result
        reasons.append(None if kept else reason)
        outputs.append(doc.text)
    return reasons, outputs


OURS = {rule.__name__: rule for rule in (GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
                                         C4ParagraphFilter, FineWebQualityFilter)}


def our_results(stage, texts: list[str], **columns: list) -> tuple[list, list]:
    batch = DocumentBatch(data=pa.table({"text": texts, **columns}))
    table = stage.process(batch).to_pyarrow().to_pydict()
    return table["reason"], table["text"]


def assert_same(theirs, ours, texts: list[str]) -> None:
    differ = [(text[:80], their, our) for text, their, our in zip(texts, theirs, ours)
              if their != our and not (their == STOPPED and our is not None)]
    assert not differ, f"{len(differ)} differ, e.g. {differ[:3]}"


@pytest.mark.parametrize(("name", "settings"), [("GopherQualityFilter", s) for s in GOPHER_QUALITY]
                         + [("GopherRepetitionFilter", s) for s in GOPHER_REPETITION]
                         + [("C4QualityFilter", s) for s in C4_QUALITY]
                         + [("C4ParagraphFilter", {})]
                         + [("FineWebQualityFilter", s) for s in FINEWEB])
def test_same_decisions_and_text_as_datatrove(name: str, settings: dict, texts: list[str]) -> None:
    filters = pytest.importorskip("datatrove.pipeline.filters", reason="datatrove (a test dependency) is not installed")
    theirs = datatrove_results(getattr(filters, name)(**settings), texts)
    ours_stage = OURS[name](**settings, reason_field="reason")
    reasons, outputs = our_results(ours_stage, texts)
    assert_same(theirs[0], reasons, texts)
    assert_same(theirs[1], [out if reason is None else text for out, reason, text in zip(outputs, reasons, texts)],
                texts)
    assert any(reasons) and not all(reasons), "each setting should keep some texts and drop others"


def test_fineweb_chain_decides_as_datatrove_steps_in_turn(texts: list[str]) -> None:
    filters = pytest.importorskip("datatrove.pipeline.filters", reason="datatrove (a test dependency) is not installed")
    steps = [filters.GopherRepetitionFilter(), filters.GopherQualityFilter(min_doc_words=5),
             filters.C4QualityFilter(min_num_sentences=1), filters.FineWebQualityFilter()]
    expected_reasons, expected_texts = [], []
    for text in texts:
        reason, current = None, text
        for step in steps:
            step_reasons, step_texts = datatrove_results(step, [current])
            if step_reasons[0] is not None:
                reason = step_reasons[0]
                break
            current = step_texts[0]
        expected_reasons.append(reason)
        expected_texts.append(current if reason is None else text)
    chain = DatatroveRules([GopherRepetitionFilter(), GopherQualityFilter(min_doc_words=5),
                            C4QualityFilter(min_num_sentences=1), FineWebQualityFilter()], reason_field="reason")
    reasons, outputs = our_results(chain, texts)
    assert_same(expected_reasons, reasons, texts)
    assert_same(expected_texts, outputs, texts)
    assert 0 < reasons.count(None) < len(texts)


@pytest.fixture
def badwords_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small English and German list in a folder of ours, and the same files where datatrove looks for
    its downloads (its asset cache, moved to tmp_path for the test), so both read the same words."""
    folder = tmp_path / "ldnoobw"
    folder.mkdir()
    (folder / "en").write_text("damn\nbloody hell\nsm\nc*nt\n")
    (folder / "de").write_text("mist\nverdammt\n")
    cache = pytest.importorskip("huggingface_hub.utils._cache_assets", reason="datatrove is not installed")
    monkeypatch.setattr(cache, "HF_ASSETS_CACHE", str(tmp_path / "assets"))
    from datatrove.io import cached_assets_path, strip_protocol
    from datatrove.pipeline.filters.c4_filters import _BADWORDS_URL, _EN_BADWORDS_URL

    downloads = cached_assets_path(library_name="datatrove", namespace="filters", subfolder="c4_badwords")
    for language, url in (("en", _EN_BADWORDS_URL), ("de", _BADWORDS_URL + "de")):
        local = Path(downloads) / strip_protocol(url).replace("/", "_")
        local.write_text((folder / language).read_text())
        Path(f"{local}.completed").touch()
    return folder


@pytest.mark.parametrize("settings", [{}, {"keep_fraction": 0.5, "seed": 7}])
def test_bad_words_as_datatrove(settings: dict, texts: list[str], badwords_folder: Path) -> None:
    filters = pytest.importorskip("datatrove.pipeline.filters", reason="datatrove (a test dependency) is not installed")
    made = ["What a damn shame.", "Bloody hell, it broke!", "Damnation is a word.", "the c*nt list", "sm", "smile",
            "Das ist Mist.", "Mistake made."]
    corpus = texts[:400] + made
    languages = ["en"] * 400 + ["en"] * 6 + ["de"] * 2
    theirs = datatrove_results(filters.C4BadWordsFilter(**settings), corpus, languages)[0]
    ours = our_results(C4BadWordsFilter(**settings, badwords_path=str(badwords_folder), reason_field="reason"),
                       corpus, language=languages)[0]
    assert_same(theirs, ours, corpus)
    assert ours[-8:-6] == ["document_removed_with_badwords"] * 2 or settings


def test_bad_words_missing_list_names_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="LDNOOBW"):
        C4BadWordsFilter()
    rule = C4BadWordsFilter(badwords_path=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"raw\.githubusercontent\.com/LDNOOBW/.*/en"):
        rule.score_document("any text")
    with pytest.raises(ValueError, match="fail_on_missing_language"):
        our_results(C4BadWordsFilter(badwords_path=str(tmp_path), reason_field="reason"), ["x"], language=["xx"])


def test_a_rule_is_a_pipeline_stage_and_a_document_filter(tmp_path: Path) -> None:
    """As datatrove's: a rule in a pipeline's stage list drops documents, and C4's rewrites the kept
    ones; through ScoreFilter with ``invert`` the dropped ones come out with datatrove's reasons."""
    source = tmp_path / "in"
    source.mkdir()
    texts = [(PROSE + "\n") * 6 + "no end here", "Too short.", "Lorem ipsum dolor sit amet, it is said.\n" + PROSE * 6]
    (source / "part-0.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    Pipeline("rules", stages=[JsonlReader(str(source)), GopherQualityFilter(), C4QualityFilter(),
                              JsonlWriter(str(tmp_path / "out"))]).run(checkpoint_path=str(tmp_path / "checkpoint"))
    kept = [json.loads(line)["text"] for file in (tmp_path / "out").glob("*.jsonl") for line in file.open()]
    assert kept == [(PROSE.strip() + "\n") * 5 + PROSE.strip()]

    dropped = ScoreFilter(GopherQualityFilter(), score_field="filter_reason", invert=True).process(
        DocumentBatch(data=pa.table({"text": texts}))).to_pyarrow().to_pydict()
    assert dropped["filter_reason"] == ["gopher_short_doc"]


def test_settings_datatrove_has_and_we_do_not_are_refused() -> None:
    with pytest.raises(ValueError, match="reason_field"):
        GopherQualityFilter(exclusion_writer=object())
    with pytest.raises(ValueError, match="English"):
        FineWebQualityFilter(language="deu")


def test_chunks_another_thread_learned_meanwhile_are_not_learned_again() -> None:
    """Threads of a worker share the tokenizer: one that found a chunk unknown waits for the lock while
    another learns it, then learns what is still missing, which may be nothing (that raised
    StopIteration, a RuntimeError inside Beam's generators: CI saw it once on the local runner)."""
    from beam_curator.stages.text.filters.datatrove_rules.words import EnglishTokenizer

    tokenizer = EnglishTokenizer()
    chunks = "Cats don't sleep.".split()
    tokenizer._learn(chunks)
    tokenizer._learn(chunks)  # what the waiting thread does once it holds the lock
    assert tokenizer.words("Cats don't sleep.") == ["Cats", "do", "n't", "sleep", "."]


def test_a_full_memory_of_chunks_is_emptied_and_the_texts_words_still_come_back(monkeypatch) -> None:
    from beam_curator.stages.text.filters.datatrove_rules import words

    monkeypatch.setattr(words, "MAX_REMEMBERED_CHUNKS", 2)
    tokenizer = words.EnglishTokenizer()
    assert tokenizer.words("Cats sleep.") == ["Cats", "sleep", "."]
    assert tokenizer.words("Cats don't sleep.") == ["Cats", "do", "n't", "sleep", "."]  # 2 known + 1 new > 2: emptied first
