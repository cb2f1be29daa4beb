"""YAML read with the line of every mapping and key, so that a wrong target or parameter is named
with the line a user edits."""

from __future__ import annotations

from typing import Any

import fsspec
import yaml


class Located(dict):
    """A YAML mapping that knows its file, its own line and the line of each key (1-based)."""

    file: str = ""
    line: int = 0
    key_lines: dict[Any, int]

    def where(self, key: Any = None) -> str:
        """``file:line`` of ``key`` (of the mapping itself when ``key`` is None or not in it)."""
        return f"{self.file}:{self.key_lines.get(key, self.line) if key is not None else self.line}"


class _LineLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose mappings are ``Located``."""

    file = ""


def _located_mapping(loader: _LineLoader, node: yaml.MappingNode) -> Located:
    loader.flatten_mapping(node)
    mapping = Located()
    mapping.file, mapping.line, mapping.key_lines = loader.file, node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.key_lines[key] = key_node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _located_mapping)


def load_located(path: str) -> Any:
    """The YAML document at ``path`` (local or fsspec URL), its mappings ``Located``."""
    with fsspec.open(path, "r", encoding="utf-8") as handle:
        loader = _LineLoader(handle)
        loader.file = path
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
