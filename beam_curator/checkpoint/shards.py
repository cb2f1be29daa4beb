"""How far each shard of a job array got on their shared checkpoint.

Shards of a job array (readers given ``shard=(index, count)``) write into one
checkpoint and never talk to each other; after the array ends, a job script
needs to know which shards to submit again. That is read from the checkpoint
and a listing of the input alone (no Beam, no worker), so it is cheap to run
in a loop on a login node. It reads completion marks: whether a finished
partition's output files are still there is checked by the rerun itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from beam_curator.checkpoint.opening import open_store
from beam_curator.stages.base import ProcessingStage, flatten_stages
from beam_curator.stages.io.sharding import shard_of
from beam_curator.stages.lineage import derive_sources, source_key
from beam_curator.tasks import EmptyTask, Task


@dataclass
class ShardProgress:
    """One shard's partitions: how many it has and how many of them are marked complete."""

    index: int
    partitions: int = 0
    completed: int = 0

    @property
    def pending(self) -> int:
        return self.partitions - self.completed


@dataclass
class ShardManifest:
    """Every shard's progress on one checkpoint, and which shards to submit again."""

    checkpoint_path: str
    shards: list[ShardProgress] = field(default_factory=list)

    @property
    def incomplete(self) -> list[int]:
        """Indices of the shards with pending partitions: the ones to resubmit."""
        return [shard.index for shard in self.shards if shard.pending]

    @property
    def complete(self) -> bool:
        return not self.incomplete

    def __str__(self) -> str:
        lines = [f"checkpoint {self.checkpoint_path}: {len(self.shards)} shards",
                 f"  {'shard':>5} {'partitions':>10} {'completed':>9} {'pending':>7}"]
        lines += [f"  {s.index:>5} {s.partitions:>10} {s.completed:>9} {s.pending:>7}" for s in self.shards]
        lines.append(f"resubmit: {','.join(map(str, self.incomplete)) or 'none'}")
        return "\n".join(lines)


def _source_partitions(source: ProcessingStage | Iterable[Task]) -> list[Task]:
    """Every partition a reader (or its source stage) lists, whatever shard it
    was given; an iterable is taken as the listing itself."""
    if not isinstance(source, ProcessingStage):
        return list(source)
    stages = flatten_stages([source])
    stage = next((stage for stage in stages if stage.is_source_stage), stages[0])
    listing = getattr(stage, "list_partitions", None)
    return listing() if listing is not None else list(stage.process(EmptyTask()) or [])


def shard_manifest(
    checkpoint_path: str, source: ProcessingStage | Iterable[Task], count: int, map_size: int = 1 << 30,
) -> ShardManifest:
    """Per shard of ``count``: its partitions, how many are complete in the
    checkpoint, how many are pending.

    ``source`` is the reader the shards ran (its own shard, if any, is
    ignored: every partition is listed) or the source partitions themselves;
    it must be built as the runs' readers were (same files, grouping and
    ``fingerprint``), since those make the partitions' checkpoint keys.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer (the shards the array was split into), not {count!r}")
    outcome = derive_sources(EmptyTask(), _source_partitions(source), "shard_manifest")
    completed = open_store(checkpoint_path, map_size).completed()
    shards = [ShardProgress(index) for index in range(count)]
    for partition in outcome.outputs:
        partition_id = partition.get_deterministic_id()
        if partition_id is None:
            raise ValueError(f"partition {partition.task_id} has no deterministic id, so it has no shard")
        progress = shards[shard_of(partition_id, count)]
        progress.partitions += 1
        progress.completed += source_key(partition) in completed
    return ShardManifest(checkpoint_path, shards)
