"""What a long-lived process (``brainmap serve``, ``brainmap mcp``) does once it is set up."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Keep every object alive now (modules, the app, its routes and models) out of the
    garbage collector's later passes (:func:`gc.freeze`).

    A server holds 120-140k such objects; a full collection walks them all, 60-85 ms alone
    and up to ~150 ms under load, during which no request runs (it holds the GIL). Frozen, a
    full collection walks only what came later. (No collection first: it would add its
    60 ms to start-up, for the little garbage that setting up leaves.)
    """
    gc.freeze()
