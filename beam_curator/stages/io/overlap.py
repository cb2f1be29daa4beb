"""An entry point's paths, checked before any work: buckets that are missing
or refuse the credentials (``beam_curator.object_stores``), and outputs that
land among inputs.

An output, cache or checkpoint folder inside an input folder is read back as
input by the next run; an input inside an output folder is overwritten or
cleared by it. Either gives a wrong result without an error, so every entry
point checks its paths here first, as the filesystem will see them: local
paths with symlinks, ``..``, trailing slashes and ``file://`` resolved; object
store URLs by protocol, bucket and prefix.
"""

from __future__ import annotations

import os
import posixpath

import fsspec

from beam_curator.object_stores import check_object_stores
from beam_curator.stages.io.errors import CuratorInputError

_GLOB = ("*", "?", "[")


def resolved(url: str) -> tuple[str, str]:
    """``(protocol, absolute path)`` of a URL or local path, for comparing locations."""
    protocol, path = fsspec.core.split_protocol(url)
    if protocol in (None, "file", "local"):
        return "file", os.path.realpath(os.path.expanduser(path))
    return protocol, posixpath.normpath("/" + path.strip("/"))


def _fixed_part(url: str) -> str:
    """The folder a glob lists: its path up to the first component with a wildcard."""
    parts = url.split("/")
    for index, part in enumerate(parts):
        if any(mark in part for mark in _GLOB):
            return "/".join(parts[:index]) or "."
    return url


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def check_no_overlap(inputs: dict[str, str | list[str]], outputs: dict[str, str | None]) -> None:
    """No output location (``{parameter: url}``) equals, contains or lies inside an input one."""
    written = {name: (url, resolved(url)) for name, url in outputs.items() if url}
    for input_name, urls in inputs.items():
        for url in [urls] if isinstance(urls, str) else urls:
            protocol, path = resolved(_fixed_part(url))
            for output_name, (output_url, (output_protocol, output_path)) in written.items():
                if output_protocol != protocol:
                    continue
                if _within(output_path, path):
                    how = "is" if output_path == path else "lies inside"
                elif _within(path, output_path):
                    how = "contains"
                else:
                    continue
                raise CuratorInputError(
                    f"{output_name} {output_url!r} {how} {input_name} {url!r}: a run would "
                    f"{'read its own output back as input' if how != 'contains' else 'write over its own input'}. "
                    f"Choose a {output_name} outside the input (a sibling folder, for example)"
                )


def check_paths(inputs: dict[str, str | list[str]], outputs: dict[str, str | None]) -> None:
    """Every entry point's first check of its paths (``{parameter: url}``): each bucket
    answers with the credentials given, then no output lies among the inputs."""
    check_object_stores({**inputs, **outputs})
    check_no_overlap(inputs, outputs)
