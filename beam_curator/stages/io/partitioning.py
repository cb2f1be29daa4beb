"""The source stage of every reader: list input files and group them."""

from __future__ import annotations

import fsspec
from fsspec.implementations.local import LocalFileSystem

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.tasks import FileGroupTask, Task


def parse_size(size: int | str | None) -> int | None:
    """``"128MB"``, ``"1GiB"`` or a number of bytes."""
    if size is None or isinstance(size, int):
        return size
    text = size.strip().upper().replace("IB", "B")
    for suffix, factor in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


def expand_paths(file_paths: str | list[str], extensions: tuple[str, ...]) -> list[str]:
    """Sorted, de-duplicated URLs for a folder, a glob or a list of either."""
    patterns = [file_paths] if isinstance(file_paths, str) else list(file_paths)
    found: set[str] = set()
    for pattern in patterns:
        fs, root = fsspec.core.url_to_fs(pattern)
        if fs.isdir(root):
            matches = [p for p in fs.find(root) if p.endswith(extensions)]
        else:
            matches = fs.glob(root) if any(ch in root for ch in "*?[") else ([root] if fs.exists(root) else [])
        if not matches:
            raise CuratorInputError(
                f"input {pattern!r} matches no {'/'.join(extensions)} files; check the path or glob"
            )
        matches = [m for m in matches if not m.rstrip("/").rsplit("/", 1)[-1].startswith(".")]
        local = isinstance(fs, LocalFileSystem)
        found.update(match if local else fs.unstrip_protocol(match) for match in matches)
    return sorted(found)


class FilePartitioningStage(ProcessingStage):
    """Groups sorted input files into ``FileGroupTask`` partitions.

    A group closes after ``files_per_partition`` files or once it holds
    ``blocksize`` bytes, whichever comes first; sorting makes the grouping,
    and so the partition ids, the same on every run.
    """

    is_source_stage = True

    def __init__(
        self,
        file_paths: str | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        extensions: tuple[str, ...] = (".jsonl",),
    ) -> None:
        self.file_paths = file_paths
        self.files_per_partition = files_per_partition
        self.blocksize = parse_size(blocksize)
        self.extensions = extensions
        self.name = "file_partitioning"
        if files_per_partition is None and blocksize is None:
            self.files_per_partition = 1

    def process(self, task: Task) -> list[FileGroupTask]:
        paths = expand_paths(self.file_paths, self.extensions)
        sizes = self._sizes(paths) if self.blocksize else {}
        groups: list[list[str]] = [[]]
        group_bytes = 0
        for path in paths:
            full = self.files_per_partition and len(groups[-1]) >= self.files_per_partition
            if groups[-1] and (full or (self.blocksize and group_bytes >= self.blocksize)):
                groups.append([])
                group_bytes = 0
            groups[-1].append(path)
            group_bytes += sizes.get(path, 0)
        return [FileGroupTask(dataset_name=str(self.file_paths), data=group) for group in groups]

    @staticmethod
    def _sizes(paths: list[str]) -> dict[str, int]:
        fs, _ = fsspec.core.url_to_fs(paths[0])
        return {path: fs.size(path) for path in paths}
