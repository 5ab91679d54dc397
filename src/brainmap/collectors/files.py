"""Which collector reads a library file, and the call that reads it."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from brainmap.collectors import PART_OF, Observation, compose, project_name, sshconfig, yamlconf
from brainmap.collectors.yamltree import BudgetExceeded, Node, parse
from brainmap.safefile import open_beneath, read_beneath, read_regular_at

MAX_ENV_BYTES = 1_000_000


class _Base(NamedTuple):
    """A folder's compose base file, as :class:`ProjectFinder` reads it."""

    rel: str  # its path in the library
    named: str | None  # the project it names (COMPOSE_PROJECT_NAME, name:)
    includes: frozenset[str]  # the library paths of the files its include: names


class ProjectFinder:
    """The project a file speaks about: that of the nearest folder above it (itself included)
    holding a compose file, else its own folder's. A project is named by the compose file's
    ``name:``, else by its folder's path in the library (``app``, ``samples/app``; the library's
    name at the top), so that two ``app`` folders are two projects. A README in
    ``app/frontend/`` beside a compose file in ``app/`` is about project ``app``. The services
    of a compose file that a base file includes (``include:``) are the including project's
    (:meth:`compose_file`)."""

    def __init__(self, root: Path, library: str) -> None:
        self.root = root
        self.library = library
        self._cache: dict[str, str | None] = {}  # folder -> its compose project, if any
        self._projects: dict[str, str] = {}  # folder -> the project its files speak about
        self._bases: dict[str, _Base | None] = {}  # folder -> its compose base file
        self._includers: dict[str, str | None] = {}  # compose file -> its includer's project

    def __call__(self, rel: str) -> str:
        own = rel.rpartition("/")[0]
        project = self._projects.get(own)
        if project is None:
            folder = own
            while (found := self.compose_project(folder)) is None and folder:
                folder = folder.rpartition("/")[0]
            project = self._projects[own] = found or self.folder_id(own)
        return project

    def folder_id(self, folder: str) -> str:
        # at the top, the folder's own name: docker compose names a project so
        folder = folder or self.root.name or self.library
        return "/".join(project_name(part) for part in folder.split("/"))

    def compose_project(self, folder: str) -> str | None:
        """The project the compose base file of ``folder`` names (None: it holds none)."""
        if folder not in self._cache:
            base = self._base(folder)
            self._cache[folder] = None if base is None else base.named or self.folder_id(folder)
        return self._cache[folder]

    def compose_file(self, rel: str) -> tuple[str, bool]:
        """The project of the services of the compose file ``rel``, and whether a base file
        includes it: docker compose then copies them into the including project (whatever
        the file names), else they are the project of its folder's files."""
        includer = self.included_by(rel)
        return (includer, True) if includer is not None else (self(rel), False)

    def included_by(self, rel: str) -> str | None:
        """The project of the compose base file that includes the file ``rel`` (in its
        folder or a folder above; the nearest), through the base files that include that one
        in turn; None when none does."""
        if rel not in self._includers:
            found: str | None = None
            folder = rel.rpartition("/")[0]
            while True:
                base = self._base(folder)
                if base is not None and base.rel != rel and rel in base.includes:
                    found = self.included_by(base.rel) or self.compose_project(folder)
                    break
                if not folder:
                    break
                folder = folder.rpartition("/")[0]
            self._includers[rel] = found
        return self._includers[rel]

    def _base(self, folder: str) -> _Base | None:
        """The compose base file docker compose reads in ``folder`` (None: there is none)."""
        if folder in self._bases:
            return self._bases[folder]
        found: _Base | None = None
        try:
            # opened without following symlinks, as the scan reads the library: a folder
            # swapped for a symlink must not name projects from files outside it
            dir_fd = open_beneath(self.root, folder)
        except OSError:
            self._bases[folder] = None
            return None
        try:
            for name in compose.BASE_NAMES:
                try:  # a FIFO or a device is refused, not read (it would hang)
                    head = read_regular_at(dir_fd, name, MAX_ENV_BYTES)
                except OSError:
                    continue
                named, paths = compose.project_of(
                    head.decode("utf-8", "replace"), _dotenv_at(dir_fd)
                )
                included = frozenset(j for p in paths if (j := _joined(folder, p)))
                found = _Base(_joined(folder, name), named, included)
                break
        finally:
            os.close(dir_fd)
        self._bases[folder] = found
        return found


def _joined(folder: str, path: str) -> str:
    """``path`` as written in a file of ``folder``, as a path in the library ("" when it
    leaves the library or is absolute)."""
    if path.startswith("/"):
        return ""
    joined = posixpath.normpath(posixpath.join(folder, path))
    return "" if joined == ".." or joined.startswith("../") else joined


