"""``CuratorStages``: a list of stages as one Beam PTransform.

This is the single implementation of the pipeline semantics; ``Pipeline.run``
is a thin layer over it, and Beam users can apply it inside their own
pipelines beside ordinary transforms.
"""

from __future__ import annotations

import logging

import apache_beam as beam
from apache_beam.pvalue import PBegin

from beam_curator.checkpoint import CheckpointStore, open_store
from beam_curator.checkpoint.files import check_partitions
from beam_curator.stages import ProcessingStage
from beam_curator.stages.base import flatten_stages
from beam_curator.stages.lineage import source_key
from beam_curator.tasks import EmptyTask, Task
from beam_curator.transforms.refusals import (
    PipelineDefinitionError,
    check_changed_pipeline,
    check_paths_apart,
    check_same_pipeline,
)
from beam_curator.transforms.resources import resource_hints
from beam_curator.transforms.stage_dofns import (
    CREDITS,
    BatchStageDoFn,
    SourceDoFn,
    SourceListing,
    StageDoFn,
    list_sources,
)
from beam_curator.transforms.stateful_completion import CREDIT_TYPE, CompleteByState, check_completion
from beam_curator.transforms.transform_stage import TransformStage, apply_transform_stage

logger = logging.getLogger(__name__)


def _flag_index(stages: list[ProcessingStage], flag: str, default: int) -> int:
    flagged = [i for i, stage in enumerate(stages) if getattr(stage, flag)]
    if len(flagged) > 1:
        names = ", ".join(stages[i].stage_name for i in flagged)
        raise PipelineDefinitionError(f"only one stage may set {flag}, but these do: {names}")
    return flagged[0] if flagged else default


def locate_source_and_sink(stages: list[ProcessingStage]) -> tuple[int, int]:
    """The source is the first stage and the sink the last unless a stage says otherwise."""
    if not stages:
        raise PipelineDefinitionError("the pipeline has no stages; add at least a reader and a writer")
    source = _flag_index(stages, "is_source_stage", 0)
    sink = _flag_index(stages, "is_sink_stage", len(stages) - 1)
    if sink < source:
        raise PipelineDefinitionError(
            f"the sink {stages[sink].stage_name} comes before the source {stages[source].stage_name}"
        )
    return source, sink


