"""The one chokepoint for writing files: contained, atomic, durable, and never a no-op rewrite;
the names files get (slugs) and the lock that serialises the writers of one library.

Every write goes to a unique temp file in the target's folder (named with the writer's pid),
is fsynced, then renamed (or hard-linked, to create without overwriting) into place, and the
folder is fsynced. A crash leaves the old bytes or the new bytes, never a mix; the temp file it
may leave behind is never indexed and is swept by the next scan.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

TEMP_PREFIX = ".brainmap-tmp-"
_SLUG_MAX_CHARS = 80
_SLUG_MAX_BYTES = 200
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{i}" for p in ("com", "lpt") for i in range(10)}
_NON_WORD = re.compile(r"[^\w]+|_+")
TEMP_MAX_AGE_S = 600  # older temp files are abandoned even when their pid was reused
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once, at import, before any thread could race with it


def _slug(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    slug = _NON_WORD.sub("-", unicodedata.normalize("NFKC", folded).lower()).strip("-")
    # readable names, and file systems limit them to 255 bytes: cut on a character boundary
    cut = slug[:_SLUG_MAX_CHARS].encode("utf-8")[:_SLUG_MAX_BYTES]
    return cut.decode("utf-8", "ignore").rstrip("-")


def slugify(text: str) -> str:
    """A file-name-safe slug: letters and digits of any script, joined by '-'."""
    slug = _slug(text) or "note"
    return f"{slug}-note" if slug in _RESERVED else slug


def safe_folder(folder: str | None) -> Path:
    """A relative folder made of slugs: '..', absolute paths and drive letters cannot survive."""
    parts = [slugify(part) for part in re.split(r"[\\/]+", folder or "") if _slug(part)]
    return Path(*parts) if parts else Path()


class LockTimeout(OSError):
    """Another process held a lock for longer than the caller could wait."""


@contextmanager
def file_lock(path: Path, timeout_s: float | None = None) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes; waits for it as long as it takes, or
    at most ``timeout_s`` (then :class:`LockTimeout`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        if timeout_s is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LockTimeout(
                            errno.EAGAIN, "held by another process", str(path)
                        ) from None
                    time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def library_lock(
    home: Path, library: str, timeout_s: float | None = None
) -> AbstractContextManager[None]:
    """Serialises writers of one library across processes: the dedup check, the write and
    the index update of a save (or the read-modify-write of a merge) form one step."""
    return file_lock(home / "locks" / f"{slugify(library)}.lock", timeout_s)


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


class NotRegularError(OSError):
    """A path that should hold a file holds something else (a FIFO, a socket, a device)."""


def read_regular(path: Path, limit: int, offset: int = 0) -> bytes:
    """The bytes of a regular file from ``offset`` on, at most ``limit`` of them. A FIFO,
    socket or device put where a file was raises :class:`NotRegularError` at once instead of
    blocking the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularError(errno.EINVAL, "not a regular file", str(path))
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


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
