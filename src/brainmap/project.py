"""Project identity: which project a working directory belongs to.

The rule, in order:

1. inside a git repository, the project's root is the main worktree of its repository, so
   every worktree of one repository (one common git dir) is one project;
2. a configured library whose folder holds that root names the project (the innermost one);
3. otherwise the project is named after its root folder (the directory itself outside git).

Pure file reads, no git binary and no pygit2 (whose import alone costs 50 ms): hooks ask
this on every tool call, and the map refresh after each diary append asks for HEAD.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from brainmap.config import GLOBAL_LIBRARY, Config
from brainmap.safefile import read_regular

_MAX_GIT_FILE = 4096  # a .git file or commondir holds one path


@dataclass(frozen=True)
class Project:
    """A project: its name, its root folder, and the libraries that belong to it."""

    name: str
    root: Path  # the main worktree of its repository, else the directory
    libraries: tuple[str, ...]  # configured libraries inside the root, or holding it
    git: bool  # the root is a git repository's main worktree
    checkout: Path | None = None  # the worktree the directory is in (its files' paths)

    @property
    def known(self) -> bool:
        """A git repository or a library says what it is (not only a folder's name)."""
        return self.git or bool(self.libraries)

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the worktree it is in (posix), or None when outside it."""
        base = self.checkout or self.root
        if base == Path():
            return None
        try:
            return _real(path).relative_to(base).as_posix()
        except ValueError:
            return None


def identify(cfg: Config, directory: Path) -> Project:
    """The project of ``directory`` (see the module docstring)."""
    directory = _real(directory)
    found = find_checkout(directory)
    root = found.main if found else directory
    folders = {lib.name: _real(lib.path) for lib in cfg.libraries if lib.name != GLOBAL_LIBRARY}
    holding = [name for name, folder in folders.items() if _holds(folder, root)]
    owner = max(holding, key=lambda name: len(folders[name].parts), default=None)
    inside = [name for name, folder in folders.items() if _holds(root, folder)]
    members = tuple(dict.fromkeys([*holding, *inside]))
    return Project(owner or _folder_name(root), root, members, found is not None,
                   found.folder if found else None)  # fmt: skip


def named(cfg: Config, name: str) -> Project:
    """A project known by its name only (over HTTP, say): its library is the one so named."""
    libs = tuple(lib.name for lib in cfg.libraries if lib.name == name)
    return Project(name, Path(), libs, False)


def resolve(cfg: Config, name: str) -> Project:
    """``.`` is the project of the current directory; any other text, a project's name."""
    return identify(cfg, Path.cwd()) if name == "." else named(cfg, name)


def _real(path: Path) -> Path:
    """The path with symlinks resolved (a symlinked checkout is the same project)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop: as it is
        return path.absolute()


def _holds(folder: Path, path: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _folder_name(root: Path) -> str:
    name = root.name.removesuffix(".git") or root.name
    return name or "root"


@dataclass(frozen=True)
class Checkout:
    """A git working tree: its folder, its git dir, and the repository's common git dir."""

    folder: Path
    gitdir: Path
    common: Path

    @property
    def main(self) -> Path:
        """The repository's main worktree: the folder of the common ``.git`` (a bare
        repository's common dir is its own root)."""
        return self.common.parent if self.common.name == ".git" else self.common


def find_checkout(directory: Path) -> Checkout | None:
    """The working tree holding ``directory`` (None outside git). A linked worktree's
    ``.git`` is a file naming ``<common>/worktrees/<name>``, whose ``commondir`` leads back
    to the common git dir."""
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                return Checkout(folder, dot_git, dot_git)
            if not dot_git.is_file():
                continue
        except OSError:  # an unreadable folder on the way up: not inside it
            return None
        match = re.match(r"gitdir:\s*(.+)", _read_small(dot_git) or "")
        if match is None:
            return None  # a .git that is neither a folder nor a git file: not a repository
        gitdir = Path(match.group(1).strip())
        gitdir = gitdir if gitdir.is_absolute() else folder / gitdir
        common = _read_small(gitdir / "commondir")
        # no commondir: a submodule's or a separate git dir, a repository of its own
        base = Path(os.path.normpath(gitdir / common)) if common else folder / ".git"
        return Checkout(folder, gitdir, base)
    return None


def git_root(directory: Path) -> Path | None:
    """The main worktree of the git repository holding ``directory`` (None outside git)."""
    found = find_checkout(directory)
    return found.main if found else None


def git_head(directory: Path) -> str | None:
    """The commit the HEAD of the worktree holding ``directory`` is at, or None: outside
    git, before the first commit, or when it cannot be read."""
    found = find_checkout(directory)
    if found is None:
        return None
    common = found.gitdir if found.common == found.folder / ".git" else found.common
    return _resolve_head(found.gitdir, common)


_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REF = re.compile(r"refs/[A-Za-z0-9._/-]{1,240}")


def _resolve_head(gitdir: Path, common: Path) -> str | None:
    value = _read_small(gitdir / "HEAD") or ""
    for _ in range(5):  # a symbolic ref may name another one
        if not value.startswith("ref:"):
            return value if _SHA.fullmatch(value) else None
        ref = value[4:].strip()
        if not _REF.fullmatch(ref) or ".." in ref:
            return None
        value = _read_small(gitdir / ref) or _read_small(common / ref) or _packed(common, ref)
        if not value:
            return None  # unborn: no commit yet
    return None


def _packed(common: Path, ref: str) -> str:
    for line in (_read_small(common / "packed-refs", 1 << 22) or "").splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    return ""


def _read_small(path: Path, limit: int = _MAX_GIT_FILE) -> str | None:
    try:
        return read_regular(path, limit).decode("utf-8", "replace").strip()
    except OSError:
        return None
