"""Scan -> parse -> chunk -> upsert (text and graph), incremental by (mtime, size) then content
hash; embeddings.

Text is committed first, in batches, so it is searchable at once; vectors follow. Every batch
is one transaction and chunk ids are derived from (entry id, position), so an interrupted run
(Ctrl-C, kill -9) leaves a consistent index that the next run completes, and the result equals
a fresh build.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import stat
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from brainmap.analysis import (
    ANALYZER_VERSION,
    DEFAULT_LANGUAGE,
    detect_language,
    fts_text,
    other_forms,
)
from brainmap.config import Config, LibraryConfig, PathFilter
from brainmap.embedding import (
    EmbedReport,
    ProgressFn,
    crash_point,
    embed_pending,
    embed_text,
    title_line,
)
from brainmap.errors import UserError
from brainmap.facts import records
from brainmap.graph import blob_id, code_graph, entry_graph, file_key
from brainmap.markdown import DecodeError, Entry, breadcrumbs, decode, parse
from brainmap.safefile import TEMP_PREFIX, is_abandoned_temp
from brainmap.store import (
    ChunkRecord,
    CodeFileRecord,
    DatabaseError,
    EntryRecord,
    EntryState,
    Store,
    VectorCache,
    slug_of,
)

if TYPE_CHECKING:
    from brainmap.collectors.files import ProjectFinder

# A file modified this close to the moment it was indexed may change again within the same
# timestamp tick without its (mtime, size) changing, so it is re-hashed on the next run.
RACY_NS = 2_000_000_000
# Files per text transaction. Each commit rewrites the index pages it dirtied (the graph's
# edge indexes have random keys), so larger batches write less: 1,024 files or 1 s indexed
# ~15% more chunks/s than 256 or 0.5 s on the tldr pages, and text still shows within 1 s.
BATCH_FILES = 1024
BATCH_SECONDS = 1.0


@dataclass
class LibraryReport:
    """What one library's text pass did."""

    library: str
    files: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    chunks: int = 0
    code_files: int = 0  # code files read for breadcrumbs (changed ones only)
    seconds: float = 0.0


@dataclass
class ReindexReport:
    libraries: list[LibraryReport] = field(default_factory=list)
    embedding: EmbedReport | None = None
    # filled by the after-change step (brainmap.derive) that follows every reindex
    facts_paired: list[str] = field(default_factory=list)  # libraries whose facts were re-paired
    map: list[str] = field(default_factory=list)  # libraries whose map block was recomputed
    rollups: list[str] = field(default_factory=list)  # diary rollups written (library:path)


@dataclass
class Indexed:
    """What :func:`index_files` indexed: the entry ids, and whether their vectors were made."""

    ids: list[str]
    embedded: bool


# --- globs and scanning ---------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """A file (or, with ``folder`` set, an unreadable folder) seen by :func:`scan`."""

    rel: str
    path: Path
    stat: os.stat_result | None
    problem: str | None = None
    folder: bool = False
    code: bool = False  # a code file, read only for its breadcrumbs


