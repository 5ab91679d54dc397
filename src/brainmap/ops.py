"""THE operations table: every operation once, with typed input and output.

Each op is a function ``(brain, input) -> output`` registered with a name, a pydantic input
model and an output type (a dataclass that pydantic can validate and serialise). The CLI, and
later HTTP and MCP, only parse input, call an op and format its output.
"""

from __future__ import annotations

import datetime as dt
import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

from brainmap import config as config_mod
from brainmap import evaluate
from brainmap.config import (
    LibraryConfig,
    check_library_name,
    ensure_home,
    resolve_home,
    scope_label,
)
from brainmap.embed import model_id_of
from brainmap.errors import UserError
from brainmap.indexer import ProgressFn, ReindexReport, diff_library, reindex_lock
from brainmap.indexer import reindex as run_reindex
from brainmap.notes import INGEST_HINT, Notes, SaveResult, ingest_title
from brainmap.search import Mode, Searcher, SearchResult, VectorIndex, parse_since
from brainmap.store import SCHEMA_VERSION, DatabaseBusyError, Store, VectorCache


class Brain:
    """An open home: its config, and per thread a store and a warm searcher.

    The store (one SQLite connection) and the searcher belong to the thread that asked for
    them, so that a server's worker threads read in parallel; the vector matrix and the
    embedding model are shared by all threads.
    """

    def __init__(self, home: str | Path | None = None) -> None:
        self.home = resolve_home(home)
        self.cfg, self.created = ensure_home(self.home)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stores: list[Store] = []  # every connection opened, for close()
        self._idle: list[Store] = []  # connections of threads that ended
        self._vectors: VectorIndex | None = None

    @property
    def store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            with self._lock:
                store = self._idle.pop() if self._idle else None
            if store is None:
                store = Store(self.cfg.db_path)
                with self._lock:
                    self._stores.append(store)
            self._local.store = store
            # server worker threads come and go: a dead thread's connection serves the next
            # thread. (Closing it would not free its file: SQLite keeps the descriptor of a
            # connection closed while others hold locks on the file, until they all close.)
            weakref.finalize(threading.current_thread(), self._idle.append, store)
        return store

    @property
    def searcher(self) -> Searcher:
        searcher: Searcher | None = getattr(self._local, "searcher", None)
        if searcher is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(model_id_of(self.cfg.embedder))
            searcher = Searcher(self.cfg, self.store, self._vectors)
            self._local.searcher = searcher
        return searcher

    @property
    def notes(self) -> Notes:
        return Notes(self.cfg, self.searcher)

    def save_config(self) -> None:
        config_mod.save(self.cfg)

    def close(self) -> None:
        """Close every thread's connection (call when no operation is running)."""
        with self._lock:
            stores, self._stores, self._idle = self._stores, [], []
        for store in stores:
            store.close()
        self._local = threading.local()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Op:
    """One operation: the unit every interface exposes.

    Ops with ``methods`` are served over HTTP at ``path`` and as the MCP tool ``tool`` (the
    path's first segment); the others (administration) belong to the CLI only.
    """

    name: str
    func: Callable[..., Any]
    input: type[BaseModel]
    output: Any
    description: str
    writes: bool
    methods: tuple[str, ...]
    path: str

    @property
    def tool(self) -> str:
        return self.path.strip("/").split("/")[0]


OPS: dict[str, Op] = {}


