"""THE operations table: every operation once, with typed input and output.

Each op is a function ``(brain, input) -> output`` registered with a name, a pydantic input
model and an output type (a dataclass that pydantic can validate and serialise). The CLI, and
later HTTP and MCP, only parse input, call an op and format its output.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from brainmap import config as config_mod
from brainmap import evaluate
from brainmap.config import (
    LibraryConfig,
    check_library_name,
    ensure_home,
    resolve_home,
    scope_label,
)
from brainmap.errors import UserError
from brainmap.indexer import ProgressFn, ReindexReport, diff_library, reindex_lock
from brainmap.indexer import reindex as run_reindex
from brainmap.search import Mode, Searcher, SearchResult
from brainmap.store import SCHEMA_VERSION, DatabaseBusyError, Store, VectorCache


class Brain:
    """An open home: its config, its store and a warm searcher, created on first use."""

    def __init__(self, home: str | Path | None = None) -> None:
        self.home = resolve_home(home)
        self.cfg, self.created = ensure_home(self.home)
        self._store: Store | None = None
        self._searcher: Searcher | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.cfg.db_path)
        return self._store

    @property
    def searcher(self) -> Searcher:
        if self._searcher is None:
            self._searcher = Searcher(self.cfg, self.store)
        return self._searcher

    def save_config(self) -> None:
        config_mod.save(self.cfg)

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Op:
    """One operation: the unit every interface exposes."""

    name: str
    func: Callable[..., Any]
    input: type[BaseModel]
    output: Any
    description: str
    writes: bool


OPS: dict[str, Op] = {}


def op(
    name: str, input: type[BaseModel], output: Any, *, writes: bool = False
) -> Callable[..., Any]:
    """Register a function in the operations table; its docstring is its description."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        OPS[name] = Op(name, func, input, output, inspect.getdoc(func) or name, writes)
        return func

    return register


_adapters: dict[Any, TypeAdapter[Any]] = {}


def to_jsonable(value: Any) -> Any:
    """Serialise an op's output (dataclasses, lists of them) to JSON-compatible data."""
    kind = type(value)
    if kind not in _adapters:
        _adapters[kind] = TypeAdapter(kind)
    return _adapters[kind].dump_python(value, mode="json")


class _Input(BaseModel):
    # defer_build: a CLI run validates one model; building all schemas at import costs 40 ms
    model_config = ConfigDict(extra="forbid", defer_build=True)


# --- libraries ------------------------------------------------------------------------------


@dataclass
class LibraryInfo:
    name: str
    path: str
    scope: str
    include: list[str]
    exclude: list[str]
    entries: int = 0
    chunks: int = 0
    indexed_at: str | None = None
    exists: bool = True


class LibraryAddInput(_Input):
    name: str = Field(description="Short name: letters, digits, '.', '_', '-'.")
    path: str = Field(description="Folder of markdown files.")
    scope: Literal["project", "global"] = "project"
    include: list[str] | None = Field(None, description="Globs of files to index.")
    exclude: list[str] | None = Field(None, description="Globs of files to leave out.")


class NoInput(_Input):
    pass


class LibraryNameInput(_Input):
    name: str


def _library_infos(brain: Brain, libs: list[LibraryConfig]) -> list[LibraryInfo]:
    counts = brain.store.library_counts()
    indexed_at = {row.name: row.indexed_at for row in brain.store.libraries()}
    out = []
    for lib in libs:
        entries, chunks = counts.get(lib.name, (0, 0))
        info = LibraryInfo(lib.name, str(lib.path), lib.scope, lib.include, lib.exclude)
        info.entries, info.chunks = entries, chunks
        info.indexed_at, info.exists = indexed_at.get(lib.name), lib.path.is_dir()
        out.append(info)
    return out


@op("library_add", LibraryAddInput, LibraryInfo, writes=True)
def library_add(brain: Brain, inp: LibraryAddInput) -> LibraryInfo:
    """Register a folder of markdown as a library (its files are never modified)."""
    check_library_name(inp.name)
    if any(lib.name == inp.name for lib in brain.cfg.libraries):
        raise UserError(
            f"library {inp.name!r} already exists", hint="brainmap library list", status=409
        )
    path = Path(inp.path).expanduser().absolute()
    if not path.is_dir():
        raise UserError(f"{inp.path} is not a folder")
    lib = LibraryConfig(inp.name, path, inp.scope)
    if inp.include:
        lib.include = list(inp.include)
    if inp.exclude is not None:
        lib.exclude = list(inp.exclude)
    lib.paths  # noqa: B018 - an invalid glob is refused now, not at the next reindex
    brain.cfg.libraries.append(lib)
    brain.save_config()
    brain.store.ensure_library(lib.name, str(path), lib.scope)
    return _library_infos(brain, [lib])[0]


