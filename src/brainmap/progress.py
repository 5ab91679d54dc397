"""The progress callback that long passes (scan, embed, git import, bake-off) report through."""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(phase, done, total)``: phase names the pass ("scan", "embed", "git", or a
#: bake-off task); ``total`` is None while it is not known yet.
ProgressFn = Callable[[str, int, int | None], None]
