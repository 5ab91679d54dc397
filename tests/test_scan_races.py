"""Reading a library under attack: folders and files swapped for symlinks (or a FIFO) while
the scan runs, in a loop and at the exact moment between two steps.

RELIABILITY 18 (symlink races, the reindex side) and 19 (special files where entries were).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brainmap import indexer, ops
from brainmap.config import PathFilter
from brainmap.safefile import NotRegularError, read_beneath
from conftest import write

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux only")

MARK = b"outsidemark"  # in every file outside the library, and nowhere inside it
# the attacker: exchanges two names as fast as it can, in its own process so that the GIL of
# the reindex it races with does not slow it down
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
if libc.renameat2(-100, a, -100, b, 2):  # AT_FDCWD, RENAME_EXCHANGE
    sys.exit(os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)
"""


@contextlib.contextmanager
def _swapping(folder: Path, decoy: Path) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(decoy)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        if proc.stdout.readline() != "ready\n":
            pytest.skip(f"no RENAME_EXCHANGE here: {proc.communicate()[1].strip()}")
        yield
    finally:
        proc.kill()
        proc.wait()


def _leaked(home: Path) -> bool:
    """Whether outside text reached the database files, even in rows deleted since (freed
    pages keep their bytes): a stricter test than any query."""
    data = b"".join(p.read_bytes() for p in home.glob("brain.db*"))
    return MARK in data.lower()


def _library(tmp_path: Path, home: Path) -> tuple[ops.Brain, Path, Path]:
    lib, outside = tmp_path / "lib", tmp_path / "outside"
    write(lib / "top.md", "# Top\n\nat the top\n")
    for i in range(30):
        write(lib / "sub" / f"note{i}.md", f"# Note {i}\n\ninside text {i}\n")
        write(outside / f"note{i}.md", f"# Secret {i}\n\n{MARK.decode()} secret {i}\n")
    write(outside / "deeper" / "secret.md", f"# Deeper\n\n{MARK.decode()}\n")
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(lib)))
    return brain, lib, outside


def _reindex(brain: ops.Brain, full: bool = True) -> indexer.LibraryReport:
    report = ops.reindex(brain, ops.ReindexInput(libraries=["lib"], full=full, embed=False))
    return next(lib for lib in report.libraries if lib.library == "lib")


def test_folder_exchanged_with_a_symlink_in_a_loop_never_leads_outside(
    tmp_path: Path, home: Path
) -> None:
    brain, lib, outside = _library(tmp_path, home)
    os.symlink(outside, lib / "decoy")
    runs = 0
    with _swapping(lib / "sub", lib / "decoy"):
        deadline = time.monotonic() + 1.5
        while runs < 3 or time.monotonic() < deadline:
            _reindex(brain)
            runs += 1
    assert not _leaked(home), f"outside text indexed within {runs} runs"
    brain.close()


class _Listed(list[os.DirEntry[str]]):
    """What os.scandir returned, read already (usable as its context manager)."""

    def __enter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self)

    def __exit__(self, *exc: object) -> None:
        return None


def test_folder_replaced_by_a_symlink_after_listing_is_not_descended(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap happens right after the library's top folder was listed (``sub`` was a
    folder then) and before the scan goes into ``sub``."""
    brain, lib, outside = _library(tmp_path, home)
    _reindex(brain, full=False)
    real_scandir = os.scandir
    swapped = []

    def scandir(path: int | str) -> _Listed:
        with real_scandir(path) as it:
            listed = _Listed(it)
        if not swapped and any(e.name == "sub" for e in listed):
            os.rename(lib / "sub", tmp_path / "moved")
            os.symlink(outside, lib / "sub")
            swapped.append(path)
        return listed

    monkeypatch.setattr(os, "scandir", scandir)
    report = _reindex(brain)
    monkeypatch.undo()
    assert swapped
    assert not _leaked(home)
    skipped = {path: why for _, path, why in brain.store.entries.skipped()}
    assert skipped["sub"].startswith("cannot read folder")
    # what was indexed from the real folder is kept, as for any folder that cannot be read
    assert report.deleted == 0 and brain.store.entries.find_entry("lib:sub/note3.md") is not None
    brain.close()


@pytest.mark.timeout(60)  # the old read of a FIFO blocked forever
@pytest.mark.parametrize("replacement", ["symlink", "fifo"])
def test_file_replaced_just_before_it_is_read_is_not_followed(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, replacement: str
) -> None:
    """Between the scan's look at ``victim.md`` (a regular file) and its read, the file is
    replaced by a symlink to an outside file, or by a FIFO."""
    brain, lib, outside = _library(tmp_path, home)
    write(lib / "victim.md", "# Victim\n\nan ordinary note\n")
    real_scan = indexer.scan

    def scan(root: Path, paths: PathFilter, code: PathFilter | None = None) -> Iterator[object]:
        for found in real_scan(root, paths, code):
            if found.rel == "victim.md":
                staged = lib / "staged"
                if replacement == "symlink":
                    os.symlink(outside / "note1.md", staged)
                else:
                    os.mkfifo(staged)
                os.replace(staged, lib / "victim.md")
            yield found

    monkeypatch.setattr(indexer, "scan", scan)
    report = _reindex(brain)
    monkeypatch.undo()
    assert not _leaked(home)
    skipped = {path: why for _, path, why in brain.store.entries.skipped()}
    expected = "replaced by a symlink" if replacement == "symlink" else "not a regular file"
    assert expected in skipped["victim.md"]
    assert report.files == 32
    brain.close()


def _swap_once_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rel: str, folder: Path, outside: Path
) -> None:
    """Make the scan swap ``folder`` for a symlink to ``outside`` right after it finds ``rel``."""
    real_scan = indexer.scan

    def scan(root: Path, paths: PathFilter, code: PathFilter | None = None) -> Iterator[object]:
        for found in real_scan(root, paths, code):
            if found.rel == rel:
                os.rename(folder, tmp_path / "moved")
                os.symlink(outside, folder)
            yield found

    monkeypatch.setattr(indexer, "scan", scan)


def test_a_project_is_not_named_from_a_folder_swapped_in_meanwhile(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A README's project comes from the compose file of its folder: that folder, swapped
    for a symlink once the README was found, must not name it from outside."""
    brain, lib, outside = _library(tmp_path, home)
    readme = "# Shop\n\nStart it with `docker compose up`, then open http://localhost:8000.\n"
    write(lib / "shop" / "README.md", readme)
    write(lib / "shop" / "compose.yaml", "services:\n  web:\n    image: nginx\n")
    write(outside / "compose.yaml", f"name: {MARK.decode()}\nservices:\n  web:\n    image: x\n")
    write(outside / "README.md", readme)
    _swap_once_found(monkeypatch, tmp_path, "shop/README.md", lib / "shop", outside)
    _reindex(brain)
    monkeypatch.undo()
    assert not _leaked(home)
    brain.close()


