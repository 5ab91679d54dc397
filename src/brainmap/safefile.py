"""The one chokepoint for writing files: contained, atomic, durable, and never a no-op rewrite;
the names files get (slugs) and the lock that serialises the writers of one library.

Every write goes to a unique temp file in the target's folder (named with the writer's pid),
is fsynced, then renamed (or hard-linked, to create without overwriting) into place, and the
folder is fsynced, all relative to that folder opened once without following a symlink. A crash leaves the old bytes or the new bytes, never a mix; the temp file it
may leave behind is never indexed and is swept by the next scan.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path

from brainmap.errors import UserError

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


WRITE_HINT = (
    "brainmap writes only into real folders of the library, never through a symlink: make "
    "the folder a real one, or write to another folder"
)


class UnsafePathError(UserError, ValueError):
    """A write target outside the folder it must stay in, or a symlink on its way: refused,
    never followed (HTTP 403)."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 403) -> None:
        super().__init__(message, hint=hint or WRITE_HINT, status=status)


# Writing. A path is resolved anew at every use, so a folder on it swapped for a symlink
# (rename-exchange, in a loop) could take a write outside the library between any check and
# the write. So the target's folder is opened once, one name at a time from the root without
# following a symlink, and the temp file, the rename or link into place, the fsync and any
# clean-up all happen relative to that one descriptor: nothing can land anywhere else.


def _split(root: Path, target: Path) -> tuple[list[str], str]:
    """The folder names from ``root`` down to ``target``'s folder, and its file name.

    '..' is collapsed as text: the walk follows no symlink, so no name can lead elsewhere."""
    where = Path(os.path.abspath(target))
    for base in (Path(os.path.abspath(root)), root.resolve()):  # callers may pass either
        if where.is_relative_to(base) and where != base:
            *folder, name = where.relative_to(base).parts
            return folder, name
    raise UnsafePathError(f"{target} is outside {root}")


def _open_for_write(root: Path, folder: list[str]) -> int:
    """A descriptor of ``root``/``folder``, its missing folders made (the root itself may be
    a symlink: the user named it)."""
    root.mkdir(parents=True, exist_ok=True)
    return _descend(
        root,
        folder,
        lambda fd, name, depth: _child_for_write(fd, name, root.joinpath(*folder[:depth])),
    )


def _descend(root: Path, names: list[str], step: Callable[[int, str, int], int]) -> int:
    """A descriptor of the folder ``names`` lead to from ``root``, each opened by
    ``step(parent_fd, name, depth)`` relative to the one before (none left open on failure)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for depth, name in enumerate(names, 1):
            child = step(fd, name, depth)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _child_for_write(dir_fd: int, name: str, shown: Path) -> int:
    for attempt in range(2):
        try:
            return open_folder_at(dir_fd, name)
        except FileNotFoundError:
            if attempt:  # made a moment ago, and gone again
                raise UserError(
                    f"the folder {shown} vanished while it was being written to",
                    hint="something moved or removed it meanwhile; try again", status=409,
                ) from None  # fmt: skip
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            with suppress(OSError):
                if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    raise UnsafePathError(f"{shown} is a symlink: not written through") from None
            raise UserError(
                f"{shown} is not a folder", status=409,
                hint="a file has the name a folder of the path needs: rename it, or write "
                "to another folder",
            ) from None  # fmt: skip
        with suppress(FileExistsError):  # another writer made it meanwhile: as good
            os.mkdir(name, 0o777, dir_fd=dir_fd)
    raise AssertionError("unreachable")  # pragma: no cover


def _write_temp(dir_fd: int, data: bytes, mode: int) -> str:
    """A new, fsynced temp file holding ``data`` in the folder open as ``dir_fd``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    while True:
        tmp = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"  # the pid: see the sweep
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # the mode the file had, or a new file's
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _unlink_at(dir_fd, tmp)
        raise
    return tmp


def _unlink_at(dir_fd: int, name: str, only: os.stat_result | None = None) -> None:
    """Remove ``name`` from the folder open as ``dir_fd`` (when ``only`` is given, only if
    it is still that very file)."""
    with suppress(FileNotFoundError):
        if only is not None:
            now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (only.st_dev, only.st_ino):
                return
        os.unlink(name, dir_fd=dir_fd)


