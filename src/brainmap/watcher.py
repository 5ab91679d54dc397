"""``brainmap watch``: re-index libraries when their files change."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from brainmap.config import Config, LibraryConfig
from brainmap.safefile import TEMP_PREFIX


class ChangeFilter:
    """Which library (if any) a file-system change concerns: a file the library indexes, a
    folder (its files may have been created before the watcher saw the folder), or a deleted
    path without a suffix (a folder gone with its files), or a file one of its files was read
    with (:attr:`read_with`: a file a compose file's ``extends`` names, its include's env
    file, a file its ``.env``'s ``COMPOSE_FILE`` names, whatever its name).
    Temp files and excluded folders never count, nor do other files (editor swap files,
    ``.txt``)."""

    def __init__(self, libs: list[LibraryConfig]) -> None:
        self.roots = [(lib.path.resolve(), lib.paths, lib.name) for lib in libs]
        self._code = {lib.name: lib.code_paths for lib in libs}
        self.read_with: dict[str, set[str]] = {}  # library -> paths its files were read with

    def library(self, deleted: bool, path: str) -> str | None:
        target = Path(path)
        if target.name.startswith(TEMP_PREFIX):
            return None
        for root, paths, name in self.roots:
            if not target.is_relative_to(root) or target == root:
                continue
            rel = target.relative_to(root).as_posix()
            if rel in self.read_with.get(name, ()):
                return name
            if paths.inside_pruned(rel):
                return None
            code = self._code[name]
            if paths.wants(rel) or (code is not None and code.wants(rel)):
                return name
            if target.is_dir() or (deleted and not target.suffix):
                return name
            return None
        return None


def watch(
    cfg: Config,
    names: list[str] | None,
    reindex: Callable[[list[str]], None],
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = 400,
    read_with: Callable[[], dict[str, set[str]]] | None = None,
) -> None:
    """Call ``reindex(libraries)`` now, then again with the libraries whose files changed,
    until ``stop`` is set. ``reindex`` is the reindex op, after-change step included;
    ``read_with`` tells, after each, what files the libraries' files were read with (those
    the scan does not read count as changes too)."""
    from watchfiles import Change
    from watchfiles import watch as watch_changes

    libs = cfg.select(names)
    changes_of = ChangeFilter(libs)

    def library_of(change: Change, path: str) -> str | None:
        return changes_of.library(change == Change.deleted, path)

    started = False
    for changes in watch_changes(
        *(root for root, _, _ in changes_of.roots),
        watch_filter=lambda change, path: library_of(change, path) is not None,
        debounce=debounce_ms,
        stop_event=stop,
        yield_on_timeout=True,  # the first (empty) yield means the watcher is running
        rust_timeout=1000,
    ):
        if not started:
            # index only once the watcher runs, so that no change made meanwhile is missed
            started = True
            reindex([lib.name for lib in libs])
        else:
            touched = sorted(
                {name for change, path in changes if (name := library_of(change, path))}
            )
            if not touched:
                continue
            reindex(touched)
        if read_with is not None:
            changes_of.read_with = read_with()
