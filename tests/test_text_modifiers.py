"""The document modifiers and the ``Modify`` stage (issue 47), at NeMo Curator's import paths.

Each modifier changes texts as NeMo Curator's does (the facts of its
``tests/stages/text/modules/test_modifiers.py``, on texts of our own); ``Modify`` reads and writes
the fields NeMo Curator's rules say, in place by default.
"""

from __future__ import annotations

import functools

import pyarrow as pa
import pytest

from beam_curator.stages.text.modifiers import (
    BoilerPlateStringModifier,
    DocumentModifier,
    LineRemover,
    MarkdownRemover,
    Modify,
    NewlineNormalizer,
    QuotationRemover,
    Slicer,
    UrlRemover,
)
from beam_curator.stages.text.modifiers.string import Slicer as SlicerAtNemosPath
from beam_curator.stages.text.modifiers.unicode import UnicodeReformatter
from beam_curator.tasks import DocumentBatch


def batch(**columns: list) -> DocumentBatch:
    return DocumentBatch(dataset_name="modified", data=pa.table(columns))


def modified(modifier: DocumentModifier, texts: list[str]) -> list[str]:
    """The texts after a ``Modify`` stage of ``modifier``, as a pipeline would write them."""
    return Modify(modifier).process(batch(text=texts)).to_pyarrow()["text"].to_pylist()


# --- the modifiers ---


def test_unicode_reformatter_repairs_mojibake_but_leaves_unusual_characters_by_default() -> None:
    broken = ["caf\u00c3\u00a9 cr\u00c3\u00a8me", "\u00e2\u0153\u201d done", "Fish &amp; chips", "\x1b[31mred\x1b[0m",
              "Already clean."]
    assert modified(UnicodeReformatter(), broken) == [
        "caf\u00e9 cr\u00e8me", "\u2714 done", "Fish & chips", "red", "Already clean."]
    # NeMo Curator's defaults, unlike ftfy's: ligatures, curly quotes, full-width letters and
    # decomposed accents stay as they are...
    unusual = ["\ufb01ne", "\u201cquoted\u201d", "\uff21\uff22", "e\u0301"]
    assert modified(UnicodeReformatter(), unusual) == unusual
    # ...unless asked for.
    assert modified(UnicodeReformatter(uncurl_quotes=True, fix_latin_ligatures=True, normalization="NFC"), unusual) == [
        "fine", '"quoted"', "\uff21\uff22", "\u00e9"]


def test_unicode_reformatter_takes_a_whole_ftfy_config() -> None:
    from ftfy import TextFixerConfig

    assert modified(UnicodeReformatter(config=TextFixerConfig(uncurl_quotes=True)), ["\u2018a\u2019"]) == ["'a'"]


def test_newline_normalizer_leaves_at_most_one_blank_line() -> None:
    texts = ["one\ntwo", "one\n\ntwo", "one\n\n\n\n\ntwo\n\n\nthree", "a\r\n\r\n\r\nb", "a\r\n\r\nb"]
    assert modified(NewlineNormalizer(), texts) == [
        "one\ntwo", "one\n\ntwo", "one\n\ntwo\n\nthree", "a\r\n\r\nb", "a\r\n\r\nb"]


def test_url_remover_deletes_web_addresses_in_any_case_and_nothing_else() -> None:
    texts = ["go to www.example.org now", "at http://example.org/x?y=1.", "HTTPS://EXAMPLE.ORG",
             "clone git@example.org:team/repo.git"]
    assert modified(UrlRemover(), texts) == ["go to  now", "at ", "", "clone git@example.org:team/repo.git"]


def test_line_remover_removes_only_lines_equal_to_a_pattern() -> None:
    remover = LineRemover(["Share this", "Menu"])
    texts = ["Menu\nThe story\nShare this", "Share this story\n Menu", "Menu", ""]
    assert modified(remover, texts) == ["The story", "Share this story\n Menu", "", ""]


def test_markdown_remover_keeps_the_words_and_a_links_address() -> None:
    texts = ["a **strong** and *soft* and _lined_ word", "see [the site](https://example.org)",
             "**outer *inner* outer**", "**one****two**", "*left open", "**Title**\n_note_"]
    assert modified(MarkdownRemover(), texts) == [
        "a strong and soft and lined word", "see https://example.org", "outer inner outer", "onetwo", "*left open",
        "Title\nnote"]


@pytest.mark.parametrize("text, expected", [
    ('"A whole quote."', "A whole quote."),
    ('"Over\ntwo lines"', "Over\ntwo lines"),
    ('"A quoted line"\nthen more"', '"A quoted line"\nthen more"'),  # its first line is the quotation
    ('He said "so".', 'He said "so".'),
    ('""', '""'),  # too short
    ('  "padded"  ', '  "padded"  '),  # whitespace outside the quotes
])
def test_quotation_remover_unwraps_a_quoted_document(text: str, expected: str) -> None:
    assert modified(QuotationRemover(), [text]) == [expected]


