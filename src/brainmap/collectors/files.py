"""Which collector reads a library file, and the call that reads it."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import NamedTuple

from brainmap.collectors import Observation, compose, project_name, sshconfig, yamlconf
from brainmap.safefile import open_beneath, read_regular_at

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
        return compose.collect(text, project, env, layer=layer, included=included)
    if source == "ssh":
        return sshconfig.collect(path, text, rel, include_roots)
    if source == "yaml":
        return yamlconf.collect(text, project, path.name.rsplit(".", 1)[0])
    raise ValueError(f"unknown config source {source!r}")


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
