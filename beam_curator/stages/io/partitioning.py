"""The source stage of every reader: list input files and group them."""

from __future__ import annotations

from collections import Counter

import logging
from typing import Any, Callable

import fsspec
from fsspec.implementations.local import LocalFileSystem

from beam_curator.stages.base import ProcessingStage
from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.fingerprint import block_fingerprint, check_mode, file_stats, group_fingerprint
from beam_curator.stages.io.hive import listing_base
from beam_curator.stages.io.sharding import ShardSpec, resolve_shard, shard_of
from beam_curator.tasks import FileBlock, FileGroupTask, Task

logger = logging.getLogger(__name__)


def parse_size(size: int | str | None) -> int | None:
    """``"128MB"``, ``"1GiB"`` or a number of bytes."""
    if size is None or isinstance(size, int):
        return size
    text = size.strip().upper().replace("IB", "B")
    for suffix, factor in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


def is_hidden(path: str, root: str) -> bool:
    """Whether a name below ``root`` starts with ``.`` or ``_``: editor and
    engine leftovers (``.ipynb_checkpoints``, ``_SUCCESS``, ``.crc``, our own
    ``.tmp-*`` files) that are never data."""
    below = path[len(root):] if path.startswith(root) else path.rsplit("/", 1)[-1]
    return any(part[:1] in (".", "_") for part in below.strip("/").split("/") if part)


def _other_kinds(fs: fsspec.AbstractFileSystem, root: str) -> str:
    """What a folder that holds none of the expected files holds instead, and what to change."""
    if not fs.isdir(root):
        return ""
    base = root.rstrip("/") + "/"
    endings = Counter("." + ".".join(name.rsplit("/", 1)[-1].split(".")[1:]) for name in fs.find(root)
                      if not is_hidden(name, base) and "." in name.rsplit("/", 1)[-1])
    if not endings:
        return ""
    found = ", ".join(f"{count} {ending}" for ending, count in endings.most_common(3))
    return (f"; it holds {found} files: if those are the input, name their format (input_filetype= or "
            "--input-filetype in a workflow, the matching reader in a pipeline)")


