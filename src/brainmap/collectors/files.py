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
MAX_EXTENDED_BYTES = 4_000_000  # a file a compose file's extends names, read whole or not at all


class _Base(NamedTuple):
    """A folder's compose base file, as :class:`ProjectFinder` reads it."""

    rel: str  # its path in the library
    named: str | None  # the project it names (COMPOSE_PROJECT_NAME, name:)
    # the library path of each file its include: names -> those of the env files filling it in
    includes: dict[str, tuple[str, ...]]


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
        self._includers: dict[str, _Base | None] = {}  # compose file -> the base including it
        self._envs: dict[str, IncludeEnv | None] = {}  # compose file -> what fills it in

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

    def compose_file(self, rel: str) -> tuple[str, IncludeEnv | None]:
        """The project of the services of the compose file ``rel``, and when a base file
        includes it, what fills it in (:meth:`include_env`): docker compose then copies them
        into the including project (whatever the file names), else they are the project of
        its folder's files."""
        includer = self.included_by(rel)
        if includer is None:
            return self(rel), None
        return includer, self.include_env(rel)

    def included_by(self, rel: str) -> str | None:
        """The project of the compose base file that includes the file ``rel`` (in its
        folder or a folder above; the nearest), through the base files that include that one
        in turn; None when none does."""
        base = self._includer(rel)
        if base is None:
            return None
        return self.included_by(base.rel) or self.compose_project(base.rel.rpartition("/")[0])

    def include_env(self, rel: str) -> IncludeEnv | None:
        """The variables that fill in the compose file ``rel`` that a base file includes, as
        docker compose sets them: those of the including file (which win), over those of the
        include's env files (the ``.env`` of the included file's folder unless it names
        others); and what each env file was like (:meth:`ExtendedFiles.reads`). None for a
        file no base file includes (its own folder's ``.env`` fills it in)."""
        if rel in self._envs:
            return self._envs[rel]
        base = self._includer(rel)
        found: IncludeEnv | None = None
        if base is not None:
            outer = self.include_env(base.rel)
            if outer is None:  # a base file no other includes: its own .env fills it in
                env = _dotenv(self.root / base.rel, self.root, base.rel)
                outer = IncludeEnv(env, [], base.rel, env)
            own: dict[str, str] = {}
            seen = list(outer.reads)
            for env_rel in base.includes[rel]:
                stat_now, text = _read_at(self.root, env_rel, MAX_ENV_BYTES)
                own.update(compose.read_env(text or ""))
                seen.append([env_rel, *(stat_now or (None, None))])
            found = IncludeEnv({**own, **outer.env}, seen, outer.base, outer.base_env)
        self._envs[rel] = found
        return found

    def _includer(self, rel: str) -> _Base | None:
        """The compose base file that includes the file ``rel``: in its folder or a folder
        above, the nearest (None: none does)."""
        if rel not in self._includers:
            found: _Base | None = None
            folder = rel.rpartition("/")[0]
            while True:
                base = self._base(folder)
                if base is not None and base.rel != rel and rel in base.includes:
                    found = base
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
                named, entries = compose.project_of(
                    head.decode("utf-8", "replace"), _dotenv_at(dir_fd)
                )
                found = _Base(_joined(folder, name), named, _included(folder, entries))
                break
        finally:
            os.close(dir_fd)
        self._bases[folder] = found
        return found


class IncludeEnv(NamedTuple):
    """What fills in a compose file a base file includes (:meth:`ProjectFinder.include_env`)."""

    env: dict[str, str]
    reads: list[list[Any]]  # [path, mtime ns, size] of each env file ([path, None, None]: none)
    base: str  # the base file no other includes, through which it is included
    base_env: dict[str, str]  # that file's .env: what docker compose up reads and starts


