"""Stage resource requests as Beam resource hints.

Dataflow places hinted stages on accelerator workers. Flink, Spark and the
local runners schedule nothing by them (docs/gpu.md): there a hinted
stage only gets an SDK environment, and so a fused step, of its own, and the
same pipeline still runs on a laptop.
"""

from __future__ import annotations

from beam_curator.stages import ProcessingStage
from beam_curator.stages.resources import Resources


def resource_hints(stage: ProcessingStage) -> dict[str, str]:
    """``Resources(gpus=n, gpu_type=t, min_ram="16GB")`` → Beam's hint keywords."""
    wanted = Resources.of(stage.resources)
    hints: dict[str, str] = {}
    if wanted.gpus_requested:
        gpu_type = wanted.gpu_type or "nvidia-l4"
        hints["accelerator"] = f"type:{gpu_type};count:{wanted.gpus_requested};install-nvidia-driver"
    if wanted.min_ram:
        hints["min_ram"] = str(wanted.min_ram)
    return hints