def op(
    name: str,
    input: type[BaseModel],
    output: Any,
    *,
    writes: bool = False,
    methods: tuple[str, ...] = (),
    path: str | None = None,
) -> Callable[..., Any]:
    """Register a function in the operations table; its docstring is its description."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        description = inspect.getdoc(func) or name
        OPS[name] = Op(name, func, input, output, description, writes, methods, path or f"/{name}")
        return func

    return register


def served() -> list[Op]:
    """The ops that HTTP and MCP expose, in table order."""
    return [o for o in OPS.values() if o.methods]


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

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        """JSON can carry half a UTF-16 pair; no file, index or model can store it."""
        for value in data.values() if isinstance(data, dict) else ():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise ValueError("text contains a lone UTF-16 surrogate") from None
        return data


def describe_errors(errors: Sequence[Any]) -> str:
    """One line for pydantic (or FastAPI) validation errors: the first problem of each field."""
    seen: dict[str, str] = {}
    for err in errors:
        where = ".".join(str(p) for p in err["loc"] if p != "body") or "input"
        seen.setdefault(where.split(".")[0], f"{where}: {err['msg']}")
    return "; ".join(seen.values()) or "invalid input"


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


@dataclass
class LibraryList:
    libraries: list[LibraryInfo]


@op("library_list", NoInput, LibraryList, methods=("GET",), path="/libraries")
def library_list(brain: Brain, inp: NoInput) -> LibraryList:
    """List the libraries (the knowledge sources: project docs, the global brain, imported
    repos) with their scope, folder, entry and chunk counts."""
    return LibraryList(_library_infos(brain, brain.cfg.libraries))


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


@op("reindex", ReindexInput, ReindexReport, writes=True, methods=("POST",))
def reindex(brain: Brain, inp: ReindexInput, progress: ProgressFn | None = None) -> ReindexReport:
    """Bring the index up to date with the library folders (changed files only: text first,
    then vectors). Run it after files were edited outside brainmap; save and ingest index
    what they write by themselves."""
    if not brain.cfg.libraries:
        raise UserError("no libraries yet", hint="brainmap library add NAME PATH")
    return run_reindex(
        brain.cfg, brain.store, inp.libraries, full=inp.full, embed=inp.embed, progress=progress
    )


# --- search and get -------------------------------------------------------------------------


_Age = Annotated[str, Field(pattern=r"^[0-9]{1,9} ?[dwmyDWMY]$")]


class SearchInput(_Input):
    query: str = Field(description="Any text: keywords or a natural-language question.")
    library: list[str] | None = Field(None, description="Only these libraries.")
    type: list[str] | None = Field(None, description="Only these entry types (gotcha, note, ...).")
    tag: list[str] | None = Field(None, description="Only entries with all of these tags.")
    since: dt.date | dt.datetime | _Age | None = Field(
        None, description="Only entries dated on/after this date, or this recent (30d, 6m, 1y)."
    )
    limit: int = Field(10, ge=1, le=100)
    mode: Mode = "hybrid"

    @field_validator("since", mode="before")
    @classmethod
    def _readable_since(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                parse_since(value)
            except UserError:
                raise ValueError("not a date: use YYYY-MM-DD or an age such as 30d, 6m") from None
        return value


@op("search", SearchInput, SearchResult, methods=("GET", "POST"))
def search(brain: Brain, inp: SearchInput) -> SearchResult:
    """Search the knowledge brain: the markdown notes of every library (gotchas, decisions,
    patterns, guides, diaries), with hybrid keyword + semantic ranking, in any language.
    Search first, before answering questions about these projects or repeating work.
    Returns the best chunks, each with title, library, path and line range, the full chunk
    text and the parts of its score. Filter with library, type, tag or since."""
    return brain.searcher.search(
        inp.query,
        libraries=inp.library,
        types=inp.type,
        tags=inp.tag,
        since=inp.since
        if inp.since is None or isinstance(inp.since, str)
        else inp.since.isoformat(),
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


@op("get", GetInput, EntryInfo, methods=("GET",), path="/get/{ref:path}")
def get(brain: Brain, inp: GetInput) -> EntryInfo:
    """Fetch one whole entry, by the id of a search hit or as 'library:path': its metadata
    (type, tags, dates, provenance) and all its chunks with line ranges. Use it after search
    when a hit looks relevant and you need the rest of the entry."""
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
    path = Path(ref).absolute()  # no ~ expansion: refs also come from the network
    for lib in brain.cfg.libraries:
        root = lib.path.absolute()
        if path.is_relative_to(root):
            return brain.store.find_entry(f"{lib.name}:{path.relative_to(root).as_posix()}")
    return None


# --- writing knowledge ----------------------------------------------------------------------

_TAG = Annotated[str, Field(min_length=1, max_length=64)]
MAX_BODY = 1_000_000


class SaveInput(_Input):
    title: str = Field(min_length=1, max_length=200, description="Short, specific title.")
    body: str = Field("", max_length=MAX_BODY, description="Markdown text of the entry.")
    type: str = Field(
        "note",
        pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$",
        description="gotcha, pattern, bug, decision, guide, diary, note, ...",
    )
    tags: list[_TAG] | None = Field(None, max_length=20, description="Suggested when omitted.")
    library: str | None = Field(None, description="Target library; default from config.")
    project: str | None = Field(None, max_length=100)
    folder: str | None = Field(None, max_length=200, description="Sub-folder in the library.")
    force: bool = Field(False, description="Write even when a near-duplicate exists.")
    merge_into: str | None = Field(
        None,
        description="Append title and body as a dated section of this entry id (the other "
        "fields are then ignored).",
    )


@op("save", SaveInput, SaveResult, writes=True, methods=("POST",))
def save(brain: Brain, inp: SaveInput) -> SaveResult:
    """Save a knowledge entry you want future sessions to find (a gotcha, decision, pattern,
    how-to): a markdown file with frontmatter in a library, indexed at once. When a very
    similar entry already exists nothing is written and the candidates come back: then
    pass merge_into=<candidate id> to append to it, or force=true to save anyway. Tags are
    suggested from similar entries when you give none."""
    return brain.notes.save(
        title=inp.title, body=inp.body, type=inp.type, tags=inp.tags, library=inp.library,
        project=inp.project, folder=inp.folder, force=inp.force, merge_into=inp.merge_into,
    )  # fmt: skip


class IngestInput(_Input):
    text: str | None = Field(None, max_length=MAX_BODY, description="The raw text to keep.")
    uri: str | None = Field(None, max_length=2000, description="Where the text came from.")
    observed_at: dt.datetime | None = Field(None, description="When it was seen (ISO 8601).")
    title: str | None = Field(None, max_length=200, description="Default: its first line.")
    tags: list[_TAG] | None = Field(None, max_length=20)
    library: str | None = Field(None, description="Target library; default from config.")
    force: bool = Field(False, description="Write even when a near-duplicate exists.")


@op("ingest", IngestInput, SaveResult, writes=True, methods=("POST",))
def ingest(brain: Brain, inp: IngestInput) -> SaveResult:
    """Keep a raw piece of text (a web page excerpt, command output, a message) with its
    source uri and observation time as a note in the inbox/ folder of a library, indexed at
    once. Call it without text to get a short usage hint."""
    if not inp.text or not inp.text.strip():
        library = inp.library or brain.cfg.save.library
        return SaveResult("hint", library, "", message=INGEST_HINT)
    observed = inp.observed_at or dt.datetime.now(dt.UTC).replace(microsecond=0)
    extra: dict[str, Any] = {"observed_at": observed}
    if inp.uri:
        extra["source"] = inp.uri
    return brain.notes.save(
        title=inp.title or ingest_title(inp.text, inp.uri), body=inp.text, type="note",
        tags=inp.tags, library=inp.library, folder="inbox", force=inp.force, extra=extra,
        same_title_is_duplicate=False,  # the title is only the text's first line
    )  # fmt: skip


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


@op("stats", NoInput, Stats, methods=("GET",))
def stats(brain: Brain, inp: NoInput) -> Stats:
    """What the brain holds: libraries with entry and chunk counts, vectors and pending
    embeddings, sizes, the embedding model and whether vector search is available."""
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
        libraries=library_list(brain, NoInput()).libraries,
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


@op("doctor", NoInput, DoctorReport, methods=("GET",))
def doctor(brain: Brain, inp: NoInput) -> DoctorReport:
    """Health check: embedding model, schema, database integrity, vectors, files on disk
    against the index, skipped files. Every failed check comes with its fix."""
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
