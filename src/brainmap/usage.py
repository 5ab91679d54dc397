"""Usage telemetry: which entries were served (search hits, hook injections), opened (get)
and judged (feedback), through which interface, for which query, and when.

It lives in ``usage.db`` beside config.toml (``brainmap.store.usage``), never in the index
(deleting ``brain.db`` loses none of it) nor in the user's markdown; ``[usage] enabled =
false`` records nothing. A search never waits for it: events go to an in-process buffer,
written in one transaction by a background thread about once a second (a server) or when
the process exits (a CLI call; a hook writes its few at its end). A busy or broken
``usage.db`` costs a dropped batch, never a failed or slower search.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from brainmap.config import Config
    from brainmap.store import IndexedEntry, Store, UsageEvent, UsageStore

log = logging.getLogger("brainmap.usage")

#: The interfaces usage is recorded for (the ops' callers, and the agent hooks).
Interface = Literal["cli", "http", "mcp", "hook"]
FLUSH_EVERY_S = 1.0  # a long-lived process writes its buffer this often
FLUSH_WAIT_MS = 1000  # how long the background thread's write waits for a busy usage.db
EXIT_WAIT_MS = 50  # ... and a one-shot process's, at its end (then the batch is dropped)
MAX_BUFFER = 10_000  # searches (gets, feedback) kept while usage.db stays busy; oldest go first
QUERY_CHARS = 500  # of a query, what is recorded
HIT_CHECK_EVERY_S = 3600.0  # how often a long-lived process drops the hits past [usage] hit_days
HIT_BATCH = 5000  # old hits dropped in one transaction (~50 ms here)
HIT_PAUSE_S = 0.05  # between two such transactions


def stamp(when: float) -> str:
    """The time of an event (``time.time()``) as ISO 8601 in UTC to the millisecond (sorts
    as text)."""
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# What a search pays: one tuple appended, (time, kind, interface, query, [(entry id, library,
# path), ...]); the events are made from it when the buffer is written.
_Pending = tuple[float, str, str, str | None, list[tuple[str, str, str]]]


def _events(batch: list[_Pending]) -> list[UsageEvent]:
    from brainmap.store import UsageEvent

    out = []
    for when, kind, interface, query, entries in batch:
        at, seen = stamp(when), set()
        text = query[:QUERY_CHARS] if query is not None else None
        for entry_id, library, path in entries:
            if entry_id not in seen:  # one hit per entry: its first place
                seen.add(entry_id)
                rank = len(seen) if kind == "hit" else None
                out.append(UsageEvent(at, kind, entry_id, library, path, interface, text, rank))
    return out


class Recorder:
    """The buffer of one ``usage.db`` in this process, and the thread that writes it."""

    def __init__(self, path: Path, hit_days: int = 0) -> None:
        self.path = path
        self.hit_days = hit_days  # the log's hits older than this go (0: none)
        self.dropped = 0  # searches (gets ...) whose usage a busy or broken file lost
        self._buffer: list[_Pending] = []
        self._lock = threading.Lock()  # the buffer
        self._writing = threading.Lock()  # the connection: one flush at a time
        self._store: UsageStore | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._hits_checked = -float("inf")  # time.monotonic() of the last drop of old hits

    def add(self, pending: _Pending) -> None:
        """Buffer what was served; the first call starts the writer thread and the exit
        flush."""
        with self._lock:
            self._buffer.append(pending)
            over = len(self._buffer) - MAX_BUFFER
            if over > 0:
                del self._buffer[:over]
                self.dropped += over
            if self._thread is None:
                atexit.register(self.flush, EXIT_WAIT_MS)
                self._thread = threading.Thread(
                    target=self._run, name="brainmap-usage", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_EVERY_S)
            self._wake.clear()
            try:
                self.flush(FLUSH_WAIT_MS, keep=True)
                if time.monotonic() - self._hits_checked >= HIT_CHECK_EVERY_S:
                    self._hits_checked = time.monotonic()
                    self.forget_old_hits()
            except Exception:  # the thread must live on: the next round may succeed
                log.debug("usage writer round failed", exc_info=True)

    def forget_old_hits(self, now: float | None = None) -> int:
        """Drop the log's search hits older than ``hit_days`` before ``now`` (``time.time()``;
        default: now), as a long-lived process does every :data:`HIT_CHECK_EVERY_S`: the log
        would otherwise grow by ten rows a search for ever. One batch of
        :data:`HIT_BATCH` rows a transaction, with a pause between batches, so that a flush
        here or a writer elsewhere (a hook waits 50 ms) gets its turn. Returns how many went;
        never raises (a busy or broken file keeps them until the next time)."""
        gone = 0
        try:
            if self.hit_days <= 0 or not self.path.exists():
                return 0
            before = stamp((time.time() if now is None else now) - self.hit_days * 86400)
            while True:
                with self._writing:
                    deleted = self._opened(FLUSH_WAIT_MS).forget_hits(before, HIT_BATCH)
                gone += deleted
                if not deleted:
                    return gone
                time.sleep(HIT_PAUSE_S)
        except Exception as exc:  # busy, damaged, read-only: the rest wait for next time
            log.debug("old usage hits not dropped: %s", exc)
            with self._writing:
                self._close()
            return gone

    def flush(self, wait_ms: int = EXIT_WAIT_MS, *, keep: bool = False) -> bool:
        """Write the buffer in one transaction, waiting at most ``wait_ms`` for a busy file;
        on failure the batch is dropped (or, with ``keep``, put back for the next try).
        Returns whether everything buffered is written."""
        with self._writing:
            with self._lock:
                batch, self._buffer = self._buffer, []
            if not batch:
                return True
            try:
                self._opened(wait_ms).add(_events(batch))
                return True
            except Exception as exc:  # busy, damaged, read-only, full: usage only is lost
                log.debug("usage not recorded (%s events): %s", len(batch), exc)
                self._close()
                if keep:
                    with self._lock:
                        self._buffer[:0] = batch[-MAX_BUFFER:]
                else:
                    self.dropped += len(batch)
                return False

    def _opened(self, wait_ms: int) -> UsageStore:
        """The connection to usage.db (opened on first use), waiting at most ``wait_ms`` for
        a busy file (call holding ``_writing``)."""
        if self._store is None:
            from brainmap.store import UsageStore

            self._store = UsageStore(self.path, wait_ms)
        else:
            self._store.wait_at_most(wait_ms)
        return self._store

    def _close(self) -> None:
        if self._store is not None:
            with contextlib.suppress(Exception):  # a connection that failed may fail to close
                self._store.close()
            self._store = None


_recorders: dict[Path, Recorder] = {}
_recorders_lock = threading.Lock()


def recorder(cfg: Config) -> Recorder:
    """The recorder of a home's ``usage.db`` (one per process)."""
    with _recorders_lock:
        found = _recorders.get(cfg.usage_path)
        if found is None:
            found = _recorders[cfg.usage_path] = Recorder(cfg.usage_path, cfg.usage.hit_days)
        return found


