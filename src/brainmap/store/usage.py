"""Usage telemetry in ``usage.db``, beside config.toml: outside the disposable index.

Every entry is named by id and by library + path, so that its usage outlives both a rebuilt
``brain.db`` (ids are a hash of library + path, so they come back the same) and an entry that
is gone. The log: ``search`` (when, through which interface, for which query) with its
``hit`` rows (the entries served, by rank), and ``event`` for gets and feedback (and the hits
of files made before version 2, one row each, until they age out). ``entry_usage`` sums it
all per entry as events arrive, with the entry's library and path, so that ``stats`` reads
one row per used entry instead of the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brainmap.store.database import records
from brainmap.store.schema import batched, connect, immediate, marks, user_version, value

if TYPE_CHECKING:
    from brainmap.store.index import Store

USAGE_SCHEMA_VERSION = 2  # 2: a search's hits as rows of its own (search, hit), not events

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event(
  id INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  kind TEXT NOT NULL,
  entry_id TEXT NOT NULL,
  library TEXT NOT NULL,
  path TEXT NOT NULL,
  interface TEXT NOT NULL,
  query TEXT,
  rank INTEGER
);
CREATE INDEX IF NOT EXISTS event_kind_at ON event(kind, at);
CREATE TABLE IF NOT EXISTS search(
  id INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  interface TEXT NOT NULL,
  query TEXT
);
CREATE INDEX IF NOT EXISTS search_at ON search(at);
CREATE TABLE IF NOT EXISTS hit(
  search_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  entry_id TEXT NOT NULL,
  PRIMARY KEY (search_id, rank)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS event_entry ON event(entry_id, at);
CREATE TABLE IF NOT EXISTS entry_usage(
  entry_id TEXT PRIMARY KEY,
  library TEXT NOT NULL,
  path TEXT NOT NULL,
  hits INTEGER NOT NULL DEFAULT 0,
  gets INTEGER NOT NULL DEFAULT 0,
  useful INTEGER NOT NULL DEFAULT 0,
  not_useful INTEGER NOT NULL DEFAULT 0,
  first_at TEXT NOT NULL,
  last_used TEXT,
  last_feedback TEXT
) WITHOUT ROWID;
"""
_INSERT = (
    "INSERT INTO event(at, kind, entry_id, library, path, interface, query, rank) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# one row per entry, summed as events arrive (an event older than what is there keeps the
# later time: events of several processes arrive out of order)
_UPSERT = """
INSERT INTO entry_usage(entry_id, library, path, hits, gets, useful, not_useful, first_at,
                        last_used, last_feedback)
VALUES (:entry_id, :library, :path, :hits, :gets, :useful, :not_useful, :at, :used, :feedback)
ON CONFLICT(entry_id) DO UPDATE SET
  library = excluded.library, path = excluded.path,
  hits = hits + excluded.hits, gets = gets + excluded.gets,
  useful = useful + excluded.useful, not_useful = not_useful + excluded.not_useful,
  first_at = min(first_at, excluded.first_at),
  last_used = CASE WHEN excluded.last_used IS NULL THEN last_used
                   WHEN last_used IS NULL OR excluded.last_used > last_used
                   THEN excluded.last_used ELSE last_used END,
  last_feedback = CASE WHEN excluded.last_feedback IS NULL THEN last_feedback
                       WHEN last_feedback IS NULL OR excluded.last_feedback > last_feedback
                       THEN excluded.last_feedback ELSE last_feedback END
"""
_USAGE_COLUMNS = "entry_id, library, path, hits, gets, useful, not_useful, first_at, last_used"
SEARCH_HITS = 10  # what a search serves, about: how many searches :meth:`forget_hits` takes


@dataclass(frozen=True)
class UsageEvent:
    """One thing that happened to an entry: served as a search ``hit`` (or by a hook),
    opened by ``get``, judged ``useful`` or ``not_useful``."""

    at: str  # ISO 8601, UTC
    kind: str
    entry_id: str
    library: str
    path: str
    interface: str  # cli | http | mcp | hook
    query: str | None = None
    rank: int | None = None  # a hit's place in what was served, from 1


@dataclass(frozen=True)
class EntryUsage:
    """What the log says of one entry, all time."""

    entry_id: str
    library: str
    path: str
    hits: int
    gets: int
    useful: int
    not_useful: int
    first_at: str
    last_used: str | None  # the last hit or get

    @property
    def uses(self) -> int:
        return self.hits + self.gets


class UsageStore:
    """The telemetry file: written in small batches, read by ``stats`` and ``prune``."""

    def __init__(self, path: Path | str, busy_timeout_ms: int = 100) -> None:
        """``busy_timeout_ms`` is short on purpose: a writer that waits for a busy file
        gives up (and drops its batch) rather than hold anything up."""
        self.path = Path(path)
        self.conn = connect(self.path, busy_timeout_ms)
        try:
            if user_version(self.conn) < USAGE_SCHEMA_VERSION:  # a newer one is read as is
                with immediate(self.conn):
                    self.conn.execute(_SCHEMA)
                    self.conn.execute(
                        "INSERT OR IGNORE INTO meta(key, value) "
                        "VALUES ('created', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
                    )
                    self.conn.execute(f"PRAGMA user_version={USAGE_SCHEMA_VERSION}")
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        self.conn.close()

    def wait_at_most(self, busy_timeout_ms: int) -> None:
        """How long a write waits for another writer from now on."""
        self.conn.set_busy_timeout(busy_timeout_ms)

    def add(self, events: Sequence[UsageEvent]) -> None:
        """Append ``events`` to the log and to the per-entry sums, in one transaction."""
        if not events:
            return
        sums: dict[str, dict[str, Any]] = {}
        for ev in events:
            row = sums.setdefault(ev.entry_id, {
                "entry_id": ev.entry_id, "library": ev.library, "path": ev.path, "hits": 0,
                "gets": 0, "useful": 0, "not_useful": 0, "at": ev.at, "used": None,
                "feedback": None,
            })  # fmt: skip
            row["library"], row["path"] = ev.library, ev.path
            row["at"] = min(row["at"], ev.at)
            column = {"hit": "hits", "get": "gets"}.get(ev.kind, ev.kind)
            row[column] += 1
            key = "used" if ev.kind in ("hit", "get") else "feedback"
            row[key] = max(row[key] or ev.at, ev.at)
        with immediate(self.conn):
            self.conn.executemany(
                _INSERT,
                [(e.at, e.kind, e.entry_id, e.library, e.path, e.interface, e.query, e.rank)
                 for e in events if e.kind != "hit"],
            )  # fmt: skip
            for search in _searches(events):
                first = search[0]
                self.conn.execute(
                    "INSERT INTO search(at, interface, query) VALUES (?, ?, ?)",
                    (first.at, first.interface, first.query),
                )
                found = self.conn.last_insert_rowid()
                self.conn.executemany(
                    "INSERT OR IGNORE INTO hit(search_id, rank, entry_id) VALUES (?, ?, ?)",
                    [(found, e.rank or n, e.entry_id) for n, e in enumerate(search, 1)],
                )
            self.conn.executemany(_UPSERT, list(sums.values()))

    def forget_hits(self, before: str, limit: int) -> int:
        """Delete about ``limit`` of the logged search hits older than ``before`` (ISO 8601;
        the searches of about that many), in one transaction; the per-entry sums keep them.
        Returns how many hits went (0: none is left)."""
        with immediate(self.conn):
            self.conn.execute(
                "DELETE FROM event WHERE id IN (SELECT id FROM event "
                "WHERE kind = 'hit' AND at < ? LIMIT ?)",
                (before, limit),
            )
            gone = int(self.conn.changes())
            if gone < limit:
                ids = [r[0] for r in self.conn.execute(
                    "SELECT id FROM search WHERE at < ? LIMIT ?",
                    (before, max(1, (limit - gone) // SEARCH_HITS)),
                )]  # fmt: skip
                if ids:
                    self.conn.execute(
                        f"DELETE FROM hit WHERE search_id IN ({marks(len(ids))})", ids
                    )
                    gone += int(self.conn.changes())
                    self.conn.execute(f"DELETE FROM search WHERE id IN ({marks(len(ids))})", ids)
            return gone

    def started(self) -> str | None:
        """Since when usage is recorded: the file's creation, or its oldest event if older
        (events of an earlier file may have been imported)."""
        created = value(self.conn, "SELECT value FROM meta WHERE key = 'created'")
        oldest = value(self.conn, "SELECT min(at) FROM event")
        searched = value(self.conn, "SELECT min(at) FROM search")
        times = [str(t) for t in (created, oldest, searched) if t]
        return min(times) if times else None

    def event_count(self) -> int:
        """Every event ever recorded (from the per-entry sums: the log forgets old hits)."""
        return int(
            value(self.conn, "SELECT coalesce(sum(hits + gets + useful + not_useful), 0) "
                  "FROM entry_usage")
        )  # fmt: skip

    def events(self, entry_id: str | None = None, kind: str | None = None) -> list[UsageEvent]:
        """The log as events, oldest first (of one entry, of one kind); a hit names its
        entry's library and path as last recorded."""
        where, params = [], []
        for column, given in (("entry_id", entry_id), ("kind", kind)):
            if given is not None:
                where.append(f"{column} = ?")
                params.append(given)
        logged = (
            "SELECT at, kind, entry_id, library, path, interface, query, rank, 0 AS n, id "
            "FROM event UNION ALL "
            "SELECT s.at, 'hit', h.entry_id, u.library, u.path, s.interface, s.query, h.rank, "
            "1, s.id FROM hit h JOIN search s ON s.id = h.search_id "
            "JOIN entry_usage u ON u.entry_id = h.entry_id"
        )
        sql = f"SELECT at, kind, entry_id, library, path, interface, query, rank FROM ({logged})"
        return records(
            self.conn,
            UsageEvent,
            sql + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY at, n, id, rank",
            params,
        )

    def usage(self, entry_ids: Sequence[str] | None = None) -> dict[str, EntryUsage]:
        """The per-entry sums (of every entry used, or of these)."""
        sql = f"SELECT {_USAGE_COLUMNS} FROM entry_usage"
        if entry_ids is None:
            rows = records(self.conn, EntryUsage, sql)
        else:
            rows = []
            for part in batched(list(entry_ids)):
                rows += records(
                    self.conn, EntryUsage, f"{sql} WHERE entry_id IN ({marks(len(part))})", part
                )
        return {r.entry_id: r for r in rows}

    def most_used(self, limit: int) -> list[EntryUsage]:
        """The entries served or opened most often, all time."""
        return records(
            self.conn,
            EntryUsage,
            f"SELECT {_USAGE_COLUMNS} FROM entry_usage WHERE hits + gets > 0 "
            "ORDER BY hits + gets DESC, last_used DESC LIMIT ?",
            (limit,),
        )

    def used_since(self, since: str) -> set[str]:
        """The entries served (a hit) or opened (get) at or after ``since``."""
        rows = self.conn.execute(
            "SELECT entry_id FROM entry_usage WHERE last_used >= ?", (since,)
        ).fetchall()
        return {str(r[0]) for r in rows}

    def feedback_since(self, since: str) -> dict[str, tuple[int, int]]:
        """(useful, not useful) feedback per entry given at or after ``since``."""
        rows = self.conn.execute(
            "SELECT entry_id, sum(kind = 'useful'), sum(kind = 'not_useful') FROM event "
            "WHERE kind IN ('useful', 'not_useful') AND at >= ? GROUP BY entry_id",
            (since,),
        ).fetchall()
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}  # type: ignore[arg-type]


def _searches(events: Sequence[UsageEvent]) -> list[list[UsageEvent]]:
    """The hits among ``events`` by search: a run of hits of one time, interface and query
    whose ranks rise (what one search served, in :func:`brainmap.usage` order); a hit
    without a rank is a search alone."""
    out: list[list[UsageEvent]] = []
    for event in events:
        if event.kind != "hit":
            continue
        last = out[-1][-1] if out else None
        if (
            last is not None
            and (event.at, event.interface, event.query) == (last.at, last.interface, last.query)
            and event.rank is not None
            and last.rank is not None
            and event.rank > last.rank
        ):
            out[-1].append(event)
        else:
            out.append([event])
    return out


@dataclass(frozen=True)
class IndexedEntry:
    """An entry of the index as usage reports see it."""

    id: str
    library: str
    path: str
    title: str
    type: str
    created: str | None
    updated: str
    last_verified: str | None


def indexed_entries(store: Store, library_ids: Iterable[int] | None = None) -> list[IndexedEntry]:
    """Every entry of the index (of these libraries), in library and path order: what usage
    is compared with (an entry no event names was never used)."""
    sql = (
        "SELECT e.id, l.name AS library, e.path, e.title, e.type, e.created, e.updated, e.last_verified "
        "FROM entry e JOIN library l ON l.id = e.library_id"
    )
    if library_ids is None:
        return store.db.records(IndexedEntry, sql + " ORDER BY l.name, e.path")
    ids = list(library_ids)
    if not ids:
        return []
    return store.db.records(
        IndexedEntry,
        f"{sql} WHERE e.library_id IN ({marks(len(ids))}) ORDER BY l.name, e.path",
        ids,
    )