@pytest.mark.parametrize("slicer, text, expected", [
    (Slicer(left=4, right=9), "the quick fox", "quick"),
    (Slicer(left="<b>"), "x <b>bold</b> y", "<b>bold</b> y"),
    (Slicer(left="<b>", include_left=False), "x <b>bold</b> y", "bold</b> y"),
    (Slicer(right="</b>"), "x <b>bold</b> y", "x <b>bold</b>"),
    (Slicer(right="</b>", include_right=False), "x <b>bold</b> y", "x <b>bold"),
    (Slicer(left="[", right="]", include_left=False, include_right=False), "a [ inner ] b", "inner"),
    (Slicer(left="|", right="|"), "a|b|c|d", "|b|c|"),  # the first left marker, the last right one
    (Slicer(left="missing"), "text", ""),
    (Slicer(right="missing"), "text", ""),
    (Slicer(left=99), "text", ""),
    (Slicer(), "  padded  ", "padded"),
    (Slicer(strip=False), "  padded  ", "  padded  "),
])
def test_slicer_keeps_the_part_between_its_bounds(slicer: Slicer, text: str, expected: str) -> None:
    assert slicer.modify_document(text) == expected
    assert SlicerAtNemosPath is Slicer


def test_boilerplate_modifier_cuts_a_run_of_boilerplate_at_the_top_or_bottom_only() -> None:
    at_bottom = "Real content.\n\nMore content.\n\nPrivacy Policy\n\nTerms of use"
    at_top = "We use cookies.\n\nReal content."
    in_middle = "Real content.\n\nPrivacy policy\n\nMore content."
    everywhere = "Privacy policy\n\nTerms of use"
    assert modified(BoilerPlateStringModifier(), [at_bottom, at_top, in_middle, everywhere, "Lorem ipsum dolor"]) == [
        "Real content.\n\nMore content.", "Real content.", in_middle, everywhere, ""]
    assert modified(BoilerPlateStringModifier(remove_if_at_top_or_bottom=False), [at_top, "Clean."]) == ["", "Clean."]


# --- Modify ---


def test_modify_writes_in_place_by_default_or_to_a_new_field() -> None:
    assert Modify(str.upper).process(batch(text=["a", "b"])).to_pyarrow().to_pydict() == {"text": ["A", "B"]}
    written = Modify(str.upper, output_fields="loud").process(batch(text=["a", "b"]))
    assert written.to_pyarrow().to_pydict() == {"text": ["a", "b"], "loud": ["A", "B"]}


def test_modifiers_apply_in_order_each_seeing_what_the_one_before_wrote() -> None:
    def shout(text: str) -> str:
        return text.upper()

    def exclaim(text: str) -> str:
        return text + "!"

    stage = Modify([str.strip, shout, exclaim])
    assert stage.process(batch(text=["  hi  "])).to_pyarrow().to_pydict() == {"text": ["HI!"]}
    assert stage.stage_name == "modifier_chain_of_strip_shout_exclaim"
    separate = Modify([str.strip, shout], output_fields=["stripped", "shouted"])
    assert separate.process(batch(text=[" hi "])).to_pyarrow().to_pydict() == {
        "text": [" hi "], "stripped": ["hi"], "shouted": [" HI "]}


def test_a_modifier_of_several_fields_gets_them_as_keyword_arguments() -> None:
    def headline(title: str, body: str) -> str:
        return f"{title}: {body}"

    data = batch(title=["News", "Sport"], body=[" rain ", "won"])
    stage = Modify([str.strip, headline], input_fields=[["body"], ["title", "body"]], output_fields=[None, "line"])
    assert stage.process(data).to_pyarrow().to_pydict() == {
        "title": ["News", "Sport"], "body": ["rain", "won"], "line": ["News: rain", "Sport: won"]}


def test_modify_is_named_after_its_modifier() -> None:
    assert Modify(MarkdownRemover()).stage_name == "MarkdownRemover"
    assert Modify(BoilerPlateStringModifier()).stage_name == "boilerplate_string_ratio"
    assert Modify(str.upper, name="upper").stage_name == "upper"


@pytest.mark.parametrize("settings, error", [
    ({"modifier_fn": MarkdownRemover(), "input_fields": ["a", "b"]}, ValueError),  # two fields, one modifier
    ({"modifier_fn": str.upper, "input_fields": [["a", "b"]]}, ValueError),  # nowhere to write in place
    ({"modifier_fn": [str.upper, str.lower], "output_fields": ["x", "y", "z"]}, ValueError),
    ({"modifier_fn": []}, ValueError),
    ({"modifier_fn": str.upper, "input_fields": None}, ValueError),
    ({"modifier_fn": 123}, TypeError),
    ({"modifier_fn": str.upper, "input_fields": ["a", ["b"]]}, TypeError),
])
def test_modify_refuses_settings_it_cannot_follow(settings: dict, error: type) -> None:
    with pytest.raises(error):
        Modify(**settings)


def test_an_empty_batch_keeps_its_fields_and_gains_the_new_one() -> None:
    empty = batch(text=pa.array([], pa.string()))
    assert Modify(str.upper).process(empty).to_pyarrow().schema.field("text").type == pa.string()
    assert Modify(str.upper, output_fields="loud").process(empty).to_pyarrow().column_names == ["text", "loud"]


def test_the_fingerprint_changes_with_a_modifiers_settings() -> None:
    """A rerun after changing a modifier's settings must not keep the first run's output as complete."""
    assert Modify(Slicer(left=1)).fingerprint() != Modify(Slicer(left=2)).fingerprint()
    assert Modify(UnicodeReformatter()).fingerprint() != Modify(UnicodeReformatter(uncurl_quotes=True)).fingerprint()
    assert Modify(str.upper).fingerprint() != Modify(str.lower).fingerprint()
    assert Modify(functools.partial(str.replace, "a")).fingerprint() != Modify(
        functools.partial(str.replace, "b")).fingerprint()
    assert Modify(LineRemover(["x"])).fingerprint() == Modify(LineRemover(["x"])).fingerprint()
