"""The base of the errors a user acts on.

A ``CuratorError``'s message names what is wrong (a file, a line, a
parameter, a folder) and what to do, so the command prints the message alone
(exit 2) and the Python API raises it as is, wherever it was raised: in the
driver, or inside a Beam stage on a worker process (see
``beam_curator.pipeline``). Nothing here imports anything of the package, so
every layer may raise one.
"""


class CuratorError(Exception):
    """An error about input, settings or the folders a run uses, whose message is enough to act on."""


class OutputWriteError(CuratorError, OSError):
    """A file (an output, a cache file, a checkpoint mark) could not be written
    for lack of space; the message names it. Nothing incomplete was kept under
    its final name and nothing was marked done, so freeing space and rerunning
    finishes the work (see ``beam_curator.writing``)."""