def config_observations(
    source: str,
    path: Path,
    rel: str,
    text: str,
    project: str,
    *,
    include_roots: list[Path] | None = None,
    root: Path | None = None,
    included: bool = False,
) -> list[Observation]:
    """Observations of a declared-config file; ``source`` is compose, ssh or yaml.
    ``include_roots``: the only folders an ssh ``Include`` may read (default: sshconfig's).
    ``root``: the library holding the file at ``rel``, whose ``.env`` is then read as the
    scan reads (no symlink followed). ``included``: a compose file a base file includes
    (:meth:`ProjectFinder.compose_file`), whose services are in ``project`` whatever it names
    and part of what ``docker compose up`` reads, whatever its file's name."""
    if source == "compose":
        env = _dotenv(path.parent / ".env", root, rel)
        layer = None if included else compose.layer_of(path.name)
        extended = ExtendedFiles(root, rel, env)
        said = compose.collect(text, project, env, layer=layer, included=included, load=extended)
        if extended.seen:  # what to re-read this file after (see ExtendedFiles.changed)
            reads = extended.reads()
            for obs in said:
                if obs.predicate == PART_OF:
                    obs.props["reads"] = reads
        return said
    if source == "ssh":
        return sshconfig.collect(path, text, rel, include_roots)
    if source == "yaml":
        return yamlconf.collect(text, project, path.name.rsplit(".", 1)[0])
    raise ValueError(f"unknown config source {source!r}")


class ExtendedFiles:
    """Reads the files a compose file's ``extends`` name (:data:`compose.Load`): beneath the
    library (none without it), no symlink followed, each once; and remembers what it saw of
    each (size and time, or nothing), so that the compose file is read again when one of them
    changes, comes or goes (:func:`extended_changed`)."""

    def __init__(self, root: Path | None, rel: str, env: Mapping[str, str]) -> None:
        self.root = root
        self.rel = rel
        self.env = env
        # library path -> ((mtime ns, size) or None when unreadable, its services or None)
        self.seen: dict[str, tuple[tuple[int, int] | None, Mapping[str, Node] | None]] = {}

    def __call__(self, within: str | None, path: str) -> tuple[str, Mapping[str, Node]] | None:
        if self.root is None:
            return None
        folder = (within or self.rel).rpartition("/")[0]
        target = _joined(folder, compose.interpolate(path, self.env))
        if not target:  # outside the library: never read
            return None
        if target not in self.seen:
            self.seen[target] = _services_at(self.root, target)
        services = self.seen[target][1]
        return None if services is None else (target, services)

    def reads(self) -> list[list[Any]]:
        """``[path, mtime ns, size]`` of each file read, ``[path, None, None]`` of each that
        could not be."""
        return [[path, *(stat or (None, None))] for path, (stat, _) in sorted(self.seen.items())]


def extended_changed(root: Path, reads: list[list[Any]]) -> bool:
    """Whether a file a compose file's ``extends`` read (:meth:`ExtendedFiles.reads`) is not
    as it was then: changed, gone, or come."""
    return any(_stat_at(root, str(path)) != (None if mtime is None else (mtime, size))
               for path, mtime, size in reads)  # fmt: skip


def _stat_at(root: Path, rel: str) -> tuple[int, int] | None:
    """(mtime ns, size) of the regular file ``rel`` beneath ``root`` (no symlink followed)."""
    folder, _, name = rel.rpartition("/")
    try:
        dir_fd = open_beneath(root, folder)
    except OSError:
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


def _services_at(root: Path, rel: str) -> tuple[tuple[int, int] | None, Mapping[str, Node] | None]:
    """What :class:`ExtendedFiles` keeps of the file ``rel``: its size and time (taken before
    it is read: a change while reading reads it again next time) and its services."""
    seen = _stat_at(root, rel)
    if seen is None:
        return None, None
    try:
        text = read_beneath(root, rel, MAX_ENV_BYTES).decode("utf-8", "replace")
        tree = parse(text)
    except (OSError, BudgetExceeded):
        return seen, None
    services = tree.get("services") if tree is not None else None
    return seen, (services.mapping if services is not None and services.mapping else None)


def _dotenv(path: Path, root: Path | None = None, rel: str = "") -> dict[str, str]:
    """The compose ``.env`` beside the file: used to interpolate ports, never stored."""
    if root is not None:
        try:
            dir_fd = open_beneath(root, rel.rpartition("/")[0])
        except OSError:
            return {}
        try:
            return _dotenv_at(dir_fd)
        finally:
            os.close(dir_fd)
    try:
        if path.is_file():
            with path.open("rb") as handle:
                text = handle.read(MAX_ENV_BYTES).decode("utf-8", "replace")
            return compose.read_env(text)
    except OSError:
        pass
    return {}


def _dotenv_at(dir_fd: int) -> dict[str, str]:
    """The ``.env`` in an opened library folder (a symlink, FIFO or device there is not read)."""
    try:
        data = read_regular_at(dir_fd, ".env", MAX_ENV_BYTES)
    except OSError:
        return {}
    return compose.read_env(data.decode("utf-8", "replace"))
