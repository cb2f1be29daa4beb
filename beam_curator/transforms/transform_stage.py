"""Stages implemented as Beam PTransforms (e.g. RunInference).

Some steps are best left to a Beam transform that owns batching and model
sharing. Such a stage maps every task to exactly one task; CuratorStages
applies its transform in line and re-derives the lineage id afterwards, so
the transform stays fused with its neighbours and completion tracking
passes through it untouched.
"""

from __future__ import annotations

from abc import abstractmethod

import apache_beam as beam

from beam_curator.stages import ProcessingStage
from beam_curator.stages.lineage import derive
from beam_curator.tasks import Task
from beam_curator.transforms.resources import resource_hints


class TransformStage(ProcessingStage):
    """A one-to-one stage whose work is a Beam PTransform over tasks."""

    @abstractmethod
    def transform(self) -> beam.PTransform:
        """A PTransform from a PCollection of tasks to a PCollection of
        ``(input_task, output_task)`` pairs, one per input."""

    def process(self, task: Task) -> Task:
        raise TypeError(f"{self.stage_name} runs as a Beam transform inside CuratorStages")


def apply_transform_stage(pcoll, stage: TransformStage, label: str):
    """Apply the stage's transform, then give outputs their lineage ids and credits."""

    def relabel(pair: tuple[Task, Task]) -> Task:
        parent, result = pair
        (child,) = derive(parent, result, stage.stage_name).outputs
        return child

    transform = stage.transform().with_resource_hints(**resource_hints(stage))
    return pcoll | label >> transform | f"{label}-Lineage" >> beam.Map(relabel)
