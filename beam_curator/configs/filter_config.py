"""A filtering pipeline's stages read from a YAML file in NeMo Curator's layout, or from a preset.

NeMo Curator's pipeline files (``config/text/heuristic_filter_english_pipeline.yaml`` and its
siblings) list a reader, the filter and modifier stages, and a writer under ``stages:``, with
``input_path`` and ``output_path`` left ``???`` for the command line. Here the reader and writer
entries are where the caller's input and output go: their paths are the caller's and their other
settings (``fields``, ``blocksize``...) are handed back for the caller's own reader and writer, so
that one file serves JSON Lines and parquet alike. Hydra's keys (``defaults``, ``hydra``) and
``documentation`` are ignored; every other top-level key is a value ``${name}`` may take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from beam_curator.configs.targets import TARGET, ConfigError, build, check_parameters, ours
from beam_curator.configs.yaml_lines import Located, load_located
from beam_curator.stages.base import ProcessingStage

IGNORED_KEYS = ("defaults", "hydra", "documentation")
PRESETS_FOLDER = Path(__file__).parent / "presets"
PRESETS = tuple(sorted(path.stem for path in PRESETS_FOLDER.glob("*.yaml")))
# NeMo Curator's reader and writer classes (at ``stages.text.io``; ours are at ``stages.io``), and the
# parameter that holds the path the caller gives instead.
_READERS, _WRITERS = {"JsonlReader", "ParquetReader"}, {"JsonlWriter", "ParquetWriter"}
_IO_PACKAGES = ("beam_curator.stages.text.io.", "beam_curator.stages.io.")


@dataclass
class FilterConfig:
    """What a file describes: its stages in order, its top-level values (``text_field``...) as given
    over the file's, and the settings of its reader and writer entries other than their paths (None
    values left out)."""

    path: str
    stages: list[ProcessingStage]
    values: dict[str, Any] = field(default_factory=dict)
    reader_settings: dict[str, Any] = field(default_factory=dict)
    writer_settings: dict[str, Any] = field(default_factory=dict)


def preset_path(name: str) -> str:
    """The file of the preset ``name`` (one of ``PRESETS``)."""
    if name not in PRESETS:
        raise ConfigError(f"no preset {name!r}; the presets: {', '.join(PRESETS)}")
    return str(PRESETS_FOLDER / f"{name}.yaml")


def load_filter_config(path: str, values: dict[str, Any] | None = None) -> FilterConfig:
    """The stages of the file at ``path``, made and checked; ``values`` set top-level values over the
    file's (``input_path``, ``output_path``, ``text_field``)."""
    try:
        document = load_located(path)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the configuration file ({error})") from error
    if not isinstance(document, Located) or not isinstance(document.get("stages"), list):
        raise ConfigError(f"{path}: no stages: list the filters under a top-level 'stages:' key, "
                          "each a mapping with a _target_ class path and its parameters")
    variables = {key: value for key, value in document.items() if key not in (*IGNORED_KEYS, "stages")}
    variables.update(values or {})
    config = FilterConfig(path, [], variables)
    for entry in document["stages"]:
        if not isinstance(entry, Located) or TARGET not in entry:
            where = entry.where() if isinstance(entry, Located) else document.where("stages")
            raise ConfigError(f"{where}: each stage is a mapping with a {TARGET} class path and its parameters")
        kind = _io_kind(entry[TARGET])
        if kind is not None:
            _take_io_settings(config, entry, kind, variables)
            continue
        stage = build(entry, variables, entry.where(TARGET))
        if not isinstance(stage, ProcessingStage):
            raise ConfigError(f"{entry.where(TARGET)}: {entry[TARGET]} is not a stage: put a filter in a ScoreFilter "
                              "(its filter_obj) and a modifier in a Modify (its modifier_fn), as NeMo Curator's files do")
        config.stages.append(stage)
    if not config.stages:
        raise ConfigError(f"{path}: no filter or modifier stages to run")
    return config


def _io_kind(target: Any) -> str | None:
    """``"reader"`` or ``"writer"`` for a reader or writer target, None for any other."""
    if not isinstance(target, str) or not ours(target).startswith(_IO_PACKAGES):
        return None
    name = target.rpartition(".")[2]
    return "reader" if name in _READERS else "writer" if name in _WRITERS else None


def _take_io_settings(config: FilterConfig, entry: Located, kind: str, variables: dict[str, Any]) -> None:
    """Check a reader or writer entry's parameters against ours and keep those set, but the path."""
    from beam_curator.stages.io import JsonlReader, JsonlWriter

    cls, path_parameter = (JsonlReader, "file_paths") if kind == "reader" else (JsonlWriter, "path")
    check_parameters(cls, entry, skip=(path_parameter,))
    settings = config.reader_settings if kind == "reader" else config.writer_settings
    for key, value in entry.items():
        if key not in (TARGET, path_parameter) and value is not None:
            settings[key] = build(value, variables, entry.where(key))
