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
import pickle
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brainmap.analysis import (
    ANALYZER_VERSION,
    DEFAULT_LANGUAGE,
    detect_language,
    fts_text,
    other_forms,
)
from brainmap.collectors import PART_OF
from brainmap.collectors.compose import BASE_NAMES
from brainmap.config import MARKDOWN_SUFFIXES, Config, LibraryConfig, PathFilter
from brainmap.embedding import (
    EmbedReport,
    embed_hash,
    embed_pending,
    title_line,
)
from brainmap.errors import LibraryHeldElsewhere, UserError
from brainmap.facts.pairing import records
from brainmap.graph import blob_id, code_graph, entry_graph, file_key
from brainmap.markdown import DecodeError, Entry, breadcrumbs, decode, parse
from brainmap.progress import ProgressFn
from brainmap.safefile import (
    TEMP_PREFIX,
    NotRegularError,
    is_abandoned_temp,
    open_beneath,
    open_folder_at,
    read_beneath,
    read_regular_at,
)
from brainmap.store import (
    ChunkRecord,
    CodeFileRecord,
    DatabaseError,
    EntryRecord,
    EntryState,
    Graph,
    ObservationRecord,
    Store,
    VectorCache,
    slug_of,
)

if TYPE_CHECKING:
    from brainmap.collectors import Observation
    from brainmap.collectors.files import ProjectFinder

# A file modified this close to the moment it was indexed may change again within the same
# timestamp tick without its (mtime, size) changing, so it is re-hashed on the next run.
RACY_NS = 2_000_000_000
# Files per text transaction. Each commit rewrites the index pages it dirtied (the graph's
# edge indexes have random keys), so larger batches write less: 1,024 files or 1 s indexed
# ~15% more chunks/s than 256 or 0.5 s on the tldr pages, and text still shows within 1 s.
BATCH_FILES = 1024
BATCH_SECONDS = 1.0
# After this many files written, the full-text index is merged into one segment: each batch
# left a segment of its own, and queries read every segment (one merge costs about 1% of a
# 40k-file build and makes BM25 queries about 15% faster)
COMPACT_AFTER = 2000
# How a file's warning begins when a collector could not read it (doctor lists them; collect
# reports its libraries' ones)
FACTS_NOT_READ = "facts not read"


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
    missing: list[str] = field(default_factory=list)  # libraries whose folder is gone: not read
    problems: list[str] = field(default_factory=list)  # what went wrong, and the fix
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


class _Listing:
    """A folder that :func:`scan` opened (``fd``, -1 once closed), and its subfolders it has
    yet to descend into, the next one last."""

    __slots__ = ("fd", "rel", "subdirs")

    def __init__(self, rel: str, fd: int) -> None:
        self.rel, self.fd = rel, fd
        self.subdirs: list[str] = []

    def reopen(self, root: Path) -> int:
        if self.fd < 0:
            self.fd = open_beneath(root, self.rel)
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


@dataclass(frozen=True)
class Found:
    """A file (or, with ``folder`` set, an unreadable folder) seen by :func:`scan`."""

    rel: str
    path: Path
    stat: os.stat_result | None
    problem: str | None = None
    folder: bool = False
    code: bool = False  # a code file, read only for its breadcrumbs
    # where :func:`read_found` reads it: in its folder while the scan holds that open, else
    # from the root; a symlink's target by its path in the library
    listing: _Listing | None = field(default=None, compare=False, repr=False)
    target: str | None = None


