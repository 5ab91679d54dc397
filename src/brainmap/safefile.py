"""The one chokepoint for writing files: contained, atomic, durable, and never a no-op rewrite."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TEMP_PREFIX = ".brainmap-tmp-"


class UnsafePathError(ValueError):
    """A write target resolves outside the folder it must stay in."""


def contained(root: Path, target: Path) -> Path:
    """Return ``target`` resolved, or raise if it (or a symlink on the way) leaves ``root``."""
    root_real = root.resolve()
    resolved = target.resolve()
    if not resolved.is_relative_to(root_real):
        raise UnsafePathError(f"{target} is outside {root}")
    return resolved


def atomic_write(root: Path, target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` inside ``root`` atomically.

    A unique temp file in the same folder is written, fsynced and renamed over the target,
    then the folder is fsynced. Returns False (and writes nothing) when the file already holds
    exactly these bytes, so that watchers do not see a change.
    """
    path = contained(root, target)
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    contained(root, path.parent)  # mkdir may have followed a symlink created meanwhile
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return True


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
