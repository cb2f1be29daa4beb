"""Readers and writers."""

from beam_curator.stages.io.errors import CuratorInputError
from beam_curator.stages.io.jsonl import JsonlReader, JsonlReaderStage, JsonlWriter
from beam_curator.stages.io.parquet import ParquetReader, ParquetReaderStage, ParquetWriter
from beam_curator.stages.io.partitioning import FilePartitioningStage
from beam_curator.stages.io.writer import FileWriterStage

__all__ = [
    "CuratorInputError",
    "FilePartitioningStage",
    "FileWriterStage",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
]