def _record(
    cfg: Config,
    kind: str,
    entries: list[tuple[str, str, str]],
    interface: Interface,
    query: str | None = None,
) -> bool:
    if not cfg.usage.enabled:
        return False
    if entries:
        try:
            recorder(cfg).add((time.time(), kind, interface, query, entries))
        except Exception:  # never the caller's problem
            log.debug("usage not buffered", exc_info=True)
    return True


def served(
    cfg: Config, hits: list[tuple[str, str, str]], query: str | None, interface: Interface
) -> None:
    """Record the entries of what was served, as (entry id, library, path) in the order
    shown: one ``hit`` per entry (its first place) for ``query``."""
    _record(cfg, "hit", hits, interface, query)


def opened(cfg: Config, entry_id: str, library: str, path: str, interface: Interface) -> None:
    """Record that an entry was fetched whole (``get``)."""
    _record(cfg, "get", [(entry_id, library, path)], interface)


def judged(
    cfg: Config, entry_id: str, library: str, path: str, useful: bool, interface: Interface
) -> bool:
    """Record feedback on an entry; False when usage is off (nothing recorded)."""
    kind = "useful" if useful else "not_useful"
    return _record(cfg, kind, [(entry_id, library, path)], interface)


def flush(cfg: Config | None = None, wait_ms: int = EXIT_WAIT_MS) -> bool:
    """Write what this process buffered (for one home, or all) now; never raises."""
    with _recorders_lock:
        targets = list(_recorders.values()) if cfg is None else [_recorders.get(cfg.usage_path)]
    return all(r.flush(wait_ms) for r in targets if r is not None)


