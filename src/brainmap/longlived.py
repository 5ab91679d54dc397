"""What a long-lived process (``brainmap serve``, ``brainmap mcp``) does once it is set up."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect once, then keep every object alive now (modules, the app, its routes and
    models) out of the garbage collector's later passes (:func:`gc.freeze`).

    A server holds ~130k such objects; a full collection walks them all, 75-83 ms alone and
    up to ~150 ms under load, during which no request runs (it holds the GIL). Frozen, a full
    collection walks only what came later. ``brainmap serve`` settles once the model is
    loaded; ``brainmap mcp`` before its first search, so what a search loads (the search
    modules, numpy) stays in the collector's passes.
    """
    gc.collect()
    gc.freeze()
