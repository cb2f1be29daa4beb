"""The stage API: what users subclass. It knows nothing of Beam.

A stage's ``process`` may return a task (one-to-one), a list of tasks
(fan-out), ``None`` or a ``NoneTask`` (filter) or a ``FailedTask`` (keep the
source partition pending so it replays). The framework owns task ids and
completion tracking; stage code only transforms payloads.
"""

from __future__ import annotations

import copy
import dataclasses
import os
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
      unit: what one item of the tasks the stage takes in is (a document by
        default, a row of a ``DocumentBatch``): a run's progress bar counts
        its sink's items in this unit. It changes no result, so no fingerprint.

    A subclass's ``__init__`` refuses unknown keyword arguments with the
    closest valid names (see ``stages.arguments``).
    """

    name: str = ""
    batch_size: int = 1
    is_source_stage: bool = False
    is_sink_stage: bool = False
    resources: Resources = Resources()
    unit: str = "doc"

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

    def count(self, name: str, value: int = 1) -> None:
        """Add ``value`` to the run's counter ``name`` (as the stage names it: a filter stage counts
        ``<filter>.documents_kept``). The stage knows nothing of Beam, so it keeps its counts here and
        the runner (``take_counts``) adds them to the run's counters after each call."""
        counts = self.__dict__.setdefault("_counts", {})
        counts[name] = counts.get(name, 0) + value

    def take_counts(self) -> dict[str, int]:
        """What ``count`` counted since the last call, by name; the counts start again from nothing."""
        return self.__dict__.pop("_counts", {})

    def fingerprint(self) -> object:
        """What decides this stage's results, recorded with a checkpoint so that a rerun notices a
        changed pipeline: by default its public attributes (the settings ``__init__`` stored), as
        plain JSON values. Override when settings live elsewhere, or when an attribute does not
        change results."""
        return {key: plain(value) for key, value in sorted(vars(self).items())
                if not key.startswith("_") and key != "unit"}

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


def plain(value: object) -> object:
    """A JSON value standing for ``value``: containers and dataclasses by their contents, stages by
    their fingerprints, anything else (a function, a model) by its type's name, never by its address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(item) for item in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in sorted(value.items(), key=lambda pair: str(pair[0]))}
    if isinstance(value, ProcessingStage):
        return value.fingerprint()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    kind = value if isinstance(value, type) else type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def describe_stages(stages: list[ProcessingStage]) -> list[dict[str, object]]:
    """Each stage in order with its class and fingerprint: what a checkpoint's marks were made by."""
    return [{"stage": stage.stage_name, "class": f"{type(stage).__module__}.{type(stage).__qualname__}",
             "settings": stage.fingerprint()} for stage in flatten_stages(stages)]


def pipeline_changes(before: list[dict[str, object]], now: list[dict[str, object]]) -> str:
    """What differs between two ``describe_stages`` results, in words ("" when nothing does)."""
    if [stage["stage"] for stage in before] != [stage["stage"] for stage in now]:
        return f"stages were {[stage['stage'] for stage in before]}, now {[stage['stage'] for stage in now]}"
    for old, new in zip(before, now):
        if old["class"] != new["class"]:
            return f"stage {new['stage']!r} was a {old['class']}, now a {new['class']}"
        old_settings, new_settings = old["settings"], new["settings"]
        if old_settings != new_settings:
            if isinstance(old_settings, dict) and isinstance(new_settings, dict):
                changed = [f"{key} {old_settings.get(key)!r} -> {new_settings.get(key)!r}"
                           for key in sorted(set(old_settings) | set(new_settings))
                           if old_settings.get(key) != new_settings.get(key)]
                return f"stage {new['stage']!r}: {', '.join(changed)}"
            return f"stage {new['stage']!r}: {old_settings!r} -> {new_settings!r}"
    return ""


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
