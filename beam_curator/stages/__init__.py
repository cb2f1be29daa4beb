"""The stage API and the ready-made stages."""

from beam_curator.stages.base import CompositeStage, ProcessingStage, StageResult
from beam_curator.stages.resources import Resources

__all__ = ["CompositeStage", "ProcessingStage", "Resources", "StageResult"]
