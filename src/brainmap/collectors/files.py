"""Which collector reads a library file, and the call that reads it."""

from __future__ import annotations

from pathlib import Path

from brainmap.collectors import (
    Observation,
    compose,
    project_name,
    project_of,
    sshconfig,
    yamlconf,
)

MAX_ENV_BYTES = 1_000_000
COMPOSE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")


class ProjectFinder:
    """The project a markdown file speaks about: that of the nearest folder above it (itself
    included) holding a compose file, else its own folder's. A README in ``app/frontend/``
    of a sample whose compose file is in ``app/`` is about project ``app``."""

    def __init__(self, root: Path, library: str) -> None:
        self.root = root
        self.library = library
        self._cache: dict[str, str | None] = {}

    def __call__(self, rel: str) -> str:
        folder = rel.rpartition("/")[0]
        while True:
            found = self._compose_project(folder)
            if found is not None:
                return found
            if not folder:
                return project_of(rel, self.library)
            folder = folder.rpartition("/")[0]

    def _compose_project(self, folder: str) -> str | None:
        if folder not in self._cache:
            base = self.root / folder if folder else self.root
            has = any((base / name).is_file() for name in COMPOSE_NAMES)
            name = folder.rpartition("/")[2] if folder else self.library
            self._cache[folder] = project_name(name) if has else None
        return self._cache[folder]


def config_observations(
    source: str, path: Path, rel: str, text: str, library: str
) -> list[Observation]:
    """Observations of a declared-config file; ``source`` is compose, ssh or yaml."""
    project = project_of(rel, library)
    if source == "compose":
        return compose.collect(text, project, _dotenv(path.parent / ".env"))
    if source == "ssh":
        return sshconfig.collect(path, text)
    if source == "yaml":
        return yamlconf.collect(text, project, path.name.rsplit(".", 1)[0])
    raise ValueError(f"unknown config source {source!r}")


def _dotenv(path: Path) -> dict[str, str]:
    """The compose ``.env`` beside the file: used to interpolate ports, never stored."""
    try:
        if path.is_file() and path.stat().st_size <= MAX_ENV_BYTES:
            return compose.read_env(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        pass
    return {}