def atomic_write(root: Path, target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` inside ``root`` atomically, replacing what is there.

    Returns False (and writes nothing) when the file already holds exactly these bytes, so
    that watchers do not see a change. A symlink on the way or at the name raises
    :class:`UnsafePathError`, a FIFO, socket or device at the name :class:`NotRegularError`
    (both at once, without blocking), a folder that vanishes meanwhile :class:`UserError`.
    """
    folder, name = _split(root, target)
    dir_fd = _open_for_write(root, folder)
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            mode = 0o666 & ~_UMASK
        else:
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(f"{target} is a symlink: not written through")
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularError(errno.EINVAL, "not a regular file", str(target))
            # a size that differs needs no read to know the bytes do
            if st.st_size == len(data) and read_regular_at(dir_fd, name, len(data)) == data:
                return False
            mode = st.st_mode & 0o7777
        tmp = _write_temp(dir_fd, data, mode)
        try:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _unlink_at(dir_fd, tmp)
            raise
        os.fsync(dir_fd)
        return True
    finally:
        os.close(dir_fd)


@contextmanager
def created(root: Path, candidates: Iterable[Path], data: bytes) -> Iterator[Path]:
    """Create the first of ``candidates`` that does not exist yet, atomically, and yield it;
    when the body of the ``with`` raises, the file is removed again.

    The complete file appears under its name in one step (a hard link of the fsynced temp
    file), and an existing file is never overwritten, even by a concurrent writer. The
    removal, too, goes through the folder the file was made in, never through a path that
    may lead elsewhere by then. Raises :class:`FileExistsError` when every name is taken.
    """
    dir_fd, opened, tmp = -1, None, None
    try:
        for target in candidates:
            folder, name = _split(root, target)
            if folder != opened:
                if dir_fd >= 0:
                    fd, dir_fd = dir_fd, -1
                    _unlink_at(fd, str(tmp))
                    os.close(fd)
                dir_fd = _open_for_write(root, folder)
                opened, tmp = folder, _write_temp(dir_fd, data, 0o666 & ~_UMASK)
            assert tmp is not None
            try:
                # follow_symlinks=False: whatever is at the temp name now is linked, not a
                # file a symlink there would lead to
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError:
                continue
            made = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            _unlink_at(dir_fd, tmp)
            tmp = None
            os.fsync(dir_fd)
            try:
                yield root.joinpath(*folder, name)
            except BaseException:
                _unlink_at(dir_fd, name, only=made)  # never a file that replaced ours
                os.fsync(dir_fd)
                raise
            return
        raise FileExistsError(errno.EEXIST, "no free file name")
    finally:
        if dir_fd >= 0:
            if tmp is not None:
                _unlink_at(dir_fd, tmp)
            os.close(dir_fd)


def move(root: Path, source: Path, candidates: Iterable[Path]) -> Path:
    """Move the regular file ``source`` to the first free one of ``candidates``, all inside
    ``root``, and return where it went. Nothing is overwritten and nothing is copied: the
    file gets its new name as a hard link (the same bytes, so git sees a rename), the new
    folder is fsynced, and only then is the old name removed, if it still names that very
    file. A crash in between leaves both names, never neither. Both folders are reached one
    name at a time without following a symlink; a symlink (or a FIFO, a folder) at
    ``source`` raises :class:`UnsafePathError` (:class:`NotRegularError`), every name taken
    :class:`FileExistsError`."""
    src_folder, src_name = _split(root, source)
    src_fd = open_beneath(root, "/".join(src_folder))
    try:
        st = os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"{source} is a symlink: not moved")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularError(errno.EINVAL, "not a regular file", str(source))
        for target in candidates:
            folder, name = _split(root, target)
            dst_fd = _open_for_write(root, folder)
            try:
                try:
                    os.link(src_name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd,
                            follow_symlinks=False)  # fmt: skip
                except FileExistsError:
                    continue
                made = os.stat(name, dir_fd=dst_fd, follow_symlinks=False)
                if not stat.S_ISREG(made.st_mode):  # swapped for something else meanwhile
                    _unlink_at(dst_fd, name, only=made)
                    raise NotRegularError(errno.EINVAL, "not a regular file", str(source))
                os.fsync(dst_fd)
                _unlink_at(src_fd, src_name, only=made)  # the name of the file now linked
                os.fsync(src_fd)
                return root.joinpath(*folder, name)
            finally:
                os.close(dst_fd)
        raise FileExistsError(errno.EEXIST, "no free file name", str(source))
    finally:
        os.close(src_fd)


class NotRegularError(OSError):
    """A path that should hold a file holds something else (a FIFO, a socket, a device)."""


def read_regular(path: Path, limit: int, offset: int = 0) -> bytes:
    """The bytes of a regular file from ``offset`` on, at most ``limit`` of them. A FIFO,
    socket or device put where a file was raises :class:`NotRegularError` at once instead of
    blocking the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    return _read_opened(fd, str(path), limit, offset)


def _read_opened(fd: int, name: str, limit: int, offset: int = 0) -> bytes:
    """Read (and close) an opened file: only a regular one, at most ``limit`` bytes."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularError(errno.EINVAL, "not a regular file", name)
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


# Reading inside a library. A path is resolved anew at every use, so a folder on it swapped
# for a symlink (rename-exchange, in a loop) can lead a path read outside the library however
# it was checked a moment before. These open one name at a time relative to an opened folder
# and never follow a symlink below the library's root: what they read is inside it.
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO put at the name opens at once (and is refused) instead of waiting
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


def open_folder_at(dir_fd: int, name: str) -> int:
    """A descriptor of the folder ``name`` in the folder open as ``dir_fd``. A symlink (or a
    file) at that name raises OSError (ENOTDIR, ELOOP) instead of being followed."""
    return os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)


def open_beneath(root: Path, rel: str) -> int:
    """A descriptor of the folder ``rel`` ('' for ``root`` itself) inside ``root``, reached
    one name at a time without following a symlink (``root`` itself may be one: the user
    named it)."""
    names = [name for name in rel.split("/") if name not in ("", ".")]
    if ".." in names:
        raise UnsafePathError(f"{rel} is outside {root}")
    return _descend(root, names, lambda fd, name, _: open_folder_at(fd, name))


def read_regular_at(dir_fd: int, name: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``name`` in the folder open as ``dir_fd``.
    A symlink at that name raises OSError (ELOOP), never followed; a FIFO, socket or device
    raises :class:`NotRegularError` without blocking."""
    return _read_opened(os.open(name, _FILE_FLAGS, dir_fd=dir_fd), name, limit)


def read_beneath(root: Path, rel: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file at ``rel`` inside ``root``, read without
    following a symlink anywhere below ``root`` (see :func:`read_regular_at`)."""
    folder, _, name = rel.rpartition("/")
    dir_fd = open_beneath(root, folder)
    try:
        return read_regular_at(dir_fd, name, limit)
    finally:
        os.close(dir_fd)


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