def _printable(rel: str) -> str:
    """A file name that is not valid UTF-8 cannot be stored as is; show it escaped."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def scan(root: Path, paths: PathFilter, code: PathFilter | None = None) -> Iterator[Found]:
    """Yield the library's markdown files, and its code files when ``code`` is given (sorted
    per folder), never following folder symlinks.

    Everything that cannot be indexed is yielded with a problem instead: a symlink leaving the
    library (or dangling), a pipe or device, a name that is not UTF-8, an unreadable folder.
    Code files with a problem are left out silently: they are not knowledge.
    """
    root_real = root.resolve()
    stack = [("", root)]
    while stack:
        rel_dir, folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda d: d.name)
        except OSError as exc:
            if rel_dir:
                yield Found(
                    rel_dir.rstrip("/"), folder, None, f"cannot read folder: {exc.strerror}", True
                )
            continue
        subdirs = []
        for item in items:
            rel = rel_dir + item.name
            try:
                is_dir = item.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if not paths.prunes(rel):
                    subdirs.append((rel + "/", Path(item.path)))
                continue
            if item.name.startswith(TEMP_PREFIX):
                _sweep_temp(Path(item.path))
                continue
            is_code = False
            if not paths.wants(rel):
                if code is None or not code.wants(rel):
                    continue
                is_code = True
            path = Path(item.path)
            printable = _printable(rel)
            if printable != rel:
                if not is_code:
                    yield Found(printable, path, None, "file name is not valid UTF-8")
                continue
            if is_code:
                code_stat = _regular_stat(item)
                if code_stat is not None:
                    yield Found(rel, path, code_stat, code=True)
                continue
            if item.is_symlink():
                try:
                    target = path.resolve(strict=True)
                except (OSError, RuntimeError):
                    yield Found(rel, path, None, "broken or looping symlink")
                    continue
                if not target.is_relative_to(root_real):
                    yield Found(rel, path, None, "symlink pointing outside the library")
                    continue
            try:
                st = path.stat()
            except OSError as exc:
                yield Found(rel, path, None, f"cannot stat: {exc.strerror}")
                continue
            if not stat.S_ISREG(st.st_mode):  # a pipe would block the read forever
                yield Found(rel, path, None, "not a regular file")
                continue
            yield Found(rel, path, st)
        stack.extend(reversed(subdirs))


def _regular_stat(item: os.DirEntry[str]) -> os.stat_result | None:
    """The stat of a regular file that is not a symlink (else None)."""
    try:
        st = item.stat(follow_symlinks=False)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _sweep_temp(path: Path) -> None:
    """Remove a temp file abandoned by an interrupted atomic write (never a live one)."""
    if is_abandoned_temp(path):
        path.unlink(missing_ok=True)


# --- identifiers and texts ------------------------------------------------------------------


def entry_id(library: str, rel: str) -> str:
    """Stable id of an entry: a hash of its library and path."""
    return hashlib.blake2b(f"{library}\0{rel}".encode(), digest_size=8).hexdigest()


def chunk_id(entry: str, ordinal: int) -> int:
    """Stable 63-bit id of a chunk, so vectors and FTS rows keep their ids across rebuilds."""
    digest = hashlib.blake2b(f"{entry}\0{ordinal}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def _iso(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.UTC).isoformat(timespec="seconds")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --- the text pass --------------------------------------------------------------------------


class _Batch:
    """Groups many small writes into one transaction, committed by size or age."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._open: ExitStack | None = None
        self._count = 0
        self._started = 0.0

    def tick(self) -> None:
        """Call before each write: joins the open transaction or starts a new one."""
        if self._open is not None and (
            self._count >= BATCH_FILES or time.monotonic() - self._started > BATCH_SECONDS
        ):
            self.commit()
        if self._open is None:
            self._open = ExitStack()
            self._open.enter_context(self.store.write())
            self._started = time.monotonic()
        self._count += 1

    def expire(self) -> None:
        """Commit an open transaction that has run its time, even if no file is written now
        (the scan of unchanged files must not hold the write lock)."""
        if self._open is not None and time.monotonic() - self._started > BATCH_SECONDS:
            self.commit()

    def commit(self) -> None:
        if self._open is not None:
            stack, self._open, self._count = self._open, None, 0
            stack.close()

    def abort(self, exc: BaseException) -> None:
        if self._open is not None:
            stack, self._open, self._count = self._open, None, 0
            stack.__exit__(type(exc), exc, exc.__traceback__)


