"""Run the brainmap CLI with a crash injected at one point: ``python tests/crashing.py
PHASE:N brainmap-args...``.

``text:N`` exits abruptly as the N-th file read is about to be stored (inside the text pass's
open transaction); ``embed:N`` right after the N-th batch of vectors is written. The crash tests
use it so that no test hook lives in production code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

CRASHED = 137  # what a kill -9 looks like to a shell


def _exit_on_call(owner: Any, name: str, count: int, *, after: bool) -> None:
    original: Callable[..., Any] = getattr(owner, name)
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if not after and calls == count:
            os._exit(CRASHED)
        result = original(*args, **kwargs)
        if after and calls == count:
            os._exit(CRASHED)
        return result

    setattr(owner, name, wrapped)


def main() -> None:
    phase, _, count = sys.argv[1].partition(":")
    if phase == "text":
        from brainmap import indexer

        _exit_on_call(indexer, "_store_read", int(count), after=False)
    elif phase == "embed":
        from brainmap.store import VectorRepo

        _exit_on_call(VectorRepo, "put", int(count), after=True)
    else:
        raise SystemExit(f"unknown crash point {sys.argv[1]!r}")
    sys.argv = ["brainmap", *sys.argv[2:]]
    from brainmap.__main__ import main as brainmap_main

    brainmap_main()


if __name__ == "__main__":
    main()