def _included(folder: str, entries: list[compose.Include]) -> dict[str, tuple[str, ...]]:
    """The library path of each file the includes of a base file in ``folder`` name, with
    those of its env files: as written, else the ``.env`` of the first file's folder."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        files = [j for p in entry.paths if (j := _joined(folder, p))]
        if not files:
            continue
        written = entry.env_files or [posixpath.join(posixpath.dirname(entry.paths[0]), ".env")]
        env_files = tuple(j for p in written if (j := _joined(folder, p)))
        for rel in files:
            out.setdefault(rel, env_files)
    return out


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
    included: IncludeEnv | None = None,
) -> list[Observation]:
    """Observations of a declared-config file; ``source`` is compose, ssh or yaml.
    ``include_roots``: the only folders an ssh ``Include`` may read (default: sshconfig's).
    ``root``: the library holding the file at ``rel``, whose ``.env`` is then read as the
    scan reads (no symlink followed). ``included``: what fills in a compose file a base file
    includes (:meth:`ProjectFinder.compose_file`), whose services are in ``project`` whatever
    it names and part of what ``docker compose up`` reads, whatever its file's name."""
    if source == "compose":
        env = included.env if included else _dotenv(path.parent / ".env", root, rel)
        layer = None if included else compose.layer_of(path.name)
        extended = ExtendedFiles(root, rel, env)
        # what docker compose up reads and starts: the base file's .env says (that of the
        # base file that includes this one)
        base, base_env = (included.base, included.base_env) if included else (rel, env)
        up, listed = _compose_file(root, base, base_env) if layer is None else (None, [])
        said = compose.collect(
            text, project, env, layer=layer, included=included is not None, load=extended,
            up=up, started=_started(base_env) if layer is None else [],
            base=base.rpartition("/")[0] if included else None,
        )  # fmt: skip
        # what to read this file again after (reads_changed), on its first part_of
        reads = extended.reads() + (included.reads if included else []) + listed
        first = next((obs for obs in said if obs.predicate == PART_OF), None)
        if reads and first is not None:
            first.props["reads"] = reads
        return said
    if source == "ssh":
        return sshconfig.collect(path, text, rel, include_roots)
    if source == "yaml":
        return yamlconf.collect(text, project, path.name.rsplit(".", 1)[0])
    raise ValueError(f"unknown config source {source!r}")


def _started(env: Mapping[str, str]) -> list[str]:
    """The profiles ``docker compose up`` starts (``COMPOSE_PROFILES``)."""
    return sorted({p.strip() for p in env.get("COMPOSE_PROFILES", "").split(",")} - {""})


def _compose_file(
    root: Path | None, rel: str, env: Mapping[str, str]
) -> tuple[list[str] | None, list[list[Any]]]:
    """The files ``COMPOSE_FILE`` names for ``docker compose up`` (:func:`compose.reads_up`)
    when every one is in the base file ``rel``'s folder (else None: not followed), and what
    they were like (to read ``rel`` again when one of them comes or goes)."""
    names = compose.reads_up(env)
    if names is None or root is None:
        return None, []
    folder = rel.rpartition("/")[0]
    found = [(posixpath.join(folder, n), _stat_at(root, posixpath.join(folder, n))) for n in names]
    # the base file itself is read again when it changes anyway
    reads = [[path, *(stat or (None, None))] for path, stat in found if path != rel]
    return (names if all(stat for _, stat in found) else None), reads


class ExtendedFiles:
    """Reads the files a compose file's ``extends`` name (:data:`compose.Load`): beneath the
    library (none without it), no symlink followed, each once; and remembers what it saw of
    each (size and time, or nothing), so that the compose file is read again when one of them
    changes, comes or goes (:func:`reads_changed`)."""

    def __init__(self, root: Path | None, rel: str, env: Mapping[str, str]) -> None:
        self.root = root
        self.rel = rel
        self.env = compose.public(env)  # the paths it reads are kept
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


def reads_changed(root: Path, reads: list[list[Any]]) -> bool:
    """Whether a file that a compose file was read with (a file its ``extends`` names, an
    env file of its include: :meth:`ExtendedFiles.reads`) is not as it was then: changed,
    gone, or come."""
    return any(_stat_at(root, str(path)) != (None if mtime is None else (mtime, size))
               for path, mtime, size in reads)  # fmt: skip


def _stat_at(root: Path, rel: str) -> tuple[int, int] | None:
    """(mtime ns, size) of the regular file ``rel`` beneath ``root`` (no symlink followed)."""
    folder, _, name = rel.rpartition("/")
    try:  # ValueError: a NUL in a path written in a file
        dir_fd = open_beneath(root, folder)
    except (OSError, ValueError):
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    finally:
        os.close(dir_fd)
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


def _read_at(root: Path, rel: str, limit: int) -> tuple[tuple[int, int] | None, str | None]:
    """The size and time of the regular file ``rel`` beneath ``root`` (taken before it is
    read: a change while reading reads it again next time) and its text, None when it cannot
    be read or is larger than ``limit`` (a cut file would say less than it does)."""
    seen = _stat_at(root, rel)
    if seen is None or seen[1] > limit:
        return seen, None
    try:
        return seen, read_beneath(root, rel, limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return seen, None


def _services_at(root: Path, rel: str) -> tuple[tuple[int, int] | None, Mapping[str, Node] | None]:
    """What :class:`ExtendedFiles` keeps of the file ``rel``: its size and time, and its
    services."""
    seen, text = _read_at(root, rel, MAX_EXTENDED_BYTES)
    try:
        tree = parse(text) if text is not None else None
    except BudgetExceeded:
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
