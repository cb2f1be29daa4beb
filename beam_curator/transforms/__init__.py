"""Beam adapters: stages as DoFns and PTransforms."""

from beam_curator.transforms.curator_stages import CuratorStages, PipelineDefinitionError, locate_source_and_sink
from beam_curator.transforms.task_coder import TaskCoder  # importing it registers it for every Task PCollection

__all__ = ["CuratorStages", "PipelineDefinitionError", "TaskCoder", "locate_source_and_sink"]
