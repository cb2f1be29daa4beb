"""The torch device a semantic-dedup kernel runs on, resolved in one place so
that k-means and the pairwise passes agree on what "no device given" means."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The given device, else CUDA when available, else the CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