@op("library_list", NoInput, list[LibraryInfo])
def library_list(brain: Brain, inp: NoInput) -> list[LibraryInfo]:
    """List the libraries with their entry and chunk counts."""
    return _library_infos(brain, brain.cfg.libraries)


@dataclass
class LibraryRemoved:
    name: str
    entries_removed: int


@op("library_remove", LibraryNameInput, LibraryRemoved, writes=True)
def library_remove(brain: Brain, inp: LibraryNameInput) -> LibraryRemoved:
    """Forget a library: its index rows go, its files stay untouched."""
    lib = brain.cfg.library(inp.name)
    with reindex_lock(brain.home):  # never under the feet of a running reindex
        brain.cfg.libraries.remove(lib)
        brain.save_config()
        return LibraryRemoved(lib.name, brain.store.delete_library(lib.name))


# --- indexing -------------------------------------------------------------------------------


class ReindexInput(_Input):
    libraries: list[str] | None = Field(None, description="Library names; all when empty.")
    full: bool = Field(False, description="Re-read and re-parse every file.")
    embed: bool = Field(True, description="Compute missing embeddings after the text pass.")


@op("reindex", ReindexInput, ReindexReport, writes=True)
def reindex(brain: Brain, inp: ReindexInput, progress: ProgressFn | None = None) -> ReindexReport:
    """Bring the index up to date with the library folders: changed files only, then vectors."""
    if not brain.cfg.libraries:
        raise UserError("no libraries yet", hint="brainmap library add NAME PATH")
    return run_reindex(
        brain.cfg, brain.store, inp.libraries, full=inp.full, embed=inp.embed, progress=progress
    )


# --- search and get -------------------------------------------------------------------------


class SearchInput(_Input):
    query: str = Field(description="Any text: keywords or a natural-language question.")
    library: list[str] | None = Field(None, description="Only these libraries.")
    type: list[str] | None = Field(None, description="Only these entry types (gotcha, note, ...).")
    tag: list[str] | None = Field(None, description="Only entries with all of these tags.")
    since: str | None = Field(None, description="Only entries dated on/after YYYY-MM-DD or 30d.")
    limit: int = Field(10, ge=1, le=100)
    mode: Mode = "hybrid"


@op("search", SearchInput, SearchResult)
def search(brain: Brain, inp: SearchInput) -> SearchResult:
    """Search the brain (hybrid BM25 + semantic). Returns chunks with path, line range,
    score parts and full text, best first."""
    return brain.searcher.search(
        inp.query,
        libraries=inp.library,
        types=inp.type,
        tags=inp.tag,
        since=inp.since,
        limit=inp.limit,
        mode=inp.mode,
    )


@dataclass
class ChunkInfo:
    ord: int
    heading: str
    line_start: int
    line_end: int
    text: str


@dataclass
class EntryInfo:
    id: str
    library: str
    scope: str
    path: str
    file: str
    title: str
    type: str
    tags: list[str]
    aliases: list[str]
    project: str | None
    created: str | None
    last_verified: str | None
    updated: str
    observed_at: str
    source_rev: str | None
    content_hash: str
    meta: dict[str, Any]
    warnings: list[str]
    chunks: list[ChunkInfo]


class GetInput(_Input):
    ref: str = Field(description="Entry id, 'library:path', or a path inside a library.")


@op("get", GetInput, EntryInfo)
def get(brain: Brain, inp: GetInput) -> EntryInfo:
    """Fetch one entry with its metadata and all its chunks."""
    found = brain.store.find_entry(inp.ref) or _find_by_file(brain, inp.ref)
    if found is None:
        raise UserError(
            f"no entry {inp.ref!r}", hint="use an id or path from `brainmap search`", status=404
        )
    row = brain.store.entry(found[0])
    assert row is not None
    chunks = [
        ChunkInfo(c.ord, c.heading, c.line_start, c.line_end, c.text)
        for c in brain.store.entry_chunks(found[0])
    ]
    return EntryInfo(
        id=row["id"], library=row["library"],
        scope=scope_label(row["library"], row["scope"]),
        path=row["path"], file=str(Path(row["library_path"]) / row["path"]),
        title=row["title"], type=row["type"], tags=row["tags"], aliases=row["aliases"],
        project=row["project"], created=row["created"], last_verified=row["last_verified"],
        updated=row["updated"], observed_at=row["observed_at"], source_rev=row["source_rev"],
        content_hash=row["content_hash"], meta=row["meta"], warnings=row["warnings"],
        chunks=chunks,
    )  # fmt: skip