def index_library(
    cfg: Config,
    store: Store,
    lib: LibraryConfig,
    *,
    full: bool = False,
    progress: ProgressFn | None = None,
) -> LibraryReport:
    """Bring one library's text index up to date with its folder."""
    started = time.monotonic()
    root = lib.path
    if not root.is_dir():
        raise UserError(
            f"library {lib.name!r}: {root} is not a folder",
            hint=f"restore the folder, or `brainmap library remove {lib.name}`",
        )
    library_id = store.ensure_library(lib.name, str(root), lib.scope, lib.language)
    # rows made by an older text analysis (stems, units) or another language setting are
    # rewritten: the whole library
    analysis = (ANALYZER_VERSION, lib.language)
    full = full or store.library_analysis(library_id) != analysis
    states = store.entry_states(library_id)
    code_states = store.code_states(library_id)
    known_skips = store.skip_states(library_id)
    has_git = store.git_state(library_id) is not None
    report = LibraryReport(lib.name)
    max_bytes = int(cfg.index.max_file_mb * 1024 * 1024)
    seen: set[str] = set()
    skipped: set[str] = set()
    unreadable: list[str] = []  # folders whose entries must be kept, not taken as deleted
    batch = _Batch(store)
    seen_code: set[str] = set()
    sources = lib.fact_sources()
    from brainmap.collectors.files import ProjectFinder  # the collectors load when indexing

    projects = ProjectFinder(root, lib.name)
    env_changed: set[str] = set()  # folders whose .env changed in this run
    try:
        for found in scan(root, lib.paths, lib.code_paths):
            if found.code:
                seen_code.add(found.rel)
                old_code = code_states.get(found.rel)
                assert found.stat is not None
                folder, _, name = found.rel.rpartition("/")
                changed = full or not old_code or not _same_stat(old_code, found.stat)
                if name == ".env":  # scanned before compose.yaml: the folder's files follow
                    if changed:
                        env_changed.add(folder)
                elif (
                    folder in env_changed
                    and "compose" in sources
                    and sources["compose"].wants(found.rel)
                ):
                    changed = True  # interpolated from the .env that changed
                if changed and found.stat.st_size <= max_bytes:
                    batch.tick()
                    try:
                        _index_code(
                            store, lib, library_id, found, old_code, has_git,
                            full or folder in env_changed, report, sources, projects,
                        )  # fmt: skip
                    except DatabaseError:
                        raise  # the database itself failed: stop, keep everything as it was
                    except Exception:  # a code file is not knowledge: it is left out
                        pass
                continue
            report.files += 1
            seen.add(found.rel)
            if report.files % 64 == 0:
                batch.expire()
                if progress and report.files % 512 == 0:
                    progress("scan", report.files, None)
            if found.folder:
                unreadable.append(found.rel + "/")
            old = states.get(found.rel)
            problem, keep_old = found.problem, False
            if problem is None and found.stat is not None:
                st = found.stat
                if not full and old and _same_stat(old, st):
                    report.unchanged += 1
                    continue
                if not full and known_skips.get(found.rel) == (st.st_mtime_ns, st.st_size):
                    report.skipped += 1  # skipped before and unchanged: not read again
                    skipped.add(found.rel)
                    continue
                batch.tick()
                crash_point("text", report.files)
                if st.st_size > max_bytes:
                    problem = f"larger than max_file_mb ({st.st_size / 1e6:.1f} MB)"
                else:
                    try:
                        problem = _index_file(
                            cfg, store, lib, library_id, found, old, full, report, has_git,
                            projects,
                        )  # fmt: skip
                    except DatabaseError:
                        raise  # the database itself failed: stop, keep everything as it was
                    except Exception as exc:  # a bug or an input we did not foresee
                        problem, keep_old = f"cannot index: {type(exc).__name__}: {exc}", True
            if problem is not None:
                batch.tick()
                report.skipped += 1
                skipped.add(found.rel)
                seen_stat = found.stat
                store.record_skip(
                    library_id, found.rel, problem, _now(),
                    seen_stat.st_mtime_ns if seen_stat else None,
                    seen_stat.st_size if seen_stat else None,
                )  # fmt: skip
                if old is not None and not keep_old:  # unreadable now: drop its stale entry
                    store.delete_entries([old.id])
                    report.deleted += 1
        gone = [
            state.id
            for rel, state in states.items()
            if rel not in seen and not rel.startswith(tuple(unreadable))
        ]
        store.delete_entries(gone)
        report.deleted += len(gone)
        store.delete_code_files(
            [
                state.id
                for rel, state in code_states.items()
                if rel not in seen_code and not rel.startswith(tuple(unreadable))
            ]
        )
        store.clear_skips(library_id, skipped)
        if report.added or report.updated or report.deleted or report.skipped or full:
            store.mark_indexed(library_id, _now(), analysis if full else None)
        batch.commit()
    except BaseException as exc:
        batch.abort(exc)
        raise
    report.seconds = time.monotonic() - started
    return report


