"""Run a page's example blocks in order, as a reader pastes them into one
Python session and one shell: ``python run_doc_blocks.py BLOCKS.json``.

Each python block runs in a ``__main__`` module of its own (so it must import
and define everything it uses, as in a fresh interpreter, and what it defines
travels to Beam's workers by value as a script's would); the interpreter and
the modules it imported are kept from block to block, which is what makes a
page's examples cost one start of Python, Beam and torch instead of one a
block. Each bash block runs in ``bash -euo pipefail``. The first block that
fails ends the run: its traceback or output, then a last line
``block at line N failed``, and exit status 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
import types


def run_python(code: str, where: str) -> bool:
    main = types.ModuleType("__main__")
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = main
    try:
        exec(compile(code, where, "exec"), main.__dict__)
    except SystemExit as stop:
        if stop.code not in (None, 0):
            traceback.print_exc()
            return False
    except BaseException:  # noqa: BLE001 (a KeyboardInterrupt of an example is its failure too)
        traceback.print_exc()
        return False
    finally:
        sys.modules["__main__"] = saved
        sys.stdout.flush()
        sys.stderr.flush()
    return True


def run_bash(code: str) -> bool:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", code], stdout=sys.stdout, stderr=sys.stderr).returncode == 0


def main(blocks_file: str) -> int:
    for block in json.loads(open(blocks_file).read()):
        where = f"{block['page']}:{block['line']}"
        print(f"--- {where} ({block['kind']})", flush=True)
        ran = run_python(block["code"], where) if block["kind"] == "python" else run_bash(block["code"])
        if not ran:
            print(f"block at line {block['line']} failed", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
