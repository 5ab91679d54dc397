"""Ops that report on and repair the brain: stats, doctor, gc, eval, init."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import (
    Field,
)

from brainmap import config as config_mod
from brainmap import derive, evaluate, libmap
from brainmap.embedding import cache_keys
from brainmap.gitlog import prune_unreachable
from brainmap.indexer import diff_library
from brainmap.keys import name_of
from brainmap.ops.core import Brain, _Input, op
from brainmap.ops.library import LibraryInfo, NoInput, library_list
from brainmap.search import Mode
from brainmap.store import DatabaseBusyError, VectorCache
from brainmap.usage import UsageSummary, summary

# --- health ---------------------------------------------------------------------------------


@dataclass
class Stats:
    home: str
    index: str  # where the index lives: brain.db's path, or the PostgreSQL URL (no password)
    libraries: list[LibraryInfo]
    entries: int
    chunks: int
    vectors: int
    pending_embeddings: int
    skipped_files: int
    graph_nodes: int
    graph_edges: int
    code_files: int
    commits: int
    facts: dict[str, int]  # assertions by confidence
    observations: int
    model: str
    vector_search: str
    db_bytes: int
    cache_vectors: int
    cache_bytes: int
    schema_version: int
    reasoner: ReasonerStatus
    usage: UsageSummary  # usage.db: since when, the most and least used entries


@dataclass
class ReasonerStatus:
    """The optional LLM: whether one is configured, whether it answers, today's tokens."""

    configured: bool
    url: str = ""
    model: str = ""
    answers: bool | None = None  # None: not asked (none configured)
    models: list[str] = field(default_factory=list)  # what the endpoint serves
    latency_ms: float | None = None
    error: str | None = None
    tokens_today: int = 0
    calls_today: int = 0
    budget: int = 0
    budget_left: int = 0


def reasoner_status(brain: Brain) -> ReasonerStatus:
    """Ask the configured reasoner's ``/models`` (a few seconds at most when it is down)."""
    from brainmap.reasoner import Reasoner, ReasonerUnavailable

    try:
        reasoner = Reasoner.of(brain.cfg)
    except ReasonerUnavailable:
        return ReasonerStatus(configured=False)
    with reasoner:
        got = reasoner.status()
    return ReasonerStatus(
        configured=True, url=got["url"], model=got["model"], answers=got["answers"],
        models=got.get("models", []), latency_ms=got.get("latency_ms"), error=got.get("error"),
        tokens_today=got["tokens"], calls_today=got["calls"], budget=got["budget"],
        budget_left=got["left"],
    )  # fmt: skip


def _size(path: Path) -> int:
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def _vector_search_status(brain: Brain) -> str:
    """``available`` or why not: embeds a probe query (about 20 ms with the bundled model)."""
    searcher = brain.searcher
    if searcher.embedder.query("brainmap health check") is None:
        return f"unavailable: {searcher.embedder.error}"
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
        index=store.db.location,
        libraries=library_list(brain, NoInput()).libraries,
        entries=counts["entries"],
        chunks=counts["chunks"],
        vectors=store.vectors.models().get(model, 0),
        pending_embeddings=store.vectors.pending_count(model),
        skipped_files=counts["skipped"],
        graph_nodes=counts["nodes"],
        graph_edges=counts["edges"],
        code_files=counts["code_files"],
        commits=counts["commits"],
        facts=store.facts.counts(),
        observations=sum(store.facts.observation_counts().values()),
        model=model,
        vector_search=_vector_search_status(brain),
        db_bytes=store.db.size_bytes(),
        cache_vectors=cached,
        cache_bytes=_size(brain.cfg.cache_path),
        schema_version=store.db.schema_version(),
        reasoner=reasoner_status(brain),
        usage=summary(brain.cfg, store),
    )