def _printable(rel: str) -> str:
    """A file name that is not valid UTF-8 cannot be stored as is; show it escaped."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# Folders the scan holds open at once, at most: the chain from the root down to the folder it
# lists, less the upper ones, reopened from the root when the walk comes back to them (a
# deep tree must not use up the process's file descriptors).
MAX_OPEN_FOLDERS = 32


def scan(root: Path, paths: PathFilter, code: PathFilter | None = None) -> Iterator[Found]:
    """Yield the library's markdown files, and its code files when ``code`` is given (sorted
    per folder, its ``.env`` and compose base file first), never following folder symlinks.

    Everything that cannot be indexed is yielded with a problem instead: a symlink leaving the
    library (or dangling), a pipe or device, a name that is not UTF-8, an unreadable folder.
    Code files with a problem are left out silently: they are not knowledge.

    Each folder is opened by name relative to its opened parent, refusing a symlink, and its
    files are read from it (:func:`read_found`): a folder swapped for a symlink to elsewhere
    while the scan runs cannot lead it outside the library.
    """
    root_real = root.resolve()
    prefix = os.path.join(root, "")
    try:
        listing: _Listing | None = _Listing("", open_beneath(root, ""))
    except OSError:
        return
    chain: list[_Listing] = []  # the open folders from the root down
    try:
        while True:
            if listing is not None:
                chain.append(listing)
                yield from _list_folder(root, root_real, prefix, listing, paths, code)
                if len(chain) > MAX_OPEN_FOLDERS:
                    chain[-MAX_OPEN_FOLDERS - 1].close()  # those above it are closed already
            while chain and not chain[-1].subdirs:
                chain.pop().close()
            if not chain:
                return
            parent = chain[-1]
            name = parent.subdirs.pop()
            rel = parent.rel + name
            try:
                listing = _Listing(rel + "/", open_folder_at(parent.reopen(root), name))
            except OSError as exc:  # unreadable, or replaced by a symlink since it was listed
                listing = None
                yield Found(
                    rel, Path(prefix + rel), None, f"cannot read folder: {exc.strerror}", True
                )
    finally:
        for opened in chain:
            opened.close()


def _list_folder(
    root: Path,
    root_real: Path,
    prefix: str,
    listing: _Listing,
    paths: PathFilter,
    code: PathFilter | None,
) -> Iterator[Found]:
    """The files of one opened folder for :func:`scan`; sets the subfolders to descend into."""
    rel_dir = listing.rel
    try:
        with os.scandir(listing.fd) as it:
            # what names the folder's compose project first: the files after it speak of it
            items = sorted(it, key=lambda d: (not _names_projects(d.name), d.name))
    except OSError as exc:
        if rel_dir:
            rel = rel_dir.rstrip("/")
            yield Found(rel, Path(prefix + rel), None, f"cannot read folder: {exc.strerror}", True)
        return
    subdirs = []
    for item in items:
        rel = rel_dir + item.name
        try:
            is_dir = item.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if not paths.prunes(rel):
                subdirs.append(item.name)
            continue
        if item.name.startswith(TEMP_PREFIX):
            _sweep_temp(Path(prefix + rel), listing.fd, item.name)
            continue
        wanted = paths.wants(rel)
        # a file the code globs take stays code though an include glob matches it too
        # ('**/*.py', '**/*'): read for its breadcrumbs and facts, not chunked as markdown
        is_code = (
            code is not None
            and not (wanted and item.name.lower().endswith(MARKDOWN_SUFFIXES))
            and code.wants(rel)
        )
        if not wanted and not is_code:
            continue
        path = Path(prefix + rel)
        printable = _printable(rel)
        if printable != rel:
            if not is_code:
                yield Found(printable, path, None, "file name is not valid UTF-8")
            continue
        if is_code:
            code_stat = _regular_stat(item)
            if code_stat is not None:
                yield Found(rel, path, code_stat, code=True, listing=listing)
            continue
        target = None
        if item.is_symlink():
            try:
                resolved = path.resolve(strict=True)
            except (OSError, RuntimeError):
                yield Found(rel, path, None, "broken or looping symlink")
                continue
            if not resolved.is_relative_to(root_real):
                yield Found(rel, path, None, "symlink pointing outside the library")
                continue
            target = resolved.relative_to(root_real).as_posix()
        try:
            st = item.stat(follow_symlinks=False) if target is None else _stat_in(root, target)
        except OSError as exc:
            yield Found(rel, path, None, f"cannot stat: {exc.strerror}")
            continue
        if not stat.S_ISREG(st.st_mode):  # a pipe would block the read forever
            yield Found(rel, path, None, "not a regular file")
            continue
        yield Found(rel, path, st, listing=listing, target=target)
    listing.subdirs = subdirs[::-1]


def _stat_in(root: Path, rel: str) -> os.stat_result:
    """The stat of ``rel`` in the library, reached without following a symlink (a symlink's
    target, resolved by path, may have been swapped since)."""
    folder, _, name = rel.rpartition("/")
    fd = open_beneath(root, folder)
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def read_found(root: Path, found: Found, limit: int) -> bytes:
    """At most ``limit`` bytes of a file found by :func:`scan` in the library at ``root``,
    read without following a symlink below ``root``: in the folder the scan opened while it
    holds it, else reached from ``root`` anew (raises OSError, :class:`NotRegularError`)."""
    listing = found.listing
    if found.target is None and listing is not None and listing.fd >= 0:
        return read_regular_at(listing.fd, found.rel.rpartition("/")[2], limit)
    return read_beneath(root, found.target or found.rel, limit)


def _regular_stat(item: os.DirEntry[str]) -> os.stat_result | None:
    """The stat of a regular file that is not a symlink (else None)."""
    try:
        st = item.stat(follow_symlinks=False)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _sweep_temp(path: Path, dir_fd: int, name: str) -> None:
    """Remove a temp file abandoned by an interrupted atomic write (never a live one), in the
    folder the scan opened (not by path, which could lead elsewhere by now)."""
    if is_abandoned_temp(path):
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


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
            self._open.enter_context(self.store.db.write())
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
    library_id = store.entries.ensure_library(lib.name, str(root), lib.scope, lib.language)
    # rows made by an older text analysis (stems, units) or another language setting are
    # rewritten: the whole library
    analysis = (ANALYZER_VERSION, lib.language)
    full = full or store.entries.library_analysis(library_id) != analysis
    states = store.entries.entry_states(library_id)
    code_states = store.entries.code_states(library_id)
    known_skips = store.entries.skip_states(library_id)
    # code files too
    warned = {path for name, path, _ in store.entries.skipped() if name == lib.name}
    has_git = store.graph.git_state(library_id) is not None
    report = LibraryReport(lib.name)
    max_bytes = int(cfg.index.max_file_mb * 1024 * 1024)
    seen: set[str] = set()
    skipped: set[str] = set()
    unreadable: list[str] = []  # folders whose entries must be kept, not taken as deleted
    batch = _Batch(store)
    seen_code: set[str] = set()
    sources = lib.fact_sources()
    from brainmap.collectors import CONFIG_COLLECTORS  # the collectors load when indexing
    from brainmap.collectors.files import ProjectFinder, reads_changed

    projects = ProjectFinder(root, lib.name)
    # config files read by older collectors are read again, every one (not the markdown)
    recollect = full or store.entries.library_collectors(library_id) != CONFIG_COLLECTORS
    # compose files read with a file that changed since (one their extends names, an env file
    # of their include): it need not be one the scan reads
    read_with = {} if full else store.facts.compose_reads(library_id)
    reread = {rel for rel, reads in read_with.items() if reads_changed(root, reads)}
    env_changed: set[str] = set()  # folders whose .env changed in this run
    # folders whose compose base file or .env changed in this run (or went): the compose files
    # in and beneath them are read anew, as what the base file includes may have changed
    bases_changed: set[str] = set()
    # folders whose compose project is named otherwise than when indexed (COMPOSE_PROJECT_NAME
    # in a .env, a compose file's name:, a compose file new or gone): every file beneath speaks
    # about that project, and is read anew
    renamed: set[str] = set()
    named_before: dict[str, str] | None = None  # folder -> its compose project, as indexed

    def check_name(folder: str) -> None:
        nonlocal named_before
        if full or folder in renamed:
            return
        if named_before is None:
            named_before = _compose_projects(store.facts.observations(library_id))
        if named_before.get(folder) != projects.compose_project(folder):
            renamed.add(folder)

    def config_changed(folder: str, name: str) -> None:
        """A ``.env`` or compose base file of ``folder`` changed, came or went."""
        if name == ".env":
            env_changed.add(folder)
        bases_changed.add(folder)  # the includes are interpolated from the .env too
        check_name(folder)

    for rel in code_states:  # a .env or compose file gone: its folder's project may be too
        folder, _, name = rel.rpartition("/")
        if _names_projects(name) and not (root / rel).exists():
            config_changed(folder, name)
    reading = _Reading.of(cfg, lib, library_id, full)
    readers = _Readers(reading, projects, cfg.index.read_workers)

    def skip(found: Found, old: EntryState | None, problem: str, keep_old: bool) -> None:
        batch.tick()
        report.skipped += 1
        skipped.add(found.rel)
        seen_stat = found.stat
        store.entries.record_skip(
            library_id, found.rel, problem, _now(),
            seen_stat.st_mtime_ns if seen_stat else None,
            seen_stat.st_size if seen_stat else None,
        )  # fmt: skip
        if old is not None and not keep_old:  # unreadable now: drop its stale entry
            store.entries.delete([old.id])
            report.deleted += 1

    def store_read(read: _Read, old: EntryState | None) -> None:
        batch.tick()
        problem = _store_read(store, reading, read, old, report, has_git)
        if problem is not None:
            skip(read.found, old, problem, read.keep_old)

    try:
        for found in scan(root, lib.paths, lib.code_paths):
            if found.code:
                seen_code.add(found.rel)
                old_code = code_states.get(found.rel)
                assert found.stat is not None
                folder, _, name = found.rel.rpartition("/")
                changed = full or not old_code or not _same_stat(old_code, found.stat)
                if changed and _names_projects(name):  # scanned before the folder's others
                    config_changed(folder, name)
                anew = (
                    recollect
                    or folder in env_changed
                    or _beneath(found.rel, renamed)
                    or found.rel in reread
                )
                if anew and any(source.wants(found.rel) for source in sources.values()):
                    # older collectors read it, it is interpolated from the .env that changed,
                    # renamed, or a file it extends changed
                    changed = True
                elif _beneath(found.rel, bases_changed) and (
                    "compose" in sources and sources["compose"].wants(found.rel)
                ):
                    anew = changed = True  # what the base file includes may have changed
                if changed and found.stat.st_size <= max_bytes:
                    batch.tick()
                    try:
                        read, problem = _index_code(
                            store, lib, library_id, found, old_code, has_git,
                            full or anew, report, sources, projects, max_bytes,
                        )  # fmt: skip
                    except DatabaseError:
                        raise  # the database itself failed: stop, keep everything as it was
                    except Exception as exc:  # a code file is not knowledge: it is left out
                        read, problem = False, f"cannot be read: {exc}"
                    if problem is not None:
                        if not read and old_code is not None:
                            # unreadable now: what it said goes, and it is read again next
                            # time (by the collectors of then), as a file new to the index
                            store.entries.delete_code_files([old_code.id])
                        # no stat: a skip with one would keep the file from being read as
                        # markdown, should the globs make it an entry later
                        store.entries.record_skip(library_id, found.rel, problem, _now())
                    if problem is not None or (not read and found.rel in warned):
                        skipped.add(found.rel)
                elif found.rel in warned:  # not read again: what was wrong with it still is
                    skipped.add(found.rel)
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
                forced = old is not None and _beneath(found.rel, renamed)
                if not full and old and _same_stat(old, st) and not forced:
                    report.unchanged += 1
                    continue
                if not full and known_skips.get(found.rel) == (st.st_mtime_ns, st.st_size):
                    report.skipped += 1  # skipped before and unchanged: not read again
                    skipped.add(found.rel)
                    continue
                if st.st_size > max_bytes:
                    problem = f"larger than max_file_mb ({st.st_size / 1e6:.1f} MB)"
                else:
                    # a file of a renamed project is read anew however alike its content
                    readers.read(found, replace(old, content_hash="") if forced and old else old)
                    for ready, was in readers.done():
                        store_read(ready, was)
                    continue
            if problem is not None:
                skip(found, old, problem, keep_old)
        for ready, was in readers.done(wait=True):
            store_read(ready, was)
        gone = [
            state.id
            for rel, state in states.items()
            if rel not in seen and not rel.startswith(tuple(unreadable))
        ]
        store.entries.delete(gone)
        report.deleted += len(gone)
        store.entries.delete_code_files(
            [
                state.id
                for rel, state in code_states.items()
                if rel not in seen_code and not rel.startswith(tuple(unreadable))
            ]
        )
        store.entries.clear_skips(library_id, skipped)
        if report.added or report.updated or report.deleted or report.skipped or full:
            store.entries.mark_indexed(library_id, _now(), analysis if full else None)
        if recollect:
            store.entries.mark_collected(library_id, CONFIG_COLLECTORS)
        batch.commit()
    except BaseException as exc:
        batch.abort(exc)
        raise
    finally:
        readers.close()
    report.seconds = time.monotonic() - started
    return report


def _names_projects(name: str) -> bool:
    """Whether a file of that name may name its folder's compose project: its ``.env``
    (``COMPOSE_PROJECT_NAME``) or a compose base file (``name:``)."""
    return name == ".env" or name in BASE_NAMES


def _compose_projects(observations: list[ObservationRecord]) -> dict[str, str]:
    """The project each folder's compose files named when they were indexed (not counting
    an included file's, which is its includer's)."""
    return {
        o.path.rpartition("/")[0]: o.object.removeprefix("project:")
        for o in observations
        if o.method == "compose" and o.predicate == PART_OF and not o.props.get("included")
    }


def _beneath(rel: str, folders: set[str]) -> bool:
    """Whether the file ``rel`` is in one of ``folders`` or below it."""
    return bool(folders) and any(not f or rel.startswith(f + "/") for f in folders)


# Files read in this process before a worker process starts reading beside it: starting one
# costs about 0.3 s, which only a large (re)index earns back.
PARALLEL_AFTER = 256
READ_BATCH = 64  # files per task sent to the worker
MAX_IN_FLIGHT = 16  # tasks sent and not yet stored (bounds the memory held)


class _Readers:
    """Reads and parses files while the caller stores what was read: in a worker process
    once a run has many files (parsing and SQLite's writes then use two cores), else here.
    Results come back in the order the files were given."""

    def __init__(self, reading: _Reading, projects: ProjectFinder, workers: int) -> None:
        self.reading = reading
        self.projects = projects
        self.parallel = workers > 0 and (os.cpu_count() or 1) > 1
        self.count = 0
        self.worker: _ReadWorker | None = None
        self.batch: list[tuple[Found, EntryState | None]] = []
        self.sent: deque[list[tuple[Found, EntryState | None]]] = deque()
        self.here: list[tuple[_Read, EntryState | None]] = []

    def read(self, found: Found, old: EntryState | None) -> None:
        self.count += 1
        if self.worker is None and self.parallel and self.count > PARALLEL_AFTER:
            self.worker = _ReadWorker.start()
            self.parallel = self.worker is not None
        if self.worker is None:
            self.here.append((self._read_here(found, old), old))
            return
        self.batch.append((found, old))
        if len(self.batch) >= READ_BATCH:
            self._send()

    def _read_here(self, found: Found, old: EntryState | None) -> _Read:
        return _read_file(self.reading, found, old.content_hash if old else None, self.projects)

    def _send(self) -> None:
        assert self.worker is not None
        items, self.batch = self.batch, []
        # the scan's open folders are this process's: the worker reads from the root anew
        sent = [(replace(f, listing=None), o.content_hash if o else None) for f, o in items]
        self.worker.send(self.reading, sent)
        self.sent.append(items)

    def done(self, wait: bool = False) -> Iterator[tuple[_Read, EntryState | None]]:
        """What has been read, in order; with ``wait``, everything given so far."""
        here, self.here = self.here, []
        yield from here
        if wait and self.batch:
            self._send()
        while self.sent and self.worker is not None:
            block = wait or len(self.sent) >= MAX_IN_FLIGHT
            reads = self.worker.receive(block)
            if reads is _NOT_YET:
                return
            items = self.sent.popleft()
            if reads is None:  # the worker died (out of memory?): read here from now on
                self.worker.close()
                self.worker, self.parallel = None, False
                items += [item for rest in self.sent for item in rest] + self.batch
                self.sent.clear()
                self.batch = []
                reads = [self._read_here(found, old) for found, old in items]
            yield from zip(reads, [old for _, old in items], strict=True)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


_NOT_YET: Any = object()


class _ReadWorker:
    """``python -m brainmap.readworker``: batches of files in on its stdin, what was read out
    on its stdout (pickled), in order. A thread reads its answers, so neither side can block
    the other on a full pipe; it exits when its stdin closes (also if this process dies)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        import queue

        self.proc = proc
        self.answers: queue.SimpleQueue[list[_Read] | None] = queue.SimpleQueue()
        self.requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._read_answers, daemon=True),
            threading.Thread(target=self._write_requests, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    @classmethod
    def start(cls) -> _ReadWorker | None:
        from brainmap.childprocess import python_module

        command, env = python_module("brainmap.readworker")
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError:
            return None  # cannot start one: read here
        return cls(proc)

    def send(self, reading: _Reading, items: list[tuple[Found, str | None]]) -> None:
        self.requests.put(pickle.dumps((reading, items), pickle.HIGHEST_PROTOCOL))

    def receive(self, block: bool) -> Any:
        """The next batch read; None when the worker died, ``_NOT_YET`` when not ``block``
        and nothing is ready."""
        import queue

        try:
            return self.answers.get(block=block)
        except queue.Empty:
            return _NOT_YET

    def _write_requests(self) -> None:
        assert self.proc.stdin is not None
        try:
            while (request := self.requests.get()) is not None:
                self.proc.stdin.write(request)
                self.proc.stdin.flush()
            self.proc.stdin.close()
        except OSError:
            pass  # the worker went away: its reader says so

    def _read_answers(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                self.answers.put(pickle.load(self.proc.stdout))
        except Exception:  # EOF, or a worker that died mid-answer
            self.answers.put(None)

    def close(self) -> None:
        self.requests.put(None)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve_reads() -> None:
    """The read worker's loop (``python -m brainmap.readworker``)."""
    from brainmap.collectors.files import ProjectFinder

    finders: dict[tuple[str, str], ProjectFinder] = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            reading, items = pickle.load(stdin)
        except EOFError:
            return
        lib = reading.library
        projects = finders.get((str(lib.path), lib.name))
        if projects is None:
            projects = finders[(str(lib.path), lib.name)] = ProjectFinder(lib.path, lib.name)
        reads = [_read_file(reading, found, old_hash, projects) for found, old_hash in items]
        pickle.dump(reads, stdout, pickle.HIGHEST_PROTOCOL)
        stdout.flush()


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
    reading = _Reading.of(cfg, lib, library_id, full)
    read = _read_file(reading, found, old.content_hash if old else None, projects)
    if read.keep_old:  # an unforeseen failure: the caller keeps what was indexed before
        raise _ReadFailed(read.problem or "")
    return _store_read(store, reading, read, old, report, has_git)


class _ReadFailed(Exception):
    """Reading a file failed in a way nobody foresaw (a bug, a hostile input)."""


@dataclass(frozen=True)
class _Reading:
    """What reading a library's files needs (sent with each batch to the read worker)."""

    library: LibraryConfig
    library_id: int
    chunk_tokens: int
    turn_tokens: int
    max_bytes: int
    full: bool

    @classmethod
    def of(cls, cfg: Config, lib: LibraryConfig, library_id: int, full: bool) -> _Reading:
        max_bytes = int(cfg.index.max_file_mb * 1024 * 1024)
        return cls(lib, library_id, cfg.index.chunk_tokens, cfg.index.turn_tokens, max_bytes, full)


@dataclass
class _Read:
    """A file read and analysed, ready to be stored; or why it cannot be."""

    found: Found
    problem: str | None = None
    keep_old: bool = False  # an unforeseen failure: the entry indexed before is kept
    same: bool = False  # the content is the one indexed (only its stat changed)
    size: int = 0
    indexed_ns: int = 0
    record: EntryRecord | None = None
    chunks: list[ChunkRecord] = field(default_factory=list)
    graph: Graph | None = None
    said: list[Observation] = field(default_factory=list)
    mtime_iso: str = ""


def _read_file(
    reading: _Reading, found: Found, old_hash: str | None, projects: ProjectFinder
) -> _Read:
    """Read, parse and analyse one file: everything but the index, so that the read worker
    can do it. Never raises: an unforeseen failure is a problem with ``keep_old`` set."""
    try:
        return _read_file_unsafe(reading, found, old_hash, projects)
    except Exception as exc:  # a bug or an input we did not foresee
        return _Read(found, f"cannot index: {type(exc).__name__}: {exc}", keep_old=True)


def _read_file_unsafe(
    reading: _Reading, found: Found, old_hash: str | None, projects: ProjectFinder
) -> _Read:
    lib, max_bytes = reading.library, reading.max_bytes
    try:
        # bounded: the file may have grown since it was seen
        data = read_found(lib.path, found, max_bytes + 1)
    except NotRegularError:
        return _Read(found, "not a regular file")
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return _Read(found, "deleted while indexing")
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return _Read(found, "replaced by a symlink while indexing: not followed")
        return _Read(found, f"cannot read: {exc.strerror}")
    if len(data) > max_bytes:
        return _Read(found, f"larger than max_file_mb (over {max_bytes / 1e6:.1f} MB)")
    assert found.stat is not None
    st = found.stat
    now_ns = time.time_ns()
    content_hash = hashlib.sha256(data).hexdigest()
    if not reading.full and old_hash == content_hash:
        return _Read(found, same=True, size=len(data), indexed_ns=now_ns)
    try:
        text, problem = decode(data)
    except DecodeError as exc:
        return _Read(found, str(exc))
    stem = found.path.name.rsplit(".", 1)[0]
    parsed = parse(
        text,
        fallback_title=stem,
        chunk_tokens=reading.chunk_tokens,
        turn_tokens=reading.turn_tokens,
    )
    if problem:
        parsed.warnings.insert(0, problem)
    eid = entry_id(lib.name, found.rel)
    mtime_iso = _iso(st.st_mtime_ns)
    blob = blob_id(data)
    source_rev = f"mtime:{mtime_iso}"  # the commit that wrote it, if any, is told on storing
    observed_at = parsed.observed_at or _now()
    record = EntryRecord(
        id=eid,
        library_id=reading.library_id,
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
        file_status=file_status(found.rel, parsed),
        supersedes=parsed.supersedes,
        superseded_by=parsed.superseded_by,
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
            embed_hash=embed_hash(parsed.title, parsed.aliases, ch.heading, ch.text),
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
    said: list[Observation] = []
    # a diary tells what a session did, not how things are: no narrative claims from it
    if parsed.type != "diary":
        from brainmap.collectors import narrative

        try:
            said = narrative.collect(text, parsed, projects(found.rel))
        except Exception as exc:  # a collector bug must not keep the note out of the info root
            record.warnings.append(f"{FACTS_NOT_READ}: {type(exc).__name__}: {exc}")
    return _Read(found, record=record, chunks=chunks, graph=graph, said=said, mtime_iso=mtime_iso)


def _store_read(
    store: Store,
    reading: _Reading,
    read: _Read,
    old: EntryState | None,
    report: LibraryReport,
    has_git: bool,
) -> str | None:
    """Write what :func:`_read_file` made into the index; return its problem, if any."""
    found = read.found
    if read.problem is not None:
        return read.problem
    if read.same:
        assert old is not None and found.stat is not None
        store.entries.touch_entry(old.id, found.stat.st_mtime_ns, read.size, read.indexed_ns)
        report.unchanged += 1
        return None
    record, graph = read.record, read.graph
    assert record is not None and graph is not None
    if has_git and record.blob:
        rev = _source_rev(
            store, reading.library.name, record.path, record.blob, read.mtime_iso, has_git
        )
        if rev != record.source_rev:
            record.source_rev = rev
            for edge in graph.edges:
                edge.source_rev = rev
    observations = records(read.said, found.rel, read.mtime_iso, record.source_rev)
    store.entries.put_entry(
        record, read.chunks, rewrite=reading.full, new=old is None, graph=graph,
        observations=observations,
    )  # fmt: skip
    if old is None:
        report.added += 1
    else:
        report.updated += 1
    report.chunks += len(read.chunks)
    return None


ARCHIVE_FOLDER = "archive"  # `brainmap prune --archive` moves entries under it


def file_status(rel: str, parsed: Entry) -> str:
    """What an entry's own file says of its status: archived (under the library's
    ``archive/`` folder), retired (``status: retired``), else active. Superseded is told by
    the index, which sees the other entries too."""
    if rel.split("/", 1)[0] == ARCHIVE_FOLDER and "/" in rel:
        return "archived"
    return "retired" if parsed.retired else "active"


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
    commit = store.graph.commit_for_blob(file_key(library, rel), blob) if has_git else None
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
    max_bytes: int,
) -> tuple[bool, str | None]:
    """Record a code file with the ``Brain:`` breadcrumbs in it and, for a config file (compose,
    ssh, YAML), what it declares (too large files are left). Returns whether it was read
    anew, and why it or what it declares could not be read (gone or unreadable meanwhile, an
    alias bomb, bad text)."""
    try:
        data = read_found(lib.path, found, max_bytes + 1)
    except OSError as exc:
        return False, f"cannot be read: {exc.strerror or exc}"
    if len(data) > max_bytes:
        return False, None
    assert found.stat is not None
    now_ns = time.time_ns()
    content_hash = hashlib.sha256(data).hexdigest()
    if not full and old and old.content_hash == content_hash:
        store.entries.touch_code_file(old.id, found.stat.st_mtime_ns, len(data), now_ns)
        return False, None
    report.code_files += 1
    crumbs: list[tuple[str, int]] = []
    if b"Brain:" in data:
        with suppress(DecodeError):  # a binary file has no comments
            crumbs = breadcrumbs(decode(data)[0])
    blob = blob_id(data)
    mtime_iso = _iso(found.stat.st_mtime_ns)
    source_rev = _source_rev(store, lib.name, found.rel, blob, mtime_iso, has_git)
    observations = []
    problem = None
    for source, paths in fact_sources.items():
        if paths.wants(found.rel):
            from brainmap.collectors.files import config_observations

            # an unreadable or hostile config file gives no facts, and says why (doctor,
            # collect); it never stops the reindex
            try:
                text = decode(data)[0]
                project, included = (
                    projects.compose_file(found.rel)
                    if source == "compose"
                    else (projects(found.rel), None)
                )
                said = config_observations(
                    source, found.path, found.rel, text, project, root=lib.path, included=included
                )
                observations = records(said, found.rel, mtime_iso, source_rev)
            except Exception as exc:
                problem = f"{FACTS_NOT_READ}: {exc}"
            break
    observed_at = _now()
    record = CodeFileRecord(
        id="code:" + entry_id(lib.name, found.rel), library_id=library_id, path=found.rel,
        content_hash=content_hash, blob=blob, mtime_ns=found.stat.st_mtime_ns, size=len(data),
        indexed_ns=now_ns, observed_at=observed_at, source_rev=source_rev,
    )  # fmt: skip
    graph = code_graph(lib.name, found.rel, crumbs, observed_at, source_rev)
    store.entries.put_code_file(record, graph, new=old is None, observations=observations)
    return True, problem


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
    from brainmap.embedders import EmbedderError

    library_id = store.entries.ensure_library(lib.name, str(lib.path), lib.scope)
    states = store.entries.entry_states(library_id, rels)
    has_git = store.graph.git_state(library_id) is not None
    from brainmap.collectors.files import ProjectFinder

    report = LibraryReport(lib.name)
    projects = ProjectFinder(lib.path, lib.name)
    ids = []
    for rel in rels:
        path = lib.path / rel
        problem: str | None
        try:
            # reached without a symlink, like the read: a folder of the path may have been
            # swapped for one since the file was written
            found = Found(rel, path, _stat_in(lib.path, rel))
        except OSError as exc:
            problem = exc.strerror or str(exc)
        else:
            problem = _index_file(
                cfg, store, lib, library_id, found, states.get(rel), False, report, has_git,
                projects,
            )  # fmt: skip
        if problem is not None:
            raise UserError(
                f"{rel} was written but cannot be indexed: {problem}", status=409,
                hint="something moved or replaced the file or a folder of its path meanwhile; "
                "try again",
            )  # fmt: skip
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
    ids = store.entries.library_ids([lib.name])
    states = store.entries.entry_states(ids[lib.name]) if ids else {}
    code_states = store.entries.code_states(ids[lib.name]) if ids else {}
    skipped = {path for name, path, _ in store.entries.skipped() if name == lib.name}
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
    from brainmap.embedders import EmbedderError, model_id_of

    libs = cfg.select(names)
    report = ReindexReport()
    for lib in libs:
        if not lib.path.is_dir():
            # one moved or deleted folder must not hold back the other libraries (nor their
            # vectors); its entries stay searchable as they were
            report.missing.append(lib.name)
            report.problems.append(
                f"library {lib.name!r}: {lib.path} is missing (moved or deleted), not indexed; "
                f"`brainmap library remove {lib.name}` forgets it, or after a move remove it "
                f"and `brainmap library add {lib.name} NEW_PATH`"
            )
            continue
        try:
            report.libraries.append(index_library(cfg, store, lib, full=full, progress=progress))
        except LibraryHeldElsewhere as exc:  # a shared index: the others go on
            report.problems.append(f"{exc.message} ({exc.hint})")
    if sum(r.added + r.updated for r in report.libraries) >= COMPACT_AFTER:
        store.entries.compact_text()
    store.db.checkpoint()
    if embed and libs:
        ids = list(store.entries.library_ids(lib.name for lib in libs).values())
        cache = VectorCache(cfg.cache_path)
        try:
            report.embedding = embed_pending(
                store, cache, cfg.embedder, ids, batch_size=cfg.index.embed_batch,
                progress=progress,
            )  # fmt: skip
        except EmbedderError as exc:
            model = model_id_of(cfg.embedder)
            report.embedding = EmbedReport(
                model, pending=store.vectors.pending_count(model, ids), error=exc.message
            )
        finally:
            cache.close()
        store.db.checkpoint()
        # a large shared index: searched through an ANN index rather than in each process
        problem = store.vectors.ensure_ann(model_id_of(cfg.embedder), cfg.store.hnsw_from, progress)
        if problem:
            report.problems.append(problem)
    return report
