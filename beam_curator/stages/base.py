"""The stage API: what users subclass. It knows nothing of Beam.

A stage's ``process`` may return a task (one-to-one), a list of tasks
(fan-out), ``None`` or a ``NoneTask`` (filter) or a ``FailedTask`` (keep the
source partition pending so it replays). The framework owns task ids and
completion tracking; stage code only transforms payloads.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, Union

from beam_curator.stages.arguments import keyword_names, refuse_unknown
from beam_curator.stages.resources import Resources
from beam_curator.tasks import Task

StageResult = Union[Task, list[Task], None]


class ProcessingStage(ABC):
    """One step of a pipeline.

    Attributes a subclass may set:
      name: shown in logs, metrics and errors (defaults to the class name).
      batch_size: when > 1 and ``process_batch`` is overridden, the runner
        groups up to this many tasks per call.
      is_source_stage / is_sink_stage: override the default (first stage is
        the source, last stage is the sink).
      resources: a :class:`Resources` (``cpus``, ``gpus``, ``gpu_memory_gb``,
        ``gpu_type``, ``min_ram``), given to the runner as resource hints.

    A subclass's ``__init__`` refuses unknown keyword arguments with the
    closest valid names (see ``stages.arguments``).
    """

    name: str = ""
    batch_size: int = 1
    is_source_stage: bool = False
    is_sink_stage: bool = False
    resources: Resources = Resources()

    def __new__(cls, *args: Any, **kwargs: Any) -> ProcessingStage:
        # Checked here rather than in each __init__, so that every subclass,
        # dataclasses included, refuses a misspelt keyword with a suggestion.
        valid = keyword_names(cls.__init__)
        if kwargs and valid is not None:
            refuse_unknown(kwargs, valid, cls.__name__)
        return super().__new__(cls)

    @property
    def stage_name(self) -> str:
        return self.name or type(self).__name__

    def setup(self) -> None:
        """Called once per worker before the first task (load models here)."""

    def teardown(self) -> None:
        """Called once per worker when it shuts down."""

    @abstractmethod
    def process(self, task: Task) -> StageResult:
        """Transform one task."""

    def process_batch(self, tasks: list[Task]) -> list[StageResult]:
        """Transform several tasks at once.

        The default calls ``process`` on each. An override should return one
        result per input, in input order (``None`` where an input is
        filtered); a list of another length is accepted but then the outputs
        can only be attributed to the batch as a whole.
        """
        return [self.process(task) for task in tasks]

    def with_(
        self, name: str | None = None, resources: Resources | None = None, batch_size: int | None = None,
    ) -> ProcessingStage:
        """A copy of this stage with ``name``, ``resources`` or ``batch_size``
        replaced, as NeMo Curator's ``with_`` (its Ray and Xenna options have
        no meaning on Beam)."""
        changed = copy.deepcopy(self)
        if name is not None:
            changed.name = name
        if resources is not None:
            changed.resources = Resources.of(resources)
        if batch_size is not None:
            changed.batch_size = batch_size
        return changed

    def uses_batches(self) -> bool:
        return self.batch_size > 1 and type(self).process_batch is not ProcessingStage.process_batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.stage_name!r})"


class CompositeStage(ProcessingStage):
    """A user-facing stage that expands into several simpler ones.

    Readers are composites: a partitioning stage (the source, run once) and a
    reading stage (run per partition).
    """

    @abstractmethod
    def decompose(self) -> list[ProcessingStage]:
        """The stages this one stands for, in order."""

    def process(self, task: Task) -> StageResult:
        raise TypeError(f"{self.stage_name} is a composite stage; run its decomposition instead")


def flatten_stages(stages: list[ProcessingStage]) -> list[ProcessingStage]:
    """Expand composites recursively, keeping order."""
    flat: list[ProcessingStage] = []
    for stage in stages:
        if isinstance(stage, CompositeStage):
            parts = flatten_stages(stage.decompose())
            # A composite's role flags belong to its first (source) or last (sink) part.
            parts[0].is_source_stage = parts[0].is_source_stage or stage.is_source_stage
            parts[-1].is_sink_stage = parts[-1].is_sink_stage or stage.is_sink_stage
            flat.extend(parts)
        else:
            flat.append(stage)
    return flat