def _find_by_file(brain: Brain, ref: str) -> tuple[str, str] | None:
    """Resolve a filesystem path (absolute or relative to the cwd) to an entry."""
    path = Path(ref).expanduser().absolute()
    for lib in brain.cfg.libraries:
        root = lib.path.absolute()
        if path.is_relative_to(root):
            return brain.store.find_entry(f"{lib.name}:{path.relative_to(root).as_posix()}")
    return None


# --- health ---------------------------------------------------------------------------------


@dataclass
class Stats:
    home: str
    libraries: list[LibraryInfo]
    entries: int
    chunks: int
    vectors: int
    pending_embeddings: int
    skipped_files: int
    model: str
    vector_search: str
    db_bytes: int
    cache_vectors: int
    cache_bytes: int
    schema_version: int


def _size(path: Path) -> int:
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def _vector_search_status(brain: Brain) -> str:
    """``available`` or why not: embeds a probe query (about 20 ms with the bundled model)."""
    searcher = brain.searcher
    if searcher.embed_query("brainmap health check") is None:
        return f"unavailable: {searcher.embedder_error}"
    return "available"


@op("stats", NoInput, Stats)
def stats(brain: Brain, inp: NoInput) -> Stats:
    """Counts of libraries, entries, chunks and vectors; pending embeddings; sizes; model."""
    store = brain.store
    counts = store.counts()
    model = brain.searcher.model
    cache = VectorCache(brain.cfg.cache_path)
    try:
        cached = cache.count()
    finally:
        cache.close()
    return Stats(
        home=str(brain.home),
        libraries=library_list(brain, NoInput()),
        entries=counts["entries"],
        chunks=counts["chunks"],
        vectors=store.vector_models().get(model, 0),
        pending_embeddings=store.pending_count(model),
        skipped_files=counts["skipped"],
        model=model,
        vector_search=_vector_search_status(brain),
        db_bytes=_size(brain.cfg.db_path),
        cache_vectors=cached,
        cache_bytes=_size(brain.cfg.cache_path),
        schema_version=store.schema_version(),
    )


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    items: list[str] = field(default_factory=list)


@dataclass
class DoctorReport:
    ok: bool
    checks: list[Check]


@op("doctor", NoInput, DoctorReport)
def doctor(brain: Brain, inp: NoInput) -> DoctorReport:
    """Check the model, schema, integrity, vectors and files on disk; give the fix for each."""
    store = brain.store
    checks: list[Check] = []
    status = _vector_search_status(brain)
    checks.append(
        Check("embedder", status == "available", f"{brain.cfg.embedder}: {status}",
              None if status == "available" else
              "fix `embedder` in config.toml (BM25 search works meanwhile)")
    )  # fmt: skip
    version = store.schema_version()
    checks.append(
        Check("schema", version == SCHEMA_VERSION, f"schema v{version} (expected v{SCHEMA_VERSION})",
              None if version == SCHEMA_VERSION else "delete brain.db and run `brainmap reindex`")
    )  # fmt: skip
    try:
        problems = store.integrity()
    except DatabaseBusyError:
        checks.append(Check("integrity", False, "not checked: another process kept the write "
                            "lock for 10 s", "run `brainmap doctor` again"))  # fmt: skip
    else:
        checks.append(
            Check("integrity", not problems, "database and full-text index are consistent"
                  if not problems else f"{len(problems)} problem(s)",
                  None if not problems else "delete brain.db and run `brainmap reindex`", problems)
        )  # fmt: skip
    orphans = {k: v for k, v in store.orphans().items() if v}
    known = {lib.name for lib in brain.cfg.libraries}
    stray = [row.name for row in store.libraries() if row.name not in known]
    other_models = {m: n for m, n in store.vector_models().items() if m != brain.searcher.model}
    clean = not orphans and not stray and not other_models
    items = [f"orphan {k}: {v}" for k, v in orphans.items()]
    items += [f"library {name!r} is indexed but not configured" for name in stray]
    items += [f"{n} vectors of old model {m}" for m, n in other_models.items()]
    checks.append(
        Check("orphans", clean, "no orphan rows" if clean else f"{len(items)} kind(s) of leftovers",
              None if clean else "brainmap gc", items)
    )  # fmt: skip
    pending = store.pending_count(brain.searcher.model)
    checks.append(
        Check("vectors", pending == 0,
              "every chunk has a vector" if not pending else f"{pending} chunk(s) without a vector",
              None if not pending else "brainmap reindex")
    )  # fmt: skip
    for lib in brain.cfg.libraries:
        if not lib.path.is_dir():
            checks.append(
                Check(f"files:{lib.name}", False, f"{lib.path} is missing",
                      f"restore it or `brainmap library remove {lib.name}`")
            )  # fmt: skip
            continue
        diff = diff_library(store, lib)
        stale = len(diff.new) + len(diff.changed) + len(diff.gone)
        detail = (
            "index matches the files"
            if not stale
            else f"{len(diff.new)} new, {len(diff.changed)} changed, {len(diff.gone)} deleted"
        )
        items = [f"new: {p}" for p in diff.new[:20]] + [f"changed: {p}" for p in diff.changed[:20]]
        items += [f"deleted: {p}" for p in diff.gone[:20]]
        checks.append(
            Check(f"files:{lib.name}", not stale, detail,
                  None if not stale else f"brainmap reindex {lib.name}", items)
        )  # fmt: skip
    skipped = [f"{lib}:{path}: {reason}" for lib, path, reason in store.skipped()]
    skipped += [f"{lib}:{path}: {w}" for lib, path, ws in store.entry_warnings() for w in ws]
    checks.append(
        Check("skipped", True, f"{len(skipped)} file(s) skipped or read with warnings",
              "fix the files, or exclude them with --exclude" if skipped else None, skipped)
    )  # fmt: skip
    return DoctorReport(all(c.ok for c in checks), checks)


