"""The shared test data beside the repository (``../shared/data``, see its README): real Debian
package descriptions, in English and in 18 languages. A test that needs a file skips, saying where
it looked, on a checkout without them."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEBIAN = "debian-package-descriptions.jsonl.gz"
MULTILINGUAL = "debian-descriptions-multilingual.jsonl.gz"


def shared_data(name: str) -> Path:
    """The path of ``name`` in the shared data folder; skips the test if it is not there."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here: the shared data sits beside the repository (../shared/data)")
    return path
