"""The error raised for unusable input records and files."""

from beam_curator.errors import CuratorError


class CuratorInputError(CuratorError, ValueError):
    """Bad input that names where it is and what to do about it."""
