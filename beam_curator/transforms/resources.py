"""Stage resource requests as Beam resource hints.

Runners that honour hints (Dataflow, and portable runners that map them to
worker pools) place GPU stages on accelerator workers; the rest ignore them,
so the same pipeline still runs on a laptop.
"""

from __future__ import annotations

from beam_curator.stages import ProcessingStage


def resource_hints(stage: ProcessingStage) -> dict[str, str]:
    """``{"gpus": n, "gpu_type": t, "min_ram": "16GB"}`` → Beam's hint keywords."""
    hints: dict[str, str] = {}
    gpus = int(stage.resources.get("gpus", 0))
    if gpus:
        gpu_type = stage.resources.get("gpu_type", "nvidia-l4")
        hints["accelerator"] = f"type:{gpu_type};count:{gpus};install-nvidia-driver"
    if "min_ram" in stage.resources:
        hints["min_ram"] = str(stage.resources["min_ram"])
    return hints
