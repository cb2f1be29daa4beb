"""Deduplication stages; the numeric kernels live in subpackages and know nothing of Beam."""

# NeMo Curator's id field: the one the workflows generate, and the dedup transforms' default.
GENERATED_ID = "_curator_dedup_id"
