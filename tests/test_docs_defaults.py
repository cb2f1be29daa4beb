"""The parameter tables of the docs site against the code they document.

Each ``| name | ... | default | ... |`` table lists a workflow's parameters;
every name must be a parameter of that workflow, and the default the page
gives must be the one in its signature, so that a changed default cannot
leave the page behind. What a table's default cell may hold:

* a Python literal or constant expression in backticks (`` `"parquet"` ``,
  `` `2 << 30` ``), one for all the row's names or one per name;
* ``required``: the signature has no default (or ``None``, refused when run);
* another parameter's name (`` `output_path` ``) or words (``the input's``):
  the signature's default is ``None``, which means that;
* an expression of other parameters (`` `2 * eps`, at most 0.3 ``): the
  signature's default is ``None`` and the code derives it as :data:`DERIVED` does;
* a remark in parentheses, which is not checked (``None` (10)``).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from beam_curator.workflows import (
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    TextSemanticDeduplicationWorkflow,
)
from beam_curator.workflows.semantic.cascade import default_screening_eps

DOCS = Path(__file__).resolve().parents[1] / "docs"

# Every page with a parameter table, and what the table documents.
DOCUMENTED = {
    "dedup/exact.md": ExactDeduplicationWorkflow,
    "dedup/fuzzy.md": FuzzyDeduplicationWorkflow,
    "dedup/semantic.md": TextSemanticDeduplicationWorkflow,
}

# Defaults the code derives from other parameters: name -> (the code's rule, values of those parameters to try).
DERIVED: dict[str, tuple[Callable[..., Any], list[dict[str, Any]]]] = {
    "screening_eps": (default_screening_eps, [{"eps": eps} for eps in (0.001, 0.01, 0.05, 0.12, 0.2)]),
}

REQUIRED = "required"
NONE_MEANS = "None means what the page says"


def cells(line: str) -> list[str]:
    """A table row's cells, split at the ``|`` outside backticks (`` `"k-means||"` `` is one cell)."""
    found, current, in_code = [], "", False
    for char in line.strip().strip("|"):
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            found.append(current.strip())
            current = ""
        else:
            current += char
    return [*found, current.strip()]


def parameter_tables(page: Path) -> list[list[dict[str, str]]]:
    """Each table of ``page`` whose first column is ``name`` and which has a ``default`` column, as rows."""
    tables, header, rows = [], None, []
    for line in [*page.read_text().splitlines(), ""]:
        if not line.startswith("|"):
            if header and rows:
                tables.append(rows)
            header, rows = None, []
        elif header is None:
            header = cells(line)
            if not (header[0] == "name" and "default" in header):
                header = []
        elif header and not set(line) <= set("|- :"):
            rows.append(dict(zip(header, cells(line))))
    return tables


def documented_defaults(name_cell: str, default_cell: str) -> list[tuple[str, object]]:
    """``(parameter, what the page says its default is)`` for each name of a row."""
    names = re.findall(r"`([A-Za-z_]\w*)`", name_cell)
    said = default_cell
    while re.search(r"\([^()]*\)", said):  # remarks
        said = re.sub(r"\s*\([^()]*\)", "", said)
    values: list[object] = []
    for code in re.findall(r"`([^`]*)`", said):
        if names[0] in DERIVED:
            values.append(("derived", code, said))
        elif re.fullmatch(r"[A-Za-z_]\w*", code) and code not in ("None", "True", "False"):
            values.append(NONE_MEANS)  # another parameter's value stands in
        else:
            values.append(eval(compile(ast.parse(code, mode="eval"), "<default>", "eval"), {"__builtins__": {}}))
    if not values:
        values = [REQUIRED if said.strip().startswith("required") else NONE_MEANS]
    if len(values) == 1:
        return [(name, values[0]) for name in names]
    assert len(values) == len(names), f"{name_cell}: {len(names)} names but {len(values)} defaults ({default_cell})"
    return list(zip(names, values))


def test_every_parameter_table_of_the_site_is_checked() -> None:
    pages = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md") if parameter_tables(page)}
    assert pages == set(DOCUMENTED), "a page with a parameter table must name the code it documents here"


@pytest.mark.parametrize("page", sorted(DOCUMENTED))
def test_each_default_in_the_table_is_the_codes(page: str) -> None:
    signature = inspect.signature(DOCUMENTED[page])
    [table] = parameter_tables(DOCS / page)
    problems = []
    for row in table:
        for name, said in documented_defaults(row["name"], row["default"]):
            if name not in signature.parameters:
                problems.append(f"{name}: not a parameter of {DOCUMENTED[page].__name__}")
                continue
            default = signature.parameters[name].default
            if said == REQUIRED:
                ok = default in (inspect.Parameter.empty, None)
            elif said == NONE_MEANS:
                ok = default is None
            elif isinstance(said, tuple):  # an expression of other parameters
                rule, cases = DERIVED[name]
                cap = re.search(r"at most ([\d.]+)", said[2])
                ok = default is None and all(
                    abs(min(eval(said[1], {"__builtins__": {}}, case), float(cap.group(1)) if cap else 1.0)
                        - rule(**case)) < 1e-12 for case in cases)
            else:
                ok = default == said and type(default) is type(said)
            if not ok:
                problems.append(f"{name}: the page says {row['default']}, the code {default!r}")
    assert not problems, f"{page}:\n" + "\n".join(problems)
