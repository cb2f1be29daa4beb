"""The documentation site builds, and every example in it runs as written.

* ``mkdocs build --strict`` succeeds: every page in the nav, every link and
  anchor between pages resolves, every API reference directive finds its
  object and its docstrings parse without a warning, and the benchmark plots
  render from BENCHMARKS.md's tables.
* Every ```python and ```bash block of every page (``docs/**/*.md``) and of
  README.md runs, page by page: a page's blocks in order in one empty folder of
  their own, as a reader pastes them one after another into one Python session
  and one shell (``scripts/run_doc_blocks.py``): a python block in a
  ``__main__`` of its own, so it imports and defines all it uses, a bash block
  with ``bash -euo pipefail``, with this interpreter's ``bin`` first on
  ``PATH`` (so ``python`` and ``beam-curator`` are the ones under test) and
  ``HF_HUB_OFFLINE=1``.
* A block that must not run here (a ``pip install`` from an index, a command
  against a cluster the reader owns) says why on the line above its fence:
  ``<!-- not run: REASON -->``. Every other python or bash block runs.
* README.md stays short, and its links into the site lead to pages and
  headings that exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>.+?) -->$")
RUNNABLE = ("python", "bash")
README_MAX_LINES = 150


@dataclass
class Block:
    kind: str
    code: str
    line: int  # of the opening fence, 1-based
    not_run: str | None  # the reason given, or None for a block that runs


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the reason it is not run, if any."""
    lines = page.read_text().splitlines()
    found, number = [], 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if not opening:
            number += 1
            continue
        end = next((n for n in range(number + 1, len(lines)) if lines[n].startswith("```")), None)
        assert end is not None, f"{name(page)}:{number + 1}: a code fence that is never closed"
        marker = NOT_RUN.match(lines[number - 1].strip()) if number else None
        code = "\n".join(lines[number + 1 : end]) + "\n"
        found.append(Block(opening.group(1), code, number + 1, marker.group("reason") if marker else None))
        number = end + 1
    return found


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def runnable(page: Path) -> list[Block]:
    return [block for block in blocks(page) if block.kind in RUNNABLE and block.not_run is None]


def test_the_site_builds_with_strict_checks(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    for page in PAGES[1:]:
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        folder = relative.parent if relative.name == "index" else relative  # mkdocs' directory URLs
        assert (tmp_path / "site" / folder / "index.html").is_file(), f"{name(page)} is not in the built site"


def test_every_example_runs_or_says_why_not() -> None:
    unmarked_kinds, stray = [], []
    for page in PAGES:
        for block in blocks(page):
            if block.kind == "":
                unmarked_kinds.append(f"{name(page)}:{block.line}")
            if block.not_run is not None and block.kind not in RUNNABLE:
                stray.append(f"{name(page)}:{block.line} ({block.kind})")
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if NOT_RUN.match(line.strip()) and not (number + 1 < len(lines) and FENCE.match(lines[number + 1])):
                stray.append(f"{name(page)}:{number + 1} (no fence right below)")
    assert not unmarked_kinds, f"fences without a language (use ```text for output and listings): {unmarked_kinds}"
    assert not stray, f"'not run' comments that mark no python or bash block: {stray}"
    assert sum(len(runnable(page)) for page in PAGES) >= 20, "the pages lost their examples"


def test_the_readme_is_short_and_its_links_lead_into_the_site() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    links = re.findall(r"\]\((docs/[^)\s]+)\)", text)
    assert len(links) >= 8, links
    for link in links:
        path, _, anchor = link.partition("#")
        page = ROOT / path
        assert page.is_file(), f"README links to {link}, which is not a page"
        if anchor:
            headings = [line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")]
            assert anchor in {slugify(heading, "-") for heading in headings}, f"README links to {link}: no such heading"


def check_readme_outputs(folder: Path) -> None:
    """The resumable example writes one file per input, named after it."""
    names = sorted(path.name for path in (folder / "output").glob("*.jsonl"))
    assert [name[:10] for name in names] == [f"part-0000{n}" for n in range(6)], names
    assert all(re.fullmatch(r"part-0000\d-[0-9a-f]{16}\.jsonl", name) for name in names), "named after the input"


def check_semantic_outputs(folder: Path) -> None:
    assert (folder / "results" / "deduplicated").is_dir()


def check_fuzzy_outputs(folder: Path) -> None:
    """The clean files the page says its two examples write on the sample are the ones they wrote."""
    said = re.search(r"on the sample: (\w+) files? from the Python example above, (\w+) from the command",
                     " ".join((ROOT / "docs" / "dedup" / "fuzzy.md").read_text().split()))
    assert said, "docs/dedup/fuzzy.md no longer says how many clean files its examples write"
    numbers = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    written = [len(list((folder / run / "deduplicated").iterdir())) for run in ("fuzzy_results", "fuzzy_cli")]
    assert written == [numbers[said.group(1)], numbers[said.group(2)]], (said.group(0), written)


# What a page's examples must leave behind, beyond running without an error.
OUTPUTS = {
    "README.md": check_readme_outputs,
    "docs/getting-started.md": check_readme_outputs,
    "docs/dedup/semantic.md": check_semantic_outputs,
    "docs/dedup/fuzzy.md": check_fuzzy_outputs,
}
PAGES_WITH_EXAMPLES = [page for page in PAGES if runnable(page)]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=[name(page) for page in PAGES_WITH_EXAMPLES])
def test_every_example_of_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    folder, blocks_file = tmp_path / "reader", tmp_path / "blocks.json"
    folder.mkdir()
    examples = runnable(page)
    blocks_file.write_text(json.dumps([{"page": name(page), "line": block.line, "kind": block.kind, "code": block.code}
                                       for block in examples]))
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "run_doc_blocks.py"), str(blocks_file)],
                          cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    failed = re.search(r"^block at line (\d+) failed$", done.stdout, re.MULTILINE)
    code = next((block.code for block in examples if failed and block.line == int(failed.group(1))), "")
    assert done.returncode == 0, f"{name(page)}: {failed.group(0) if failed else 'the runner failed'}:\n{code}\n" \
                                 f"{done.stdout[-5000:]}"
    if name(page) in OUTPUTS:
        OUTPUTS[name(page)](folder)
