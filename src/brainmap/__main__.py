"""``python -m brainmap`` and the ``brainmap`` command.

A hook call (``brainmap [--home DIR] hook EVENT``) goes straight to the hook protocol: it is
the one command on an agent's hot path, and skipping the CLI's parser saves its start-up
(click alone takes about 20 ms to import).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def one_blas_thread() -> None:
    """Give numpy's BLAS one thread in this process (unless $OPENBLAS_NUM_THREADS says
    otherwise); it only works before numpy loads.

    brainmap's products are small: a query against a few thousand vectors. With a thread per
    core, OpenBLAS splits each one and then keeps its threads spinning for the next, taking a
    core from everything else (other requests, the agent, the model). Measured with
    benchmarks/serve.py, paired: 8 HTTP clients 77-79 req/s with a thread per core against
    102-116 with one, a lone MCP search p50 56-60 ms against 43-44. A single exact search
    over 40k vectors pays for it: 7 ms instead of 3.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    """Console-script entry point."""
    one_blas_thread()
    argv = sys.argv[1:]
    home: Path | None = None
    if len(argv) == 4 and argv[0] == "--home":
        home, argv = Path(argv[1]), argv[2:]
    if len(argv) == 2 and argv[0] == "hook" and not argv[1].startswith("-"):
        import contextlib

        from brainmap.claude import run_hook

        code = run_hook(argv[1], home, sys.stdin.buffer, sys.stdout)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a reader that went away: nothing to do
                stream.flush()
        # everything is closed and on disk: skip the interpreter's teardown (about 12 ms of
        # an agent's every tool call)
        os._exit(code)
    from brainmap.cli.main import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