@beam.typehints.with_input_types(Task)
@beam.typehints.with_output_types(Task)
class CuratorStages(beam.PTransform):
    """Apply stages to a PBegin (the source gets the root task) or a PCollection of tasks.

    With ``checkpoint_path`` (or a ``store``), complete source partitions are
    skipped and partitions are marked complete as they finish. With
    ``progress_folder``, workers record their running totals there (see
    :mod:`beam_curator.transforms.progress`). Its type hints
    make a PCollection of anything but tasks an error when the pipeline is
    built, not when a worker first meets an element.

    ``list_in_driver`` runs the source stage here, while the pipeline is
    built, and creates the pending partitions as the pipeline's first
    elements (for runners such as Dask's, which drop ``Reshuffle`` and would
    otherwise keep every partition in the root's one bundle). The listing
    is then kept in ``listing``: what was pending and skipped, for runners
    that report no metrics.

    ``completion`` is where partitions are marked: ``"fused"`` inside the
    sink's and the filters' DoFns, ``"stateful"`` in a keyed stateful DoFn
    after them (:mod:`beam_curator.transforms.stateful_completion`).
    ``ended`` is what a chain that follows must wait for: the output, and
    under stateful completion the marks too.

    Applied, it refuses before it reads the checkpoint or anything runs
    (:mod:`beam_curator.transforms.refusals`): a writer's folder or the
    checkpoint inside a reader's input, with ``CuratorInputError``, and a
    checkpoint whose marks were made by other stages or settings, with
    ``PipelineChangedError`` naming the change. ``changed_pipeline="keep"``
    keeps those marks instead (a warning says so) and records these stages;
    None skips that check. The error names the pipeline by the label it was
    applied with.
    """

    def __init__(
        self,
        stages: list[ProcessingStage],
        checkpoint_path: str | None = None,
        *,
        store: CheckpointStore | None = None,
        map_size: int = 1 << 30,
        label_prefix: str = "",
        progress_folder: str | None = None,
        list_in_driver: bool = False,
        completion: str = "fused",
        changed_pipeline: str | None = "refuse",
    ) -> None:
        super().__init__()
        self.completion = check_completion(completion)
        self.changed_pipeline = check_changed_pipeline(changed_pipeline)
        self.stages = flatten_stages(list(stages))
        self.source, self.sink = locate_source_and_sink(self.stages)
        if isinstance(self.stages[self.sink], TransformStage):
            raise PipelineDefinitionError(
                f"{self.stages[self.sink].stage_name} is a transform stage and cannot be the sink"
            )
        if list_in_driver and self.source != 0:
            raise PipelineDefinitionError(
                f"partitions can be listed in the driver only when the source is the first stage, "
                f"not {self.stages[self.source].stage_name} (stage {self.source})"
            )
        self.list_in_driver = list_in_driver
        self.listing: SourceListing | None = None
        self.store = store if store is not None else (open_store(checkpoint_path, map_size) if checkpoint_path else None)
        self.label_prefix = label_prefix
        self.progress_folder = progress_folder
        self.pending_keys: beam.PCollection | None = None
        self.output: beam.PCollection | None = None
        self.ended: beam.PCollection | None = None

    def _checked_snapshot(self) -> tuple[set[str], dict[str, dict]]:
        """Complete partitions whose recorded outputs are all still there, and
        what their files looked like when they started. A partition whose
        output went missing or changed size is run again, with a warning."""
        self.store.open_writer()  # holds the lock before reading, so a reset now refuses
        snapshot = self.store.snapshot()
        completed = snapshot.completed()
        root = getattr(self.stages[self.sink], "path", None)
        if root:
            recorded = {key: snapshot.outputs[key] for key in completed if key in snapshot.outputs}
            for key, problems in sorted(check_partitions(root, recorded).items()):
                logger.warning("partition %s will run again: %s", key, "; ".join(problems[:3]))
                completed.discard(key)
        logger.info("checkpoint %s: %d partitions already complete", self.store.path, len(completed))
        return completed, snapshot.inputs

    def refuse(self, name: str | None = None) -> None:
        """Make the refusals (see the class docstring) now, naming the chain
        ``name`` (default: the label it was applied with). ``expand`` makes
        them; a driver that runs chains as pipelines of their own, one after
        another (Dask), makes every chain's before the first runs, so that a
        later chain's refusal costs no earlier chain's work."""
        check_paths_apart(self.stages, self.store.path if self.store is not None else None)
        if self.store is not None:
            self.store.check_writable()  # its own error names the folder, before anything is written there
            if self.changed_pipeline:
                check_same_pipeline(name or self.label, self.stages, self.store, self.changed_pipeline == "keep")

    def list_pending(self, name: str | None = None) -> SourceListing:
        """Under ``list_in_driver``, what ``expand`` does first, here: the
        refusals (naming the chain ``name``), the checkpoint read, and the
        source run, its listing kept in ``listing``. An engine that runs the
        stages without Beam (``beam_curator.running.in_process``) calls it alone."""
        if not self.list_in_driver:
            raise PipelineDefinitionError("partitions are listed in the driver only with list_in_driver=True")
        completed, started = self._start(name)
        self.listing = list_sources(SourceDoFn(self.stages[0], completed, started, self.store, self.progress_folder))
        return self.listing

    def _start(self, name: str | None = None) -> tuple[set[str], dict[str, dict]]:
        self.refuse(name)
        return self._checked_snapshot() if self.store is not None else (set(), {})

    def expand(self, pcoll):
        if self.list_in_driver:
            if not isinstance(pcoll, PBegin):
                raise PipelineDefinitionError("partitions can be listed in the driver only at the pipeline's start")
            self.list_pending()
            pcoll = pcoll | f"{self.label_prefix}00-{self.stages[0].stage_name}" >> beam.Create(self.listing.pending)
            source = None  # it ran here
        else:
            source = SourceDoFn(self.stages[self.source], *self._start(), self.store, self.progress_folder)
            if isinstance(pcoll, PBegin):
                pcoll = pcoll | f"{self.label_prefix}Root" >> beam.Create([EmptyTask()])
        stateful = self.store is not None and self.completion == "stateful"
        credits: list[beam.PCollection] = []
        for index, stage in enumerate(self.stages):
            label = f"{self.label_prefix}{index:02d}-{stage.stage_name}"
            if index == self.source:
                if source is not None:
                    pcoll = pcoll | label >> beam.ParDo(source)
                # Spread partitions over workers: the root is a single element.
                pcoll = pcoll | f"{label}-Distribute" >> beam.Reshuffle()
                self.pending_keys = pcoll | f"{label}-Keys" >> beam.Map(source_key)
                continue
            if isinstance(stage, TransformStage):
                pcoll = apply_transform_stage(pcoll, stage, label)
                continue
            tracked = self.store if self.source < index <= self.sink else None
            if stage.uses_batches():
                pcoll = pcoll | f"{label}-Batch" >> beam.BatchElements(
                    min_batch_size=1, max_batch_size=stage.batch_size
                )
                dofn = BatchStageDoFn(stage, tracked, index == self.sink, self.progress_folder, stateful)
            else:
                dofn = StageDoFn(stage, tracked, index == self.sink, self.progress_folder, stateful)
            step = beam.ParDo(dofn).with_resource_hints(**resource_hints(stage))
            if stateful and tracked is not None:
                results = pcoll | label >> step.with_outputs(CREDITS, main="tasks")
                pcoll = results.tasks
                credits.append(results[CREDITS])
            else:
                pcoll = pcoll | label >> step
        self.output = self.ended = pcoll
        if stateful and credits:
            marked = (
                credits
                | f"{self.label_prefix}{len(self.stages):02d}-Credits" >> beam.Flatten().with_output_types(CREDIT_TYPE)
                | f"{self.label_prefix}{len(self.stages):02d}-Complete" >> beam.ParDo(
                    CompleteByState(self.store, self.progress_folder)
                )
            )
            self.ended = (pcoll, marked) | f"{self.label_prefix}Ended" >> beam.Flatten()
        return pcoll
