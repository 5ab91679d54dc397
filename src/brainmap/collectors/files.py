"""Which collector reads a library file, and the call that reads it."""

from __future__ import annotations

from pathlib import Path

from brainmap.collectors import Observation, compose, project_name, sshconfig, yamlconf

MAX_ENV_BYTES = 1_000_000
COMPOSE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")


class ProjectFinder:
    """The project a file speaks about: that of the nearest folder above it (itself included)
    holding a compose file, else its own folder's. A project is named by the compose file's
    ``name:``, else by its folder's path in the library (``app``, ``samples/app``; the library's
    name at the top), so that two ``app`` folders are two projects. A README in
    ``app/frontend/`` beside a compose file in ``app/`` is about project ``app``."""

    def __init__(self, root: Path, library: str) -> None:
        self.root = root
        self.library = library
        self._cache: dict[str, str | None] = {}  # folder -> its compose project, if any
        self._projects: dict[str, str] = {}  # folder -> the project its files speak about

    def __call__(self, rel: str) -> str:
        own = rel.rpartition("/")[0]
        project = self._projects.get(own)
        if project is None:
            folder = own
            while (found := self._compose_project(folder)) is None and folder:
                folder = folder.rpartition("/")[0]
            project = self._projects[own] = found or self.folder_id(own)
        return project

    def folder_id(self, folder: str) -> str:
        # at the top, the folder's own name: docker compose names a project so
        folder = folder or self.root.name or self.library
        return "/".join(project_name(part) for part in folder.split("/"))

    def _compose_project(self, folder: str) -> str | None:
        if folder not in self._cache:
            base = self.root / folder if folder else self.root
            found: str | None = None
            for name in COMPOSE_NAMES:
                path = base / name
                if not path.is_file():  # not a FIFO or a device: reading one would hang
                    continue
                try:
                    with path.open("rb") as handle:
                        head = handle.read(MAX_ENV_BYTES).decode("utf-8", "replace")
                except OSError:
                    continue
                named = compose.project_of(head, _dotenv(base / ".env"))
                found = named or self.folder_id(folder)
                break
            self._cache[folder] = found
        return self._cache[folder]


def config_observations(
    source: str, path: Path, rel: str, text: str, project: str
) -> list[Observation]:
    """Observations of a declared-config file; ``source`` is compose, ssh or yaml."""
    if source == "compose":
        return compose.collect(text, project, _dotenv(path.parent / ".env"))
    if source == "ssh":
        return sshconfig.collect(path, text, rel)
    if source == "yaml":
        return yamlconf.collect(text, project, path.name.rsplit(".", 1)[0])
    raise ValueError(f"unknown config source {source!r}")


def _dotenv(path: Path) -> dict[str, str]:
    """The compose ``.env`` beside the file: used to interpolate ports, never stored."""
    try:
        if path.is_file():
            with path.open("rb") as handle:
                text = handle.read(MAX_ENV_BYTES).decode("utf-8", "replace")
            return compose.read_env(text)
    except OSError:
        pass
    return {}