def list_files(file_paths: str | list[str], extensions: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Sorted URLs of a folder, a glob or a list of either, with their fsspec
    ``info`` (size, modification time) taken from a fresh listing."""
    patterns = [file_paths] if isinstance(file_paths, str) else list(file_paths)
    found: dict[str, dict[str, Any]] = {}
    for pattern in patterns:
        fs, root = fsspec.core.url_to_fs(pattern)
        # fsspec shares one filesystem per set of options in a process, with its cached listings: a rerun in the
        # same process must see the objects added or removed since, on an object store as on a local disk.
        fs.invalidate_cache()
        if fs.isdir(root):
            matches = {p: i for p, i in fs.find(root, detail=True).items() if p.endswith(extensions)}
            base = root.rstrip("/") + "/"
        elif any(ch in root for ch in "*?["):
            matches = fs.glob(root, detail=True)
            base = listing_base(root)
        else:
            matches = {root: fs.info(root)} if fs.exists(root) else {}
            base = ""
        matches = {
            p: i for p, i in matches.items() if i.get("type", "file") == "file" and not (base and is_hidden(p, base))
        }
        if not matches:
            raise CuratorInputError(
                f"input {pattern!r} matches no {'/'.join(extensions)} files; check the path or glob "
                f"(names starting with '.' or '_' are never input){_other_kinds(fs, root)}"
            )
        local = isinstance(fs, LocalFileSystem)
        found.update({(path if local else fs.unstrip_protocol(path)): info for path, info in matches.items()})
    return dict(sorted(found.items()))


def expand_paths(file_paths: str | list[str], extensions: tuple[str, ...]) -> list[str]:
    """Sorted, de-duplicated URLs for a folder, a glob or a list of either."""
    return list(list_files(file_paths, extensions))


class FilePartitioningStage(ProcessingStage):
    """Groups sorted input files into ``FileGroupTask`` partitions.

    A group closes after ``files_per_partition`` files or once it holds
    ``blocksize`` bytes, whichever comes first; sorting makes the grouping,
    and so the partition ids, the same on every run. A file larger than
    ``blocksize`` that its reader can split (``split_file``: path, size and
    blocksize to ``(start, stop)`` blocks) becomes one partition per block,
    so that a long file is finished, and marked complete, block by block.

    Each partition carries its files' sizes and modification times
    (``_metadata["file_stats"]``), which its completion mark keeps. With
    ``fingerprint="stat"`` or ``"content"`` it also carries a digest of its
    files (``_metadata["fingerprint"]``) that becomes part of its checkpoint
    key, so a partition whose files changed runs again. A block's key always
    carries its file's fingerprint (at least ``"stat"``) and its range: once
    the file, or the blocksize, changed, none of its finished blocks stands.

    With ``shard=(index, count)`` it keeps only the partitions whose id falls
    in that shard (see :mod:`~beam_curator.stages.io.sharding`), so ``count``
    processes started at once on one checkpoint share the work without
    coordination; their counts of pending and skipped partitions are their
    shard's alone. ``"slurm"`` or ``"slurm/COUNT"`` take the index from the
    Slurm job array this runs in.
    """

    is_source_stage = True

    def __init__(
        self,
        file_paths: str | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        extensions: tuple[str, ...] = (".jsonl",),
        fingerprint: str | None = None,
        shard: ShardSpec = None,
        split_file: Callable[[str, int, int], list[tuple[int, int]]] | None = None,
    ) -> None:
        self.file_paths = file_paths
        self.split_file = split_file
        self.files_per_partition = files_per_partition
        self.blocksize = parse_size(blocksize)
        self.extensions = extensions
        self.input_fingerprint = check_mode(fingerprint)
        self.shard = resolve_shard(shard)
        self.name = "file_partitioning"
        if files_per_partition is None and blocksize is None:
            self.files_per_partition = 1

    def fingerprint(self) -> object:
        """How files are grouped. Which files, and which shard of them, are not part of it: partition
        ids and their files' fingerprints follow the input, and job-array shards share a checkpoint."""
        return {"files_per_partition": self.files_per_partition, "blocksize": self.blocksize,
                "extensions": list(self.extensions), "fingerprint": self.input_fingerprint}

    def process(self, task: Task) -> list[FileGroupTask]:
        partitions = self.list_partitions()
        if self.shard is None:
            return partitions
        index, count = self.shard
        mine = [partition for partition in partitions if shard_of(partition.get_deterministic_id(), count) == index]
        logger.info("shard %d/%d: %d of %d partitions", index, count, len(mine), len(partitions))
        return mine

    def list_partitions(self) -> list[FileGroupTask]:
        """Every partition of the input, whatever the shard."""
        infos = list_files(self.file_paths, self.extensions)
        stats = file_stats(infos)
        groups: list[list[str]] = [[]]
        blocks: dict[str, list[FileBlock]] = {}  # of the files split: each is a group of its own
        group_bytes = 0
        for path in infos:
            size = stats[path][0]
            split = self._split(path, size)
            full = self.files_per_partition and len(groups[-1]) >= self.files_per_partition
            if groups[-1] and (split or full or (self.blocksize and group_bytes >= self.blocksize)):
                groups.append([])
                group_bytes = 0
            groups[-1].append(path)
            group_bytes += size  # a split file holds more than blocksize: the next file opens a group
            if split:
                blocks[path] = split
        partitions = []
        for group in groups:
            fingerprint = None
            for block in blocks.get(group[0], [None]):
                partition = FileGroupTask(dataset_name=str(self.file_paths), data=group, block=block)
                partition._metadata["file_stats"] = {path: stats[path] for path in group}
                # A block stands for its range of one version of its file: its key always follows both.
                mode = self.input_fingerprint or ("stat" if block is not None else None)
                if mode:
                    fingerprint = fingerprint or group_fingerprint(group, mode, infos)
                    partition._metadata["fingerprint"] = fingerprint if block is None else block_fingerprint(
                        fingerprint, block)
                partitions.append(partition)
        return partitions

    def _split(self, path: str, size: int) -> list[FileBlock]:
        """The blocks of a file larger than ``blocksize``; none for a file read whole."""
        if not (self.split_file and self.blocksize and size > self.blocksize):
            return []
        split = self.split_file(path, size, self.blocksize)
        return [FileBlock(index, start, stop) for index, (start, stop) in enumerate(split)] if len(split) > 1 else []