# --- reading ---------------------------------------------------------------------------------

SHOWN = 5  # entries listed as most and as least used


@dataclass
class UsedEntry:
    """An entry with its usage, all time."""

    id: str
    library: str
    path: str
    title: str | None  # None: no longer in the index
    hits: int = 0
    gets: int = 0
    useful: int = 0
    not_useful: int = 0
    last_used: str | None = None


@dataclass
class UsageSummary:
    """What ``stats`` shows of usage: since when, how much, the most and least used."""

    enabled: bool
    path: str
    since: str | None = None
    events: int = 0
    used_entries: int = 0  # entries of the index served or opened at least once
    never_used: int = 0  # entries of the index never served nor opened
    most_used: list[UsedEntry] = field(default_factory=list)
    least_used: list[UsedEntry] = field(default_factory=list)
    error: str | None = None  # usage.db could not be read


def open_usage(cfg: Config) -> UsageStore | None:
    """``usage.db`` for reading (written first with what this process buffered), or None
    when nothing was ever recorded."""
    flush(cfg)
    if not cfg.usage_path.exists():
        return None
    from brainmap.store import UsageStore

    return UsageStore(cfg.usage_path, 1000)


def counted(entry_type: str, path: str) -> bool:
    """Whether an entry counts for usage reports: the diary is a log (never served by the
    hooks, never pruned) and what is archived already is out of the way."""
    return entry_type != "diary" and not path.startswith("archive/")


def summary(cfg: Config, store: Store, limit: int = SHOWN) -> UsageSummary:
    """The usage part of ``stats`` (a read of the per-entry sums, not of the log), with
    ``limit`` entries as the most and as the least used."""
    from brainmap.store import DatabaseError, indexed_entries

    out = UsageSummary(cfg.usage.enabled, str(cfg.usage_path))
    try:
        usage = open_usage(cfg)
    except Exception as exc:  # a damaged file must not break stats
        out.error = str(exc)
        return out
    indexed = indexed_entries(store)
    entries = [e for e in indexed if counted(e.type, e.path)]
    uncounted = {e.id for e in indexed} - {e.id for e in entries}  # the diary, the archive
    if usage is None:
        out.never_used = len(entries)
        out.least_used = [UsedEntry(e.id, e.library, e.path, e.title) for e in entries[:limit]]
        return out
    try:
        out.since, out.events = usage.started(), usage.event_count()
        sums = usage.usage()
        top = usage.most_used(limit + len(uncounted))  # the uncounted are left out below
    except DatabaseError as exc:
        out.error = str(exc)
        return out
    finally:
        usage.close()
    titles = {e.id: e.title for e in entries}

    def shown(eid: str, library: str, path: str, title: str | None) -> UsedEntry:
        u = sums.get(eid)
        if u is None:
            return UsedEntry(eid, library, path, title)
        return UsedEntry(eid, library, path, title, u.hits, u.gets, u.useful, u.not_useful,
                         u.last_used)  # fmt: skip

    out.most_used = [
        shown(u.entry_id, u.library, u.path, titles.get(u.entry_id))
        for u in top
        if u.entry_id not in uncounted
    ][:limit]
    out.used_entries = sum(1 for e in entries if e.id in sums and sums[e.id].uses)
    out.never_used = len(entries) - out.used_entries

    def rank(e: IndexedEntry) -> tuple[int, str, str]:
        u = sums.get(e.id)
        return (u.uses if u else 0, (u.last_used or "") if u else "", e.created or e.updated)

    least = sorted(entries, key=rank)[:limit]
    out.least_used = [shown(e.id, e.library, e.path, e.title) for e in least]
    return out
