"""The one chokepoint for writing files: contained, atomic, durable, and never a no-op rewrite.

Every write goes to a unique temp file in the target's folder (named with the writer's pid),
is fsynced, then renamed (or hard-linked, to create without overwriting) into place, and the
folder is fsynced. A crash leaves the old bytes or the new bytes, never a mix; the temp file it
may leave behind is never indexed and is swept by the next scan.
"""

from __future__ import annotations

import errno
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

TEMP_PREFIX = ".brainmap-tmp-"
TEMP_MAX_AGE_S = 600  # older temp files are abandoned even when their pid was reused
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once, at import, before any thread could race with it


class UnsafePathError(ValueError):
    """A write target resolves outside the folder it must stay in."""


def contained(root: Path, target: Path) -> Path:
    """Return ``target`` resolved, or raise if it (or a symlink on the way) leaves ``root``."""
    root_real = root.resolve()
    resolved = target.resolve()
    if not resolved.is_relative_to(root_real):
        raise UnsafePathError(f"{target} is outside {root}")
    return resolved


def _write_temp(folder: Path, data: bytes, mode: int) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=folder)
    try:
        os.fchmod(fd, mode)  # mkstemp makes it 0600; the file gets the mode it had, or a new one's
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _prepare(root: Path, target: Path) -> Path:
    """The target under its contained, existing folder (the name itself is not resolved:
    a link or rename never writes through a symlink that sits at the target's name)."""
    contained(root, target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = contained(root, target.parent)  # mkdir may have followed a symlink made meanwhile
    return folder / target.name


def atomic_write(root: Path, target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` inside ``root`` atomically, replacing what is there.

    Returns False (and writes nothing) when the file already holds exactly these bytes, so
    that watchers do not see a change.
    """
    path = contained(root, target)  # an existing symlink must not lead outside either
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path = _prepare(root, path)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    tmp = _write_temp(path.parent, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return True


def atomic_create(root: Path, candidates: Iterable[Path], data: bytes) -> Path:
    """Create the first of ``candidates`` that does not exist yet, atomically, and return it.

    The complete file appears under its name in one step (a hard link of the fsynced temp
    file), and an existing file is never overwritten, even by a concurrent writer.
    """
    tmp: str | None = None
    try:
        for target in candidates:
            path = _prepare(root, target)
            if tmp is None or Path(tmp).parent != path.parent:
                if tmp is not None:
                    Path(tmp).unlink(missing_ok=True)
                tmp = _write_temp(path.parent, data, 0o666 & ~_UMASK)
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue
            _fsync_dir(path.parent)
            return path
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    raise FileExistsError(errno.EEXIST, "no free file name")


def is_abandoned_temp(path: Path) -> bool:
    """True for a temp file whose writer is gone (dead pid) or that is too old to be live."""
    pid = path.name[len(TEMP_PREFIX) :].partition("-")[0]
    try:
        if time.time() - path.stat().st_mtime > TEMP_MAX_AGE_S:
            return True
    except OSError:
        return False
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the process exists but belongs to someone else
        return False
    return False


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
