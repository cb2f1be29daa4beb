"""What a stage asks of the machine it runs on, as NeMo Curator's ``Resources``.

Beam does not schedule by CPU count or GPU memory; these requests become Beam
resource hints (``beam_curator.transforms.resources``), which Dataflow
honours and Flink, Spark and the local runners do not schedule by
(docs/gpu.md). ``gpus`` > 0 also makes each worker claim a GPU of its own
(``pin_worker_gpu``) before the stage's ``setup``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Resources:
    """``cpus``, ``gpu_memory_gb`` (a share of one GPU) or ``gpus`` (whole GPUs),
    as in NeMo Curator; ``gpu_type`` and ``min_ram`` (e.g. ``"16GB"``) are the
    Beam hints NeMo has no field for. NeMo turns ``gpu_memory_gb`` into a
    fraction of the local GPU; a Beam pipeline is built on a machine that may
    have none, so here it asks for one GPU (see :attr:`gpus_requested`)."""

    cpus: float = 1.0
    gpu_memory_gb: float = 0.0
    gpus: float = 0.0
    gpu_type: str | None = None
    min_ram: str | None = None

    def __post_init__(self) -> None:
        for name in ("cpus", "gpu_memory_gb", "gpus"):
            if getattr(self, name) < 0:
                raise ValueError(f"Resources.{name} must be >= 0, got {getattr(self, name)}")
        if self.gpus > 0 and self.gpu_memory_gb > 0:
            raise ValueError(
                "Resources takes gpus (whole GPUs, for multi-GPU stages) or gpu_memory_gb (part of one GPU), not both"
            )

    @property
    def requires_gpu(self) -> bool:
        return self.gpus > 0 or self.gpu_memory_gb > 0

    @property
    def gpus_requested(self) -> int:
        """Whole accelerators to request from the runner (a share of one counts as one)."""
        whole = int(-(-self.gpus // 1))
        return max(whole, 1) if self.requires_gpu else 0

    @classmethod
    def of(cls, value: Resources | dict[str, Any] | None) -> Resources:
        """A stage's ``resources`` as a ``Resources`` (a plain dict of the same fields is accepted too)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(f"unknown resource(s) {unknown}; Resources takes {sorted(known)}")
            return cls(**value)
        raise TypeError(f"resources must be a Resources (or a dict of its fields), got {type(value).__name__}")
