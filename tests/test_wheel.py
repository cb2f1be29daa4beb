"""The wheel, installed the way users install, works outside the checkout.

A fresh virtual environment (without pip of its own: this one installs into
it) gets the wheel itself (non-editable) and sees the dependencies already
installed for this test run through a ``.pth`` file, so the test takes
seconds, not a download of PyTorch. It then runs the command on a file of the
sample corpus shipped inside the wheel, from a folder that is not the
checkout, with no ``PYTHONPATH`` pointing back at the sources.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import beam_curator

REPO = Path(__file__).resolve().parents[1]


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_the_wheel_ships_its_data_types_and_licence_and_runs_semdedup_when_installed(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy, so that building leaves no build/ folder in the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                                ".pytest_cache", ".hypothesis", "demo_output"))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         str(source)], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("beam_curator-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "beam_curator/py.typed" in names
    assert sum(name.startswith("beam_curator/data/sample_corpus/") for name in names) == 6
    (licence,) = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert "Apache License" in zipfile.ZipFile(wheel).read(licence).decode()

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)  # this pip installs into it
    python, command = str(venv / "bin" / "python"), str(venv / "bin" / "beam-curator")
    fresh_site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env).strip())
    (fresh_site / "installed_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", str(wheel)],
        tmp_path, env)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    located = run([python, "-c", "import beam_curator.data as d; print(d.__file__); print(d.sample_corpus_path())"],
                  elsewhere, env).split()
    assert all(path.startswith(str(fresh_site)) for path in located), f"not the installed copy: {located}"
    assert run([command, "--version"], elsewhere, env).splitlines()[0] == f"beam-curator {beam_curator.__version__}"
    shipped = sorted(Path(located[1]).glob("part-*.jsonl"))
    assert len(shipped) == 6
    # One shipped file is input enough to show the installed command, its model and its data work together.
    out = run([command, "semdedup", "--input", str(shipped[0]), "--output", "out", "--cache", "cache",
               "--id-field", "doc_id", "--n-clusters", "4", "--eps", "0.01", "--quiet"], elsewhere, env)
    assert f"documents in     {len(shipped[0].read_text().splitlines())}" in out, out
    assert [path.name[:10] for path in (elsewhere / "out" / "deduplicated").glob("part-*.jsonl")] == ["part-00000"]
