"""The data model: tasks know nothing of how or where they run."""

from beam_curator.tasks.base import EmptyTask, FailedTask, NoneTask, Task
from beam_curator.tasks.document import DocumentBatch
from beam_curator.tasks.file_group import FileBlock, FileGroupTask

__all__ = ["DocumentBatch", "EmptyTask", "FailedTask", "FileBlock", "FileGroupTask", "NoneTask", "Task"]
