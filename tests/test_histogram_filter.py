"""NeMo Curator's ``HistogramFilter`` (issue 47), on histograms in fairseq's layout built here from
the shared file's English and Chinese descriptions (fairseq's own are a download this machine cannot
make): the facts NeMo Curator's test asserts with fairseq's, the missing-file error, and a changed
histogram seen by the checkpoint's settings."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from curator_helpers import kept_texts  # noqa: E402
from shared_data import MULTILINGUAL, shared_data  # noqa: E402

from beam_curator.stages.text.filters.histogram import HistogramFilter  # noqa: E402
from beam_curator.stages.text.settings import describe  # noqa: E402

ENGLISH = ["This is a perfectly fine English document.", "But if you insist that this is written in Chinese,",
           "it's likely that something is fishy."]
CHINESE = ["另一方面，这是一个好的中文文档，", "但你一定要说这是英文文档，", "那很可能有些地方出了差错。"]


def write_histogram(folder: Path, lang: str, texts: list[str], share: float = 0.999) -> Path:
    """fairseq's layout: a character at the start of each line, most frequent first, then a line
    starting with "]" after the characters that make up ``share`` of the texts."""
    counts = Counter(character for text in texts for character in text if character != "\n")
    path = folder / "histograms" / "checkpoint" / "edunov" / "cc60_multilingual" / "clean_hists" / lang
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, seen, total = [], 0, sum(counts.values())
    for character, count in counts.most_common():
        if seen >= share * total:
            break
        lines.append(f"{character}\t{count}\n")
        seen += count
    path.write_text("".join(lines) + "]\n" + "".join(f"{c}\t{n}\n" for c, n in counts.most_common()[len(lines):]))
    return path


@pytest.fixture(scope="module")
def histograms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cache")
    with gzip.open(shared_data(MULTILINGUAL), "rt") as handle:
        records = [json.loads(line) for line in handle]
    write_histogram(folder, "en", [record["text"] for record in records if record["lang"] == "en"])
    # Debian's Chinese descriptions are 43% ASCII (package names, commands): their Chinese is the rest.
    write_histogram(folder, "zh", ["".join(character for character in record["text"] if not character.isascii())
                                   for record in records if record["lang"] == "zh_CN"])
    return folder


def test_each_language_keeps_its_own_texts_and_drops_the_other(histograms: Path) -> None:
    assert kept_texts(HistogramFilter(lang="en", cache_dir=str(histograms)), *ENGLISH, *CHINESE) == ENGLISH
    assert kept_texts(HistogramFilter(lang="zh", cache_dir=str(histograms)), *ENGLISH, *CHINESE) == CHINESE


def test_the_share_must_exceed_the_threshold_and_an_empty_text_is_dropped(tmp_path: Path) -> None:
    write_histogram(tmp_path, "xx", ["ab"], share=1.0)
    only_a_and_b = HistogramFilter(lang="xx", cache_dir=str(tmp_path), threshold=0.5)
    assert [only_a_and_b.score_document(text) for text in ("abab", "abcd", "abc", "", " ab ")] == [1, 0, 1, 0, 0], \
        "2 of 4 is not more than half; the spaces around 'ab' count in the length only"


def test_a_missing_histogram_says_where_to_get_it_and_where_to_put_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=rf"no histogram file at {tmp_path}/histograms/.*/clean_hists/de.*"
                                                r"m2m_100/histograms\.tar\.gz.*tar -xzf"):
        HistogramFilter(lang="de", cache_dir=str(tmp_path))


def test_a_changed_histogram_changes_the_settings_a_checkpoint_records(tmp_path: Path) -> None:
    write_histogram(tmp_path, "xx", ["ab"], share=1.0)
    before = describe(HistogramFilter(lang="xx", cache_dir=str(tmp_path)))
    assert describe(HistogramFilter(lang="xx", cache_dir=str(tmp_path))) == before, "stable while the file is"
    write_histogram(tmp_path, "xx", ["abc"], share=1.0)
    assert describe(HistogramFilter(lang="xx", cache_dir=str(tmp_path))) != before
