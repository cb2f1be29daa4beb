"""MkDocs hook: the benchmark plots, drawn at build time from BENCHMARKS.md.

BENCHMARKS.md is the record: every report the scripts in ``bench/`` append
holds its figures in Markdown tables. This hook reads the reports the plots
show, parses their tables and draws each plot with matplotlib into the built
site under ``assets/benchmarks/``, so ``docs/benchmarks.md`` can show them by
relative path and a plot can never say something the record does not.

If BENCHMARKS.md changes shape (a report renamed, a table without a column,
a row gone, a cell that is not a number), the build stops with an error
naming what is missing, rather than drawing a plot from the wrong numbers.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

RECORD = "BENCHMARKS.md"
ASSETS = "assets/benchmarks"

# The reports each plot shows, by their heading in BENCHMARKS.md (script and date).
FUZZY = "bench_fuzzy.py (2026-12-01 21:49)"
FUZZY_SCALE = "bench_fuzzy_scale.py (2026-12-02 03:35)"
SEMANTIC_PHASES = "bench_e2e.py (2026-11-30 04:05)"
EMBEDDING_RUNTIMES = "bench_embedding_backends.py (2026-12-01 02:04)"
RERUN = "bench_rerun.py (2026-11-30 23:16)"

OURS, OTHERS = "#1f77b4", "#aaaaaa"  # beam_curator's bars, and the tools it is compared with

Row = dict[str, str]


class Report:
    """One report of the record: its heading and the Markdown tables under it."""

    def __init__(self, heading: str, body: str) -> None:
        self.heading = heading
        self.tables = _tables(body)

    def table(self, *columns: str) -> list[Row]:
        """The first table of the report that has every one of ``columns``."""
        for rows in self.tables:
            if rows and all(column in rows[0] for column in columns):
                return rows
        raise _missing(f"report '### {self.heading}' has no table with the columns {list(columns)}")

    def row(self, table: list[Row], **cells: str) -> Row:
        """The row of ``table`` whose cells hold the given values (column names with spaces: pass a dict)."""
        for row in table:
            if all(row.get(column) == value for column, value in cells.items()):
                return row
        raise _missing(f"report '### {self.heading}' has no table row with {cells}")

    def number(self, row: Row, column: str) -> float:
        """The cell as a number: ``2,391`` -> 2391.0, ``78%`` -> 78.0."""
        cell = row.get(column, "")
        try:
            return float(cell.replace(",", "").rstrip("%"))
        except ValueError:
            raise _missing(f"report '### {self.heading}': column {column!r} holds {cell!r}, not a number") from None


def read_record(text: str) -> dict[str, Report]:
    """Every report of the record, by its heading (``### <script> (<date>)``)."""
    parts = re.split(r"^### (.+)$", text, flags=re.MULTILINE)
    return {heading.strip(): Report(heading.strip(), body) for heading, body in zip(parts[1::2], parts[2::2])}


def _tables(body: str) -> list[list[Row]]:
    """The Markdown tables of a report, each as a list of rows keyed by the header's cells.

    Emphasis and code marks are dropped from the cells (``**whole run**`` -> ``whole run``)."""
    tables, lines = [], [line.strip() for line in body.splitlines()]
    for start, line in enumerate(lines):
        new_table = line.startswith("|") and (start == 0 or not lines[start - 1].startswith("|"))
        if not new_table or start + 1 >= len(lines) or not re.fullmatch(r"\|[\s:|-]+\|", lines[start + 1]):
            continue
        header, rows = _cells(line), []
        for following in lines[start + 2:]:
            if not following.startswith("|"):
                break
            rows.append(dict(zip(header, _cells(following))))
        tables.append(rows)
    return tables


def _cells(line: str) -> list[str]:
    return [cell.strip().replace("**", "").replace("`", "") for cell in line.strip("|").split("|")]


def _missing(what: str) -> PluginError:
    return PluginError(
        f"docs/hooks/benchmark_plots.py: {RECORD}: {what}. The benchmark plots read these figures; "
        f"restore them in {RECORD} or change the report the plot reads at the top of the hook"
    )


def _report(record: dict[str, Report], heading: str) -> Report:
    if heading not in record:
        raise _missing(f"no report '### {heading}'")
    return record[heading]


def fuzzy_against_others(record: dict[str, Report]) -> Figure:
    """Documents per CPU-second, and recall at Jaccard 0.8, of the fuzzy workflow and the tools compared."""
    report = _report(record, FUZZY)
    speed = report.table("contender", "documents / CPU s")
    quality = report.table("contender", "truth's shingles", "Jaccard ≥", "candidate recall", "group recall")
    # Each contender's row in the speed table, its row in the quality table, and its label.
    contenders = [
        ("beam_curator", "beam_curator", "beam_curator"),
        ("datasketch MinHashLSH + union-find", "datasketch", "datasketch"),
        ("datatrove, word 5-grams: stages 1–3", "datatrove, words", "datatrove\n(words)"),
        ("datatrove, character 24-grams: stages 1–3", "datatrove, characters", "datatrove\n(characters)"),
    ]
    labels = [label for _, _, label in contenders]
    figure = Figure(figsize=(9, 3.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    rates = [report.number(report.row(speed, contender=name), "documents / CPU s") for name, _, _ in contenders]
    left.bar(labels, rates, color=[OURS] + [OTHERS] * (len(labels) - 1))
    left.bar_label(left.containers[0], fmt="{:,.0f}")
    left.margins(y=0.1)
    left.set_ylabel("documents per CPU-second")
    left.set_title("63,905 Debian descriptions, one core", fontsize=10)
    width = 0.38
    for offset, column in ((-width / 2, "candidate recall"), (width / 2, "group recall")):
        at_08 = [report.row(quality, **{"contender": name, "truth's shingles": "24 characters", "Jaccard ≥": "0.8"})
                 for _, name, _ in contenders]
        right.bar([i + offset for i in range(len(labels))], [report.number(row, column) for row in at_08], width,
                  label=column)
    right.set_xticks(range(len(labels)), labels)
    right.set_ylim(0.8, 1.0)
    right.set_ylabel("recall of pairs at Jaccard ≥ 0.8")
    right.set_title("against all 2·10⁹ pairs, exact", fontsize=10)
    right.legend(loc="lower right", fontsize=8)
    return figure


def fuzzy_at_scale(record: dict[str, Report]) -> Figure:
    """Peak memory and CPU time of each fuzzy phase at 1M and 2M documents."""
    report = _report(record, FUZZY_SCALE)
    phases_table = report.table("phase", "documents", "CPU s", "peak RSS GB")
    phases = ["minhash", "lsh", "edges", "connected_components", "identification"]
    sizes = sorted({row["documents"] for row in phases_table}, key=lambda size: float(size.replace(",", "")))
    if len(sizes) < 2:
        raise _missing(f"report '### {FUZZY_SCALE}' has one corpus size in its phase table, the plot compares two")
    figure = Figure(figsize=(9, 3.4), layout="constrained")
    memory, cpu = figure.subplots(1, 2)
    width = 0.8 / len(sizes)
    for index, size in enumerate(sizes):
        rows = [report.row(phases_table, phase=phase, documents=size) for phase in phases]
        positions = [i + (index - (len(sizes) - 1) / 2) * width for i in range(len(phases))]
        label = f"{float(size.replace(',', '')) / 1e6:g}M documents"
        memory.bar(positions, [report.number(row, "peak RSS GB") for row in rows], width, label=label)
        cpu.bar(positions, [max(report.number(row, "CPU s"), 0.05) for row in rows], width, label=label)
    names = ["minhash", "lsh", "edges", "components", "identify"]
    memory.set_xticks(range(len(phases)), names)
    memory.set_ylabel("peak RSS (GB)")
    memory.set_title("peak memory stays flat as N doubles", fontsize=10)
    memory.legend(fontsize=8)
    cpu.set_xticks(range(len(phases)), names)
    cpu.set_yscale("log")
    cpu.set_ylabel("CPU seconds (log scale)")
    cpu.set_title("time grows as N; minhash dominates", fontsize=10)
    cpu.legend(fontsize=8)
    return figure


def fuzzy_s_curve(record: dict[str, Report]) -> Figure:
    """Planted near-copies found, per Jaccard level, against the S-curve's prediction."""
    report = _report(record, FUZZY_SCALE)
    recall = report.table("planted at Jaccard", "documents", "mean Jaccard", "found", "expected")
    figure = Figure(figsize=(5.5, 3.4), layout="constrained")
    axes = figure.subplots()
    sizes = sorted({row["documents"] for row in recall}, key=lambda size: float(size.replace(",", "")))
    for marker, size in zip("os^", sizes):
        rows = sorted((row for row in recall if row["documents"] == size), key=lambda row: report.number(row, "mean Jaccard"))
        axes.plot([report.number(row, "mean Jaccard") for row in rows], [report.number(row, "found") for row in rows],
                  marker, fillstyle="none", label=f"found, {float(size.replace(',', '')) / 1e6:g}M documents")
    expected = sorted((report.number(row, "mean Jaccard"), report.number(row, "expected")) for row in recall)
    axes.plot([x for x, _ in expected], [y for _, y in expected], "-", color="black", linewidth=1,
              label="expected: 1 - (1 - s¹³)²⁰")
    axes.set_xlabel("Jaccard similarity of the planted pair")
    axes.set_ylabel("share found")
    axes.legend(fontsize=8)
    return figure


def semantic_phases(record: dict[str, Report]) -> Figure:
    """Seconds per phase of the semantic workflow end to end, at each corpus size."""
    report = _report(record, SEMANTIC_PHASES)
    columns = ["embedding s", "kmeans s", "pairwise s", "identification s", "removal s"]
    table = report.table("N", *columns)
    figure = Figure(figsize=(7, 3.4), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / len(table)
    for index, row in enumerate(table):
        positions = [i + (index - (len(table) - 1) / 2) * width for i in range(len(columns))]
        axes.bar(positions, [max(report.number(row, column), 0.05) for column in columns], width,
                 label=f"{row['N']} documents")
    axes.set_xticks(range(len(columns)), [column.removesuffix(" s") for column in columns])
    axes.set_yscale("log")
    axes.set_ylabel("wall seconds (log scale)")
    axes.set_title("embedding is nearly all of a run on a CPU", fontsize=10)
    axes.legend(fontsize=8)
    return figure


def embedding_runtimes(record: dict[str, Report]) -> Figure:
    """Documents embedded per CPU-second by each CPU runtime, with its share of the machine's sgemm rate."""
    report = _report(record, EMBEDDING_RUNTIMES)
    table = report.table("runtime", "docs/s per CPU-second", "share of sgemm rate")
    runtimes = ["torch", "onnx", "onnx-int8", "openvino", "openvino-bf16"]
    rows = [report.row(table, runtime=runtime) for runtime in runtimes]
    figure = Figure(figsize=(7, 3.4), layout="constrained")
    axes = figure.subplots()
    axes.bar(runtimes, [report.number(row, "docs/s per CPU-second") for row in rows],
             color=[OURS if runtime == "torch" else OTHERS for runtime in runtimes])
    axes.bar_label(axes.containers[0], [f"{report.number(row, 'share of sgemm rate'):.0f}% of sgemm" for row in rows],
                   fontsize=8)
    axes.margins(y=0.1)
    axes.set_ylabel("documents per CPU-second")
    axes.set_title("all-MiniLM-L6-v2, 1,500 documents, one thread", fontsize=10)
    return figure


def rerun_cost(record: dict[str, Report]) -> Figure:
    """Wall and CPU seconds of a semantic rerun with nothing to do, against importing the engines."""
    report = _report(record, RERUN)
    table = report.table("fresh interpreter", "wall s", "CPU s")
    shown = {  # the record's row -> the label drawn
        "command rerun": "command\nrerun",
        "API rerun": "API\nrerun",
        "command rerun (baseline)": "command rerun,\nbefore deferred\nimports",
        'python -c "import apache_beam"': "import\napache_beam",
        'python -c "import torch"': "import\ntorch",
    }
    rows = [report.row(table, **{"fresh interpreter": name}) for name in shown]
    figure = Figure(figsize=(7, 3.4), layout="constrained")
    axes = figure.subplots()
    width = 0.38
    for offset, column in ((-width / 2, "wall s"), (width / 2, "CPU s")):
        axes.bar([i + offset for i in range(len(rows))], [report.number(row, column) for row in rows], width,
                 label=column.replace(" s", " seconds"))
    axes.set_xticks(range(len(rows)), list(shown.values()), fontsize=8)
    axes.set_ylabel("seconds")
    axes.set_title("semantic dedup rerun with nothing to do, 614 documents", fontsize=10)
    axes.legend(fontsize=8)
    return figure


PLOTS: dict[str, Callable[[dict[str, Report]], Figure]] = {
    "fuzzy-against-others.png": fuzzy_against_others,
    "fuzzy-at-scale.png": fuzzy_at_scale,
    "fuzzy-s-curve.png": fuzzy_s_curve,
    "semantic-phases.png": semantic_phases,
    "embedding-runtimes.png": embedding_runtimes,
    "rerun.png": rerun_cost,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Draw every plot from the record and add it to the site's files."""
    path = Path(config.config_file_path).parent / RECORD
    if not path.is_file():
        raise PluginError(f"docs/hooks/benchmark_plots.py: {path} not found; the benchmark plots are drawn from it")
    record = read_record(path.read_text(encoding="utf-8"))
    for name, draw in PLOTS.items():
        image = io.BytesIO()
        draw(record).savefig(image, format="png", dpi=110, metadata={"Software": None})
        files.append(File.generated(config, f"{ASSETS}/{name}", content=image.getvalue()))
    return files


def on_serve(server, config: MkDocsConfig, builder):  # noqa: ANN001, ANN201 (mkdocs' own types)
    """``mkdocs serve`` redraws the plots when the record changes."""
    server.watch(str(Path(config.config_file_path).parent / RECORD))
    return server
