"""The stage API and the ready-made stages."""

from beam_curator.stages.base import CompositeStage, ProcessingStage, StageResult

__all__ = ["CompositeStage", "ProcessingStage", "StageResult"]
