"""The SDK worker process of ``local-multiprocess``: ``python -m beam_curator.runners.sdk_worker``.

Logging is set up first, at the level the driver passed in the environment
(``beam_curator.logs.worker_log_level``), then Beam's own worker runs. The
level sits on the handler because Beam's worker resets the root logger's
level to INFO as it starts. The worker ignores Ctrl-C: the terminal sends it
to the driver's whole process group, and the driver, which ends the run,
ends its workers (a worker killed first would only add its traceback).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from beam_curator import logs


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    level = os.environ.get(logs.WORKER_LEVEL_VARIABLE, "WARN")
    handler = logs.make_handler(None, verbose=level == "INFO")
    handler.setLevel(level)
    logs.replace_root_handlers(handler)
    from apache_beam.runners.worker import sdk_worker_main

    if level != "INFO":  # its one warning says a local worker has no cache folder, as intended
        logging.getLogger(sdk_worker_main.__name__).setLevel(logging.ERROR)
    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
