"""Bundled sample data, so the demo and the tests run without downloads.

``sample_corpus/``: 620 English package descriptions from Debian 12 (Debian
archive metadata, freely redistributable), in 6 JSONL files with fields
``doc_id``, ``package`` and ``text``. Consecutive packages of one source
(``foo``, ``foo-data``, ``foo-doc``...) make natural near-duplicates; 20
records (``dup-*``) repeat another record's text exactly.
"""

from pathlib import Path


def sample_corpus_path() -> str:
    """The folder holding the sample corpus's JSONL files."""
    return str(Path(__file__).parent / "sample_corpus")