def _same_stat(old: EntryState, st: os.stat_result) -> bool:
    if old.mtime_ns != st.st_mtime_ns or old.size != st.st_size:
        return False
    return old.mtime_ns < old.indexed_ns - RACY_NS


def _index_file(
    cfg: Config,
    store: Store,
    lib: LibraryConfig,
    library_id: int,
    found: Found,
    old: EntryState | None,
    full: bool,
    report: LibraryReport,
    has_git: bool,
    projects: ProjectFinder,
) -> str | None:
    """Index one changed-looking file; return a problem string when it must be skipped."""
    try:
        data = found.path.read_bytes()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "deleted while indexing"
        return f"cannot read: {exc.strerror}"
    assert found.stat is not None
    st = found.stat
    now_ns = time.time_ns()
    content_hash = hashlib.sha256(data).hexdigest()
    if not full and old and old.content_hash == content_hash:
        store.touch_entry(old.id, st.st_mtime_ns, len(data), now_ns)
        report.unchanged += 1
        return None
    try:
        text, problem = decode(data)
    except DecodeError as exc:
        return str(exc)
    stem = found.path.name.rsplit(".", 1)[0]
    parsed = parse(
        text,
        fallback_title=stem,
        chunk_tokens=cfg.index.chunk_tokens,
        turn_tokens=cfg.index.turn_tokens,
    )
    if problem:
        parsed.warnings.insert(0, problem)
    eid = entry_id(lib.name, found.rel)
    mtime_iso = _iso(st.st_mtime_ns)
    blob = blob_id(data)
    source_rev = _source_rev(store, lib.name, found.rel, blob, mtime_iso, has_git)
    observed_at = parsed.observed_at or _now()
    record = EntryRecord(
        id=eid,
        library_id=library_id,
        path=found.rel,
        title=parsed.title,
        type=parsed.type,
        project=parsed.project,
        tags=parsed.tags,
        aliases=parsed.aliases,
        created=parsed.created,
        last_verified=parsed.last_verified,
        updated=parsed.last_verified or parsed.created or mtime_iso,
        content_hash=content_hash,
        mtime_ns=st.st_mtime_ns,
        size=len(data),
        indexed_ns=now_ns,
        observed_at=observed_at,
        source_rev=source_rev,
        meta=parsed.meta,
        warnings=parsed.warnings,
        slug=slug_of(found.rel),
        blob=blob,
    )
    record.language = language_of(lib, parsed)
    title = title_line(parsed.title, parsed.aliases)
    fts_title = fts_text(title)
    title_forms = other_forms(title, record.language)
    chunks = [
        ChunkRecord(
            id=chunk_id(eid, ch.ord),
            ord=ch.ord,
            heading=ch.heading,
            line_start=ch.line_start,
            line_end=ch.line_end,
            text=ch.text,
            embed_hash=hashlib.sha256(
                embed_text(parsed.title, parsed.aliases, ch.heading, ch.text).encode()
            ).hexdigest(),
            fts_title=fts_title,
            fts_heading=fts_text(ch.heading),
            fts_body=fts_text(ch.text),
            fts_forms=" ".join(
                f
                for f in (title_forms, other_forms(ch.heading + "\n" + ch.text, record.language))
                if f
            ),
        )
        for ch in parsed.chunks
    ]
    graph = entry_graph(lib.name, eid, found.rel, parsed, observed_at, source_rev)
    said = []
    # a diary tells what a session did, not how things are: no narrative claims from it
    if parsed.type != "diary":
        from brainmap.collectors import narrative

        try:
            said = narrative.collect(text, parsed, projects(found.rel))
        except Exception as exc:  # a collector bug must not keep the note out of the info root
            record.warnings.append(f"facts not read: {type(exc).__name__}: {exc}")
    observations = records(said, found.rel, mtime_iso, source_rev)
    store.put_entry(
        record, chunks, rewrite=full, new=old is None, graph=graph, observations=observations
    )
    if old is None:
        report.added += 1
    else:
        report.updated += 1
    report.chunks += len(chunks)
    return None


