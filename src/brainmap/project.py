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
    root: Path
    libraries: tuple[str, ...]  # configured libraries inside the root, or holding it
    git: bool  # the root is a git repository's main worktree

    @property
    def known(self) -> bool:
        """A git repository or a library says what it is (not only a folder's name)."""
        return self.git or bool(self.libraries)

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the project's root (posix), or None when outside it."""
        if self.root == Path():
            return None
        try:
            return path.absolute().relative_to(self.root).as_posix()
        except ValueError:
            return None


def identify(cfg: Config, directory: Path) -> Project:
    """The project of ``directory`` (see the module docstring)."""
    directory = directory.absolute()
    found = git_root(directory)
    root = found or directory
    libs = [
        lib
        for lib in cfg.libraries
        if lib.name != GLOBAL_LIBRARY and _holds(lib.path.absolute(), root)
    ]
    owner = max(libs, key=lambda lib: len(lib.path.absolute().parts), default=None)
    name = owner.name if owner is not None else _folder_name(root)
    inside = [
        lib.name
        for lib in cfg.libraries
        if lib.name != GLOBAL_LIBRARY and _holds(root, lib.path.absolute())
    ]
    members = tuple(dict.fromkeys([*(lib.name for lib in libs), *inside]))
    return Project(name, root, members, found is not None)


def named(cfg: Config, name: str) -> Project:
    """A project known by its name only (over HTTP, say): its library is the one so named."""
    libs = tuple(lib.name for lib in cfg.libraries if lib.name == name)
    return Project(name, Path(), libs, False)


def resolve(cfg: Config, name: str) -> Project:
    """``.`` is the project of the current directory; any other text, a project's name."""
    return identify(cfg, Path.cwd()) if name == "." else named(cfg, name)


def _holds(folder: Path, path: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _folder_name(root: Path) -> str:
    name = root.name.removesuffix(".git") or root.name
    return name or "root"


def git_root(directory: Path) -> Path | None:
    """The main worktree of the git repository holding ``directory`` (None outside git).

    A linked worktree's ``.git`` is a file naming ``<common>/worktrees/<name>``, whose
    ``commondir`` leads back to the common git dir; its parent is the main worktree. A bare
    repository's common dir is its own root.
    """
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                return folder
            if dot_git.is_file():
                common = _common_dir(dot_git, folder)
                return _main_worktree(common) if common is not None else folder
        except OSError:  # an unreadable folder on the way up: not inside it
            return None
    return None


def git_head(directory: Path) -> str | None:
    """The commit the HEAD of the repository holding ``directory`` is at (a worktree's own
    HEAD), or None: outside git, before the first commit, or when it cannot be read."""
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                gitdir = dot_git
            elif dot_git.is_file():
                match = re.match(r"gitdir:\s*(.+)", _read_small(dot_git) or "")
                if match is None:
                    return None
                gitdir = Path(match.group(1).strip())
                gitdir = gitdir if gitdir.is_absolute() else folder / gitdir
            else:
                continue
        except OSError:
            return None
        common = _read_small(gitdir / "commondir")
        base = Path(os.path.normpath(gitdir / common)) if common else gitdir
        return _resolve_head(gitdir, base)
    return None


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


def _common_dir(dot_git: Path, folder: Path) -> Path | None:
    """The common git dir of the worktree whose ``.git`` file is ``dot_git``."""
    text = _read_small(dot_git)
    match = re.match(r"gitdir:\s*(.+)", text or "")
    if match is None:
        return None
    gitdir = Path(match.group(1).strip())
    gitdir = gitdir if gitdir.is_absolute() else (folder / gitdir)
    common = _read_small(gitdir / "commondir")
    if common is None:  # a submodule's or a separate git dir: its own repository
        return None
    path = Path(common)
    return Path(os.path.normpath(path if path.is_absolute() else gitdir / path))


def _main_worktree(common: Path) -> Path:
    """The folder a common git dir belongs to: the parent of ``.git``, else (bare) itself."""
    return common.parent if common.name == ".git" else common
