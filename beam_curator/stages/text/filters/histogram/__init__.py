"""The character histogram filter at NeMo Curator's ``stages.text.filters.histogram`` path."""

from beam_curator.stages.text.filters.histogram.histogram import HistogramFilter

__all__ = ["HistogramFilter"]
