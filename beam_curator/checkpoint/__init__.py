"""Completion tracking and its storage; knows nothing of Beam."""

from beam_curator.checkpoint.ledger import CreditLedger, union_complete
from beam_curator.checkpoint.opening import open_store
from beam_curator.checkpoint.shards import ShardManifest, ShardProgress, shard_manifest
from beam_curator.checkpoint.store import (
    METADATA_DIR,
    CheckpointBusyError,
    CheckpointStatus,
    CheckpointStore,
)

__all__ = [
    "METADATA_DIR",
    "CheckpointBusyError",
    "CheckpointStatus",
    "CheckpointStore",
    "CreditLedger",
    "ShardManifest",
    "ShardProgress",
    "open_store",
    "shard_manifest",
    "union_complete",
]