MAX_ITEMS = 50  # per check: a doctor report is read by people


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
    against the index, the library map, skipped files. Every failed check comes with its
    fix."""
    store = brain.store
    checks: list[Check] = []
    status = _vector_search_status(brain)
    checks.append(
        Check("embedder", status == "available", f"{brain.cfg.embedder}: {status}",
              None if status == "available" else
              "fix `embedder` in config.toml (BM25 search works meanwhile)")
    )  # fmt: skip
    checks.append(_reasoner_check(reasoner_status(brain)))
    version, latest = store.db.schema_version(), store.db.latest_schema
    checks.append(
        Check("schema", version == latest, f"schema v{version} (expected v{latest})",
              None if version == latest else store.db.rebuild_hint)
    )  # fmt: skip
    if brain.cfg.store_url:
        checks.append(_server_check(brain.cfg.store_url))
        checks.append(_vector_index_check(brain))
    from brainmap.analysis import ANALYZER_VERSION

    behind = store.entries.behind_analyzer(ANALYZER_VERSION)
    checks.append(
        Check("analysis", not behind,
              f"{', '.join(behind)} indexed by an older text analysis" if behind
              else f"full-text rows made by text analysis v{ANALYZER_VERSION}",
              "run `brainmap reindex` (it rebuilds them)" if behind else None)
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
                  None if not problems else store.db.rebuild_hint, problems)
        )  # fmt: skip
    orphans = {k: v for k, v in store.orphans().items() if v}
    known = {lib.name for lib in brain.cfg.libraries}
    stray = (  # on a shared PostgreSQL index, other machines' libraries are not stray
        []
        if brain.cfg.store_url
        else [row.name for row in store.entries.libraries() if row.name not in known]
    )
    other_models = {m: n for m, n in store.vectors.models().items() if m != brain.searcher.model}
    clean = not orphans and not stray and not other_models
    items = [f"orphan {k}: {v}" for k, v in orphans.items()]
    items += [f"library {name!r} is indexed but not configured" for name in stray]
    items += [f"{n} vectors of old model {m}" for m, n in other_models.items()]
    checks.append(
        Check("orphans", clean, "no orphan rows" if clean else f"{len(items)} kind(s) of leftovers",
              None if clean else "brainmap gc", items)
    )  # fmt: skip
    pending = store.vectors.pending_count(brain.searcher.model)
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
        diff = diff_library(brain.cfg, store, lib)
        stale = diff.count
        detail = (
            "index matches the files"
            if not stale
            else f"{len(diff.new)} new, {len(diff.changed)} changed, {len(diff.gone)} deleted"
        )
        if diff.code_new or diff.code_changed or diff.code_gone:
            detail += (
                f"; code files: {len(diff.code_new)} new, {len(diff.code_changed)} changed, "
                f"{len(diff.code_gone)} deleted"
            )
        items = []
        for label, rels in (("new", diff.new), ("changed", diff.changed), ("deleted", diff.gone),
                            ("new code", diff.code_new), ("changed code", diff.code_changed),
                            ("deleted code", diff.code_gone)):  # fmt: skip
            items += [f"{label}: {rel}" for rel in rels[:20]]
        checks.append(
            Check(f"files:{lib.name}", not stale, detail,
                  None if not stale else f"brainmap reindex {lib.name}", items)
        )  # fmt: skip
    brain.settle_map()  # what this process wrote is not behind, only waiting
    behind = libmap.stale(brain.cfg, store)
    checks.append(
        Check("map", not behind,
              "every library's map block is current" if not behind
              else f"{len(behind)} map block(s) behind the index",
              None if not behind else "brainmap map recompute", behind)
    )  # fmt: skip
    dangling = store.graph.dangling_breadcrumbs()
    shown = [
        f"{e.library}:{e.source_uri}:{e.line}: Brain: {e.props.get('ref', name_of(e.object))}"
        for e in dangling[:MAX_ITEMS]
    ]
    if len(dangling) > MAX_ITEMS:
        shown.append(f"... and {len(dangling) - MAX_ITEMS} more")
    checks.append(
        Check("breadcrumbs", not dangling,
              "every Brain: comment names an entry" if not dangling
              else f"{len(dangling)} Brain: comment(s) name no entry",
              None if not dangling else "fix the slug in the comment, or save the entry it means",
              shown)
    )  # fmt: skip
    skipped = [f"{lib}:{path}: {reason}" for lib, path, reason in store.entries.skipped()]
    warnings = store.entries.entry_warnings()
    skipped += [f"{lib}:{path}: {w}" for lib, path, ws in warnings for w in ws]
    checks.append(
        Check("skipped", True, f"{len(skipped)} file(s) skipped or read with warnings",
              "fix the files, or exclude them with --exclude" if skipped else None, skipped)
    )  # fmt: skip
    checks.append(_sync_check(brain))
    checks.append(_team_check(brain))
    return DoctorReport(all(c.ok for c in checks), checks)


def _team_check(brain: Brain) -> Check:
    """The team of a served brain: how many users and tokens, and grants that name no
    library (a typo, or a library since removed)."""
    from brainmap.team import EVERY_LIBRARY, Team

    with Team(brain.cfg) as team:
        if not team.active():
            return Check("team", True, "no users: `brainmap serve` answers without tokens "
                         "(on 127.0.0.1 only)")  # fmt: skip
        users = team.users()
        known = {lib.name for lib in brain.cfg.libraries}
        known |= {row.name for row in brain.store.entries.libraries()}
        unknown = [f"{u.name}: {role} on {library!r}, which is no library"
                   for u in users for library, role in sorted(u.roles.items())
                   if library != EVERY_LIBRARY and library not in known]  # fmt: skip
        idle = [f"{u.name}: no usable token" for u in users if not u.tokens]
        tokens = sum(u.tokens for u in users)
        return Check("team", not unknown,
                     f"{len(users)} user(s), {tokens} usable token(s) in {team.location}: "
                     "`brainmap serve` asks every request for one",
                     "fix the grant: brainmap user revoke NAME LIBRARY" if unknown else None,
                     unknown + idle)  # fmt: skip


def _sync_check(brain: Brain) -> Check:
    """The notes a `brainmap sync` stopped on (recorded in the home), each with its fix."""
    from brainmap.sync import conflicts

    found = conflicts(brain.home)
    items = [f"sync conflict in {c.library}: {c.path} — fix: {c.fix}" for c in found]
    return Check("sync", not found,
                 "no sync conflict" if not found else f"{len(found)} note(s) in conflict",
                 "edit each note, delete the remote's copy (in the home's conflicts/ folder), "
                 "run `brainmap sync`" if found else None, items[:MAX_ITEMS])  # fmt: skip


def _reasoner_check(status: ReasonerStatus) -> Check:
    if not status.configured:
        return Check("reasoner", True, "none configured: tags from similar entries, no query "
                     "expansion, diary and answers without prose (see README.md#reasoner)")  # fmt: skip
    spent = f"{status.tokens_today:,} of {status.budget:,} tokens used today"
    if not status.answers:
        return Check("reasoner", False, f"{status.url} does not answer: {status.error}",
                     "start the model server, fix [reasoner] url, or leave url empty "
                     "(every command works without it)")  # fmt: skip
    served = "" if not status.models or status.model in status.models else (
        f"; it serves {', '.join(status.models[:5])}, not {status.model!r}"
    )  # fmt: skip
    return Check("reasoner", True, f"{status.model or '(no model named)'} at {status.url} answers "
                 f"in {status.latency_ms:g} ms; {spent}{served}",
                 "raise [reasoner] daily_token_budget" if not status.budget_left else None)  # fmt: skip


def _server_check(url: str) -> Check:
    """The PostgreSQL server of a shared index: its version, pgvector, the migrations."""
    from brainmap.store.postgres import server_report

    report = server_report(url)
    vector = report.vector_version or f"{report.vector_available} (not installed)"
    detail = (
        f"PostgreSQL {report.server_version} at {report.url}, pgvector {vector}, "
        f"migrations {', '.join(map(str, report.migrations)) or 'none'}"
    )
    fix = "; ".join(report.problems) if report.problems else None
    return Check("server", not report.problems, detail, fix, report.problems)


def _vector_index_check(brain: Brain) -> Check:
    """How a shared index's vectors are searched: by its HNSW index, or exactly in each
    process's memory while they are fewer than ``[store] hnsw_from``."""
    from brainmap.embedders import model_id_of

    model, at_least = model_id_of(brain.cfg.embedder), brain.cfg.store.hnsw_from
    count = brain.store.vectors.count(model)
    if brain.store.vectors.ann_dim(model) is not None:
        return Check("vector index", True, f"HNSW index over {count:,} vectors")
    if count < at_least:
        return Check(
            "vector index", True,
            f"{count:,} vectors searched exactly in memory (an HNSW index from {at_least:,})",
        )  # fmt: skip
    return Check(
        "vector index", False,
        f"{count:,} vectors and no HNSW index ([store] hnsw_from = {at_least:,})",
        "run `brainmap reindex`: it builds the index (a build cut short is redone)",
    )  # fmt: skip