def language_of(lib: LibraryConfig, parsed: Entry) -> str:
    """The language an entry's words are stemmed in: the library's, or told from its text
    (English when it cannot be told); ``none`` stems nothing."""
    if lib.language != "auto":
        return lib.language
    sample: list[str] = []
    size = 0
    for chunk in parsed.chunks:
        sample.append(chunk.text)
        size += len(chunk.text)
        if size >= 4000:
            break
    return detect_language("\n".join(sample)) or DEFAULT_LANGUAGE


def _source_rev(
    store: Store, library: str, rel: str, blob: str, mtime_iso: str, has_git: bool
) -> str:
    """The imported commit that last wrote exactly this content, else the file's mtime."""
    commit = store.commit_for_blob(file_key(library, rel), blob) if has_git else None
    return commit.removeprefix("commit:") if commit else f"mtime:{mtime_iso}"


def _index_code(
    store: Store,
    lib: LibraryConfig,
    library_id: int,
    found: Found,
    old: EntryState | None,
    has_git: bool,
    full: bool,
    report: LibraryReport,
    fact_sources: dict[str, PathFilter],
    projects: ProjectFinder,
) -> None:
    """Record a code file with the ``Brain:`` breadcrumbs in it and, for a config file (compose,
    ssh, YAML), what it declares (unreadable files are left)."""
    try:
        data = found.path.read_bytes()
    except OSError:
        return
    assert found.stat is not None
    now_ns = time.time_ns()
    content_hash = hashlib.sha256(data).hexdigest()
    if not full and old and old.content_hash == content_hash:
        store.touch_code_file(old.id, found.stat.st_mtime_ns, len(data), now_ns)
        return
    report.code_files += 1
    crumbs: list[tuple[str, int]] = []
    if b"Brain:" in data:
        with suppress(DecodeError):  # a binary file has no comments
            crumbs = breadcrumbs(decode(data)[0])
    blob = blob_id(data)
    mtime_iso = _iso(found.stat.st_mtime_ns)
    source_rev = _source_rev(store, lib.name, found.rel, blob, mtime_iso, has_git)
    observations = []
    for source, paths in fact_sources.items():
        if paths.wants(found.rel):
            from brainmap.collectors.files import config_observations

            # an unreadable or hostile config file gives no facts; it never stops the reindex
            with suppress(Exception):
                text = decode(data)[0]
                project = projects(found.rel)
                said = config_observations(source, found.path, found.rel, text, project)
                observations = records(said, found.rel, mtime_iso, source_rev)
            break
    observed_at = _now()
    record = CodeFileRecord(
        id="code:" + entry_id(lib.name, found.rel), library_id=library_id, path=found.rel,
        content_hash=content_hash, blob=blob, mtime_ns=found.stat.st_mtime_ns, size=len(data),
        indexed_ns=now_ns, observed_at=observed_at, source_rev=source_rev,
    )  # fmt: skip
    graph = code_graph(lib.name, found.rel, crumbs, observed_at, source_rev)
    store.put_code_file(record, graph, new=old is None, observations=observations)


