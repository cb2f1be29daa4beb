"""Token filters at NeMo Curator's ``stages.text.filters.token`` path."""

from beam_curator.stages.text.filters.token.token_count import TokenCountFilter

__all__ = ["TokenCountFilter"]
