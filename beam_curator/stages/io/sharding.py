"""Which of ``count`` processes owns a source partition: job arrays over one checkpoint.

Several processes (a Slurm job array, say) started at once on one checkpoint
must not read the same partition twice, and must not need to talk to each
other. Each keeps the partitions whose id hashes to its index. The id of a
file group hashes its sorted paths only, so a partition keeps its shard when
other files are added or removed, and a resubmitted shard finds exactly the
partitions it left unfinished; since paths are hashed, every process must
see the input under the same paths. Hashing balances shards on average, not
exactly: with few partitions per shard, some shards hold more than others.
"""

from __future__ import annotations

import hashlib
import os
from typing import Union

Shard = tuple[int, int]
ShardSpec = Union[Shard, str, None]

_SLURM_ID = "SLURM_ARRAY_TASK_ID"
_SLURM_COUNT = "SLURM_ARRAY_TASK_COUNT"
_SLURM_MIN = "SLURM_ARRAY_TASK_MIN"
_SLURM_STEP = "SLURM_ARRAY_TASK_STEP"


def shard_of(partition_id: str, count: int) -> int:
    """The shard (``0 <= shard < count``) of a partition's deterministic id.

    The id is hashed again rather than read as a number, so that any
    stage's ids (not only hex digests) spread evenly."""
    digest = hashlib.sha256(partition_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def check_shard(index: int, count: int, parameter: str = "shard") -> Shard:
    """``(index, count)`` if ``0 <= index < count``; a ``ValueError`` naming ``parameter`` otherwise."""
    if isinstance(index, bool) or isinstance(count, bool) or not isinstance(index, int) or not isinstance(count, int):
        raise ValueError(f"{parameter} must be (index, count) with two integers, not ({index!r}, {count!r})")
    if count < 1:
        raise ValueError(f"{parameter}: count must be at least 1, not {count}")
    if not 0 <= index < count:
        raise ValueError(f"{parameter}: index must satisfy 0 <= index < count, not index {index} with count {count}")
    return index, count


def _slurm_int(name: str, required: bool = True) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ValueError(
                f"shard 'slurm' reads {name}, which is not set: run inside a Slurm job array "
                "(sbatch --array=0-3), or give the shard as (index, count)"
            )
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def slurm_shard(count: int | None = None) -> Shard:
    """This array task's shard, from Slurm's variables.

    Without ``count``: the array as submitted is the whole job, so the count
    is ``SLURM_ARRAY_TASK_COUNT`` and the index the task's position in the
    array (``(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP``:
    ``--array=1-4`` gives shards 0 to 3). That is wrong for a resubmission of
    some shards only (``--array=1,3`` holds two tasks), so job scripts that
    resubmit give ``count``: the array task id is then the shard index itself,
    whatever else the array holds.
    """
    task_id = _slurm_int(_SLURM_ID)
    if count is not None:
        where = f"shard 'slurm/{count}' ({_SLURM_ID}={task_id}; number the array from 0)"
        return check_shard(task_id, count, parameter=where)
    first = _slurm_int(_SLURM_MIN, required=False) or 0
    step = _slurm_int(_SLURM_STEP, required=False) or 1
    position, off_step = divmod(task_id - first, step)
    if off_step:
        raise ValueError(f"{_SLURM_ID}={task_id} is not on the array's steps of {step} from {first}")
    return check_shard(position, _slurm_int(_SLURM_COUNT), parameter="shard 'slurm'")


def resolve_shard(shard: ShardSpec) -> Shard | None:
    """``None`` (every partition), ``(index, count)``, ``"INDEX/COUNT"``,
    ``"slurm"`` or ``"slurm/COUNT"`` (see :func:`slurm_shard`) as ``(index, count)``.

    Slurm's variables are read here, when the reader is built in the driver,
    since workers elsewhere do not have them."""
    if shard is None:
        return None
    if isinstance(shard, str):
        head, _, tail = shard.strip().partition("/")
        if head == "slurm" and (tail == "" or tail.isdigit()):
            return slurm_shard(int(tail) if tail else None)
        if head.isdigit() and tail.isdigit():
            return check_shard(int(head), int(tail))
        raise ValueError(f"shard {shard!r} is not INDEX/COUNT (e.g. 1/4), 'slurm' or 'slurm/COUNT'")
    if isinstance(shard, (tuple, list)) and len(shard) == 2:
        return check_shard(*shard)
    raise ValueError(f"shard must be (index, count), 'INDEX/COUNT', 'slurm' or 'slurm/COUNT', not {shard!r}")