@dataclass
class GcReport:
    libraries_removed: list[str]
    orphan_rows: int
    old_model_vectors: int
    cache_entries_removed: int
    cache_kept_because: str | None
    bytes_before: int
    bytes_after: int


@op("gc", NoInput, GcReport, writes=True)
def gc(brain: Brain, inp: NoInput) -> GcReport:
    """Remove orphans, unconfigured libraries, old-model vectors and unused cache; vacuum.

    Cached vectors that no chunk uses are dropped only when the index is complete and
    current: right after brain.db was deleted they are exactly what the rebuild needs.
    """
    store, cfg = brain.store, brain.cfg
    with reindex_lock(brain.home):
        before = _size(cfg.db_path) + _size(cfg.cache_path)
        known = {lib.name for lib in cfg.libraries}
        stray = [row.name for row in store.libraries() if row.name not in known]
        for name in stray:
            store.delete_library(name)
        orphans = store.remove_orphans()
        model = brain.searcher.model
        old_vectors = store.delete_vectors_except(model)
        kept_because = _index_incomplete(brain)
        removed = 0
        cache = VectorCache(cfg.cache_path)
        try:
            if kept_because is None:
                removed = cache.prune(model, store.embed_hashes())
            cache.vacuum()
        finally:
            cache.close()
        store.vacuum()
        after = _size(cfg.db_path) + _size(cfg.cache_path)
    return GcReport(stray, orphans, old_vectors, removed, kept_because, before, after)


def _index_incomplete(brain: Brain) -> str | None:
    """Why the index does not yet reflect every library (None when it does)."""
    indexed = {row.name for row in brain.store.libraries()}
    for lib in brain.cfg.libraries:
        if lib.name not in indexed or not lib.path.is_dir():
            return f"library {lib.name} is not indexed; run `brainmap reindex` first"
        diff = diff_library(brain.store, lib)
        if diff.new or diff.changed or diff.gone:
            return f"library {lib.name} has unindexed changes; run `brainmap reindex` first"
    if brain.store.pending_count(brain.searcher.model):
        return "some chunks wait for vectors; run `brainmap reindex` first"
    return None


class EvalInput(_Input):
    golden: str = Field(description="Path of a golden YAML file.")
    modes: list[Mode] | None = Field(None, description="Modes to compare; all by default.")
    compare: str | None = Field(None, description="An earlier `eval --json` report.")
    tolerance: float = Field(0.02, ge=0, description="Allowed fall of any metric.")


@op("eval", EvalInput, evaluate.EvalReport)
def eval_(brain: Brain, inp: EvalInput) -> evaluate.EvalReport:
    """Measure retrieval quality on a golden file; list regressions against an older report."""
    report = evaluate.run(brain.searcher, Path(inp.golden), inp.modes)
    if inp.compare:
        report.regressions = evaluate.compare(report, Path(inp.compare), inp.tolerance)
    return report


@dataclass
class InitReport:
    home: str
    created: bool
    config: str
    global_library: str


@op("init", NoInput, InitReport, writes=True)
def init(brain: Brain, inp: NoInput) -> InitReport:
    """Create the home (config.toml, brain.db, the global library ``brain/``) if missing."""
    brain.store  # creates and migrates brain.db  # noqa: B018
    for lib in brain.cfg.libraries:
        brain.store.ensure_library(lib.name, str(lib.path), lib.scope)
    brain_dir = next(
        (str(lib.path) for lib in brain.cfg.libraries if lib.name == config_mod.GLOBAL_LIBRARY),
        "",
    )
    return InitReport(str(brain.home), brain.created, str(brain.cfg.config_path), brain_dir)