def index_files(
    cfg: Config, store: Store, lib: LibraryConfig, rels: list[str], *, embed: bool = True
) -> Indexed:
    """Index the named files of a library now: text, and vectors unless ``embed`` is off
    (then the next reindex embeds them).

    Used right after brainmap itself wrote them, so there is no scan of the library. It does
    not take the write lock: it only upserts entries by their stable ids (never deletes), so
    a reindex running meanwhile can at worst write the same rows again. Raises
    :class:`UserError` when a file cannot be indexed.
    """
    from brainmap.embed import EmbedderError

    library_id = store.ensure_library(lib.name, str(lib.path), lib.scope)
    states = store.entry_states(library_id)
    has_git = store.git_state(library_id) is not None
    from brainmap.collectors.files import ProjectFinder

    report = LibraryReport(lib.name)
    projects = ProjectFinder(lib.path, lib.name)
    ids = []
    for rel in rels:
        path = lib.path / rel
        found = Found(rel, path, path.stat())
        problem = _index_file(
            cfg, store, lib, library_id, found, states.get(rel), False, report, has_git,
            projects,
        )  # fmt: skip
        if problem is not None:
            raise UserError(f"{rel} was written but cannot be indexed: {problem}")
        ids.append(entry_id(lib.name, rel))
    if not embed:
        return Indexed(ids, False)
    cache = VectorCache(cfg.cache_path)
    try:
        embed_pending(
            store, cache, cfg.embedder, None, entry_ids=ids, batch_size=cfg.index.embed_batch
        )
    except EmbedderError:
        return Indexed(ids, False)  # searchable now; `reindex` embeds it when the model is back
    finally:
        cache.close()
    return Indexed(ids, True)


@dataclass
class LibraryDiff:
    """How a library's folder differs from its index, judged by stat alone (code files, read
    for breadcrumbs, are listed apart)."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    code_new: list[str] = field(default_factory=list)
    code_changed: list[str] = field(default_factory=list)
    code_gone: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(x) for x in (self.new, self.changed, self.gone, self.code_new,
                                    self.code_changed, self.code_gone))  # fmt: skip


def diff_library(cfg: Config, store: Store, lib: LibraryConfig) -> LibraryDiff:
    """Compare a library's files with the index without reading any file."""
    ids = store.library_ids([lib.name])
    states = store.entry_states(ids[lib.name]) if ids else {}
    code_states = store.code_states(ids[lib.name]) if ids else {}
    skipped = {path for name, path, _ in store.skipped() if name == lib.name}
    max_bytes = cfg.index.max_file_mb * 1024 * 1024
    diff = LibraryDiff()
    seen: set[str] = set()
    for found in scan(lib.path, lib.paths, lib.code_paths):
        seen.add(found.rel)
        known, new, changed = (
            (code_states, diff.code_new, diff.code_changed)
            if found.code
            else (states, diff.new, diff.changed)
        )
        old = known.get(found.rel)
        if old is None:
            too_big = found.code and found.stat is not None and found.stat.st_size > max_bytes
            if found.rel not in skipped and not too_big:
                new.append(found.rel)
        elif found.stat is None or (
            old.mtime_ns != found.stat.st_mtime_ns or old.size != found.stat.st_size
        ):
            changed.append(found.rel)
    diff.gone = sorted(rel for rel in states if rel not in seen)
    diff.code_gone = sorted(rel for rel in code_states if rel not in seen)
    return diff


# --- whole runs -----------------------------------------------------------------------------


def reindex(
    cfg: Config,
    store: Store,
    names: list[str] | None = None,
    *,
    full: bool = False,
    embed: bool = True,
    progress: ProgressFn | None = None,
) -> ReindexReport:
    """Index the named libraries (all by default): text first, then vectors. The caller
    holds the write lock and runs the after-change step (``brainmap.derive``)."""
    from brainmap.embed import EmbedderError, model_id_of

    libs = cfg.select(names)
    report = ReindexReport()
    for lib in libs:
        report.libraries.append(index_library(cfg, store, lib, full=full, progress=progress))
    store.checkpoint()
    if embed and libs:
        ids = list(store.library_ids(lib.name for lib in libs).values())
        cache = VectorCache(cfg.cache_path)
        try:
            report.embedding = embed_pending(
                store, cache, cfg.embedder, ids, batch_size=cfg.index.embed_batch,
                progress=progress,
            )  # fmt: skip
        except EmbedderError as exc:
            model = model_id_of(cfg.embedder)
            report.embedding = EmbedReport(
                model, pending=store.pending_count(model, ids), error=exc.message
            )
        finally:
            cache.close()
        store.checkpoint()
    return report
