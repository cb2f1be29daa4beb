"""Beam adapters: stages as DoFns and PTransforms."""

from beam_curator.transforms import task_coder  # noqa: F401  (registers TaskCoder for every Task PCollection)
from beam_curator.transforms.curator_stages import CuratorStages, PipelineDefinitionError, locate_source_and_sink

__all__ = ["CuratorStages", "PipelineDefinitionError", "locate_source_and_sink"]
