"""Pipelines described in YAML files laid out as NeMo Curator's Hydra configurations (``stages:``, each
stage a ``_target_`` class path with its parameters), and the presets shipped in ``presets/``.

The files are read without Hydra or OmegaConf: ``_target_`` paths under ``nemo_curator.`` are read as
the same paths under ``beam_curator.``, ``${name}`` takes a top-level value, and Hydra's own keys are
ignored. Every target and parameter is checked, with the file's line, before anything runs.
"""

from beam_curator.configs.filter_config import PRESETS, FilterConfig, load_filter_config, preset_path
from beam_curator.configs.targets import ConfigError

__all__ = ["PRESETS", "ConfigError", "FilterConfig", "load_filter_config", "preset_path"]
