"""What a list of stages refuses before it runs.

Two refusals guard a run's results: a writer's folder or the checkpoint
inside what the readers read (the next run would read its own output back:
rows doubled), and a checkpoint whose marks a different pipeline made (they
would skip partitions this pipeline never produced). ``CuratorStages`` makes
both when it is applied, so a Beam user's own pipeline gets them exactly as
``Pipeline.run``, which applies it, does. The checks need no Beam: they read
the stages' settings and the checkpoint store only.
"""

from __future__ import annotations

import logging

from beam_curator.checkpoint import CheckpointStore
from beam_curator.stages import ProcessingStage
from beam_curator.stages.base import describe_stages, pipeline_changes
from beam_curator.stages.io.overlap import check_paths
from beam_curator.stages.io.partitioning import FilePartitioningStage
from beam_curator.stages.io.writer import FileWriterStage

__all__ = ["PipelineChangedError", "PipelineDefinitionError", "check_changed_pipeline", "check_paths_apart",
           "check_same_pipeline"]

logger = logging.getLogger(__name__)
CHANGED_PIPELINE_CHOICES = ("refuse", "keep", None)


class PipelineDefinitionError(ValueError):
    """The stage list cannot run as given; raised before anything runs."""


class PipelineChangedError(PipelineDefinitionError):
    """A checkpoint's marks were made by a pipeline other than the one now run on it."""


def check_changed_pipeline(changed_pipeline: str | None) -> str | None:
    """``changed_pipeline`` as given, if it is one of ``"refuse"``, ``"keep"`` or None."""
    if changed_pipeline not in CHANGED_PIPELINE_CHOICES:
        raise ValueError(f"changed_pipeline must be 'refuse', 'keep' or None, not {changed_pipeline!r}")
    return changed_pipeline


def check_paths_apart(stages: list[ProcessingStage], checkpoint_path: str | None) -> None:
    """The (flattened) stages' buckets answer, and their writers and the checkpoint lie outside
    what their readers read (see ``check_paths``)."""
    reads = {"file_paths" if index == 0 else f"file_paths of reader {index + 1}": stage.file_paths
             for index, stage in enumerate(s for s in stages if isinstance(s, FilePartitioningStage))}
    writes = {f"{type(stage).__name__} path": stage.path for stage in stages if isinstance(stage, FileWriterStage)}
    writes.update({f"{stage.stage_name} exclusion_path": stage.exclusion_path for stage in stages
                   if getattr(stage, "exclusion_path", None)})  # read again as input, they would be kept
    check_paths(reads, {**writes, "checkpoint_path": checkpoint_path})


def check_same_pipeline(name: str, stages: list[ProcessingStage], store: CheckpointStore, keep: bool) -> None:
    """Marks made by other stages or settings would skip partitions that the pipeline as it is now
    never produced: refuse (or, told to keep them, warn), then record this pipeline."""
    now, before = describe_stages(stages), store.recorded_pipeline()
    if before == now:
        return
    change = pipeline_changes(before, now) if before is not None else ""
    if change and store.completed():
        if not keep:
            raise PipelineChangedError(
                f"pipeline {name!r} changed since its checkpoint {store.path} was written ({change}). "
                f"Its marks would skip partitions this pipeline never produced: start afresh with "
                f"`beam-curator checkpoint reset {store.path}` or a new checkpoint path, or keep the old marks "
                "with changed_pipeline='keep'"
            )
        logger.warning("pipeline %r changed since checkpoint %s was written (%s); keeping its marks as asked",
                       name, store.path, change)
    store.record_pipeline(now)
