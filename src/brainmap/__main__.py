"""``python -m brainmap`` and the ``brainmap`` command.

A hook call (``brainmap [--home DIR] hook EVENT``) goes straight to the hook protocol: it is
the one command on an agent's hot path, and skipping the CLI's parser saves its start-up
(click alone takes about 20 ms to import).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    """Console-script entry point."""
    argv = sys.argv[1:]
    home: Path | None = None
    if len(argv) == 4 and argv[0] == "--home":
        home, argv = Path(argv[1]), argv[2:]
    if len(argv) == 2 and argv[0] == "hook" and not argv[1].startswith("-"):
        import contextlib
        import os

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