@dataclass
class GcReport:
    libraries_removed: list[str]
    orphan_rows: int
    old_model_vectors: int
    unreachable_commits: int  # imported commits HEAD no longer reaches
    cache_entries_removed: int
    cache_kept_because: str | None
    bytes_before: int
    bytes_after: int


@op("gc", NoInput, GcReport, writes=True)
def gc(brain: Brain, inp: NoInput) -> GcReport:
    """Remove orphans, unconfigured libraries, old-model vectors, imported commits that HEAD
    no longer reaches and unused cache; vacuum.

    Cached vectors that no chunk uses are dropped only when the index is complete and
    current: right after brain.db was deleted they are exactly what the rebuild needs.
    """
    store, cfg = brain.store, brain.cfg
    known = {lib.name for lib in cfg.libraries}
    # a shared PostgreSQL index holds the libraries of every machine of the team: one not
    # configured here is another machine's, not a leftover
    shared = bool(cfg.store_url)
    stray = [] if shared else [r.name for r in store.entries.libraries() if r.name not in known]
    # pruned history and removed libraries change maps: the step follows, without the model
    with derive.changing(cfg, store, None, embed=False, removed=stray):
        before = store.db.size_bytes() + _size(cfg.cache_path)
        for name in stray:
            store.entries.delete_library(name)
        orphans = store.remove_orphans()
        model = brain.searcher.model
        old_vectors = store.vectors.delete_except(model)
        unreachable = sum(prune_unreachable(store, lib) for lib in cfg.libraries)
        kept_because = _index_incomplete(brain)
        removed = 0
        cache = VectorCache(cfg.cache_path)
        try:
            if kept_because is None:
                used = cache_keys(store, model) | {
                    libmap.sentence_hash(b) for b in libmap.blocks(store)
                }  # the map blocks' sentences too
                removed = cache.prune(model, used)
            cache.vacuum()
        finally:
            cache.close()
        store.vacuum()
        after = store.db.size_bytes() + _size(cfg.cache_path)
    return GcReport(stray, orphans, old_vectors, unreachable, removed, kept_because, before, after)


def _index_incomplete(brain: Brain) -> str | None:
    """Why the index does not yet reflect every library (None when it does)."""
    indexed = {row.name for row in brain.store.entries.libraries()}
    for lib in brain.cfg.libraries:
        if lib.name not in indexed or not lib.path.is_dir():
            return f"library {lib.name} is not indexed; run `brainmap reindex` first"
        if diff_library(brain.cfg, brain.store, lib).count:
            return f"library {lib.name} has unindexed changes; run `brainmap reindex` first"
    if brain.store.vectors.pending_count(brain.searcher.model):
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
    # the earlier report first: a wrong name fails at once, not after the whole run
    old = evaluate.read_report(Path(inp.compare)) if inp.compare else None
    report = evaluate.run(brain.searcher, Path(inp.golden), inp.modes)
    if old is not None:
        report.regressions = evaluate.compare(report, old, inp.tolerance)
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
        brain.store.entries.ensure_library(lib.name, str(lib.path), lib.scope)
    brain_dir = next(
        (str(lib.path) for lib in brain.cfg.libraries if lib.name == config_mod.GLOBAL_LIBRARY),
        "",
    )
    return InitReport(str(brain.home), brain.created, str(brain.cfg.config_path), brain_dir)
