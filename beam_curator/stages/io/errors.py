"""The error raised for unusable input records and files."""


class CuratorInputError(ValueError):
    """Bad input that names where it is and what to do about it."""
