"""Deduplication stages; the numeric kernels live in subpackages and know nothing of Beam."""
