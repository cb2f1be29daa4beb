"""Every example of the README runs as written.

Blocks run in README order in one empty folder, as a reader would paste
them: each ```python block in a fresh interpreter, each ```bash block in
bash with this interpreter's ``bin`` first on ``PATH`` (so ``python`` and
``beam-curator`` are the ones under test). The first bash block (``make
demo`` / ``make test``) is skipped: it builds a virtual environment and runs
this very suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def examples() -> list[tuple[str, str]]:
    blocks = BLOCK.findall(README.read_text())
    return [(kind, code) for kind, code in blocks if not code.lstrip().startswith("make ")]


def test_the_readme_has_the_examples_this_test_runs() -> None:
    kinds = [kind for kind, _ in examples()]
    assert kinds.count("python") >= 4 and kinds.count("bash") >= 2, kinds


@pytest.mark.slow
def test_every_readme_example_runs_as_written(tmp_path: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    for number, (kind, code) in enumerate(examples(), start=1):
        command = [sys.executable, "-c", code] if kind == "python" else ["bash", "-euo", "pipefail", "-c", code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"README example {number} ({kind}) failed:\n{code}\n{done.stderr[-3000:]}"
    names = sorted(path.name for path in (tmp_path / "output").glob("*.jsonl"))
    assert [name[:10] for name in names] == [f"part-0000{n}" for n in range(6)], names
    assert all(re.fullmatch(r"part-0000\d-[0-9a-f]{16}\.jsonl", name) for name in names), "named after the input"
    assert (tmp_path / "results" / "deduplicated").is_dir()