def test_the_env_beside_a_compose_file_is_read_from_its_own_folder(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``.env`` that interpolates a compose file is read beside it: once the compose file
    was found, its folder swapped for a symlink must not lend it an outside ``.env``."""
    brain, lib, outside = _library(tmp_path, home)
    write(lib / "app" / ".env", "PROJ=inside\n")
    compose = "name: ${PROJ:-app}\nservices:\n  web:\n    image: nginx\n    ports: ['8080:80']\n"
    write(lib / "app" / "compose.yaml", compose)
    write(outside / ".env", f"PROJ={MARK.decode()}\n")
    write(outside / "compose.yaml", compose)
    _swap_once_found(monkeypatch, tmp_path, "app/compose.yaml", lib / "app", outside)
    _reindex(brain)
    monkeypatch.undo()
    assert not _leaked(home)
    brain.close()


def test_read_beneath_follows_no_symlink_and_reads_no_special_file(tmp_path: Path) -> None:
    lib, outside = tmp_path / "lib", tmp_path / "outside"
    write(lib / "a" / "b.md", "inside")
    write(outside / "b.md", "outside")
    os.symlink(outside, lib / "link")
    os.symlink(outside / "b.md", lib / "a" / "file-link.md")
    os.mkfifo(lib / "a" / "pipe.md")
    assert read_beneath(lib, "a/b.md", 100) == b"inside"
    assert read_beneath(lib, "a/b.md", 3) == b"ins"  # bounded
    with pytest.raises(NotADirectoryError):
        read_beneath(lib, "link/b.md", 100)
    with pytest.raises(OSError, match="symbolic links"):
        read_beneath(lib, "a/file-link.md", 100)
    with pytest.raises(NotRegularError):
        read_beneath(lib, "a/pipe.md", 100)  # at once: a FIFO is never waited on


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_deep_tree_is_scanned_in_order_within_a_few_descriptors(tmp_path: Path) -> None:
    """Each level holds a folder that goes on (``a``) and one with a note (``z``) that the
    scan comes back to: more open folders than the scan keeps, so some are reopened."""
    depth = indexer.MAX_OPEN_FOLDERS * 3
    lib = tmp_path / "lib"
    level = lib
    for i in range(depth):
        write(level / "z" / "n.md", f"# {i}\n")
        level = level / "a"
    level.mkdir(parents=True)
    expected = ["/".join(["a"] * i + ["z", "n.md"]) for i in range(depth - 1, -1, -1)]
    paths = PathFilter(["**/*.md"], [])
    before = _open_fds()
    most = 0
    found = []
    for item in indexer.scan(lib, paths):
        found.append(item.rel)
        most = max(most, _open_fds())
        assert item.problem is None, (item.rel, item.problem)
        # what the scan found is read from the folder it opened, however deep
        assert indexer.read_found(lib, item, 100) == f"# {depth - len(found)}\n".encode()
    assert found == expected
    assert most - before <= indexer.MAX_OPEN_FOLDERS + 1
    assert _open_fds() == before
    # a scan left half-way closes what it opened
    scan = indexer.scan(lib, paths)
    next(scan)
    scan.close()
    assert _open_fds() == before
