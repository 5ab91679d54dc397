"""The database object: one connection to ``brain.db``, its write transactions and its reads.

The repositories (entries, vectors, graph, facts, maps) each hold the one :class:`Database`
of a :class:`~brainmap.store.index.Store`, so that what they write together (an entry's text,
edges and observations) is one transaction.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import apsw

from brainmap.store.schema import (
    BUSY_TIMEOUT_MS,
    PRAGMAS,
    SCHEMA_VERSION,
    connect,
    immediate,
    migrate,
    user_version,
)

R = TypeVar("R")
Params = Sequence[Any] | dict[str, Any]
FtsRow = tuple[int, str, str, str, str]  # rowid, title, heading, body, forms

_BUMP_TEXT_GEN = "UPDATE meta SET value = value + ? WHERE key = 'text_gen'"
_INSERT_FTS = "INSERT INTO chunk_fts(rowid, title, heading, body, forms) VALUES (?,?,?,?,?)"


class Buffer(Protocol):
    """Rows a repository holds back until the transaction commits (see :meth:`Database.flush`)."""

    def flush(self) -> None:
        """Insert the rows held back."""

    def discard(self) -> None:
        """Forget them (the transaction ended)."""


class BaseDatabase:
    """What both backends' database objects share: nested write transactions, the rows held
    back until commit (full-text rows, the repositories' buffers), and the reads, built on a
    backend's :meth:`execute`, :meth:`executemany`, :meth:`columns` and transaction.

    The repositories write their SQL once, in what SQLite and PostgreSQL both understand, with
    ``?`` (or ``:name``) parameters; the PostgreSQL backend translates those (store.postgres).
    """

    dialect = ""
    Error: type[Exception] = Exception  # what a failed statement raises

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        # full-text rows waiting for the end of the transaction, as (entry id, row). FTS5
        # writes its pending terms out as a new segment whenever a later statement opens a
        # statement journal (every entry or chunk insert does), so rows inserted one file at
        # a time left one tiny segment per file to merge; together they make one per batch.
        self.text_rows: list[tuple[str, FtsRow]] = []
        self._buffers: list[Buffer] = []
        # the libraries the current call may read (None: all): see :meth:`seeing`
        self.visible: frozenset[str] | None = None

    # what a backend provides

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement (the buffered full-text rows stay buffered); return how many rows
        it changed."""
        raise NotImplementedError

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement for each of ``rows``."""
        raise NotImplementedError

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Every row of a query, the buffered full-text rows left buffered (for reads that do
        not touch the full text, inside a write)."""
        raise NotImplementedError

    def _columns(self, sql: str, params: Params) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _insert_text(self, rows: list[FtsRow]) -> None:
        """Write full-text rows of chunks (their old rows are gone)."""
        raise NotImplementedError

    def drop_text(self, chunk_id: int) -> None:
        """Remove the full-text row of a chunk that stays (it is written again)."""
        raise NotImplementedError

    def reading(self) -> AbstractContextManager[None]:
        """One read transaction, so that several queries see the same state (within a write
        transaction, that one)."""
        raise NotImplementedError

    def schema_version(self) -> int:
        """The schema version the database is at."""
        raise NotImplementedError

    location = ""  # where the index lives, as shown to people
    latest_schema = 0  # the schema version this brainmap writes
    rebuild_hint = ""  # what to do about a database at another schema

    def size_bytes(self) -> int:
        """What the index takes on disk."""
        raise NotImplementedError

    def checkpoint(self) -> None:
        """Settle bulk work on disk (SQLite: fold the WAL back into the file)."""

    def vacuum(self) -> None:
        """Give back the space of deleted rows."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # shared

    @contextmanager
    def seeing(self, libraries: Iterable[str] | None) -> Iterator[None]:
        """Within the block, the reads that answer a served call (an entry named by a
        reference, a slug, supersession links, the graph's edges, the search's filters) see
        only ``libraries`` (None: all). A connection serves one thread, so one call at a time;
        the writes and what derives from them always see everything."""
        before = self.visible
        self.visible = None if libraries is None else frozenset(libraries)
        try:
            yield
        finally:
            self.visible = before

    def sees(self, library: str) -> bool:
        """Whether the current call may see ``library`` (:meth:`seeing`)."""
        return self.visible is None or library in self.visible

    def add_buffer(self, buffer: Buffer) -> None:
        """Have ``buffer`` flushed before every commit, after the full-text rows."""
        self._buffers.append(buffer)

    @contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction; nested calls join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._depth = 1
            try:
                with self._transaction():
                    yield
                    self.flush()
            finally:
                self._depth = 0
                self.text_rows = []
                for buffer in self._buffers:
                    buffer.discard()

    def add_text(self, entry_id: str, row: FtsRow) -> None:
        """Hold a chunk's full-text row back until the transaction commits (or
        :meth:`flush_text`)."""
        self.text_rows.append((entry_id, row))

    def discard_text(self, entry_id: str) -> None:
        """Forget the held-back full-text rows of one entry (its write failed)."""
        self.text_rows = [r for r in self.text_rows if r[0] != entry_id]

    def flush_text(self) -> None:
        """Insert the buffered full-text rows: before a commit, and before any statement
        that reads the full-text index or deletes chunks in the same transaction."""
        if self.text_rows:
            rows, self.text_rows = self.text_rows, []
            self._insert_text([row for _, row in rows])
            self.text_changed(len(rows))

    def text_changed(self, rows: int) -> None:
        """Add ``rows`` to the text generation: that many full-text rows were written or
        deleted in this transaction."""
        self.execute(_BUMP_TEXT_GEN, (rows,))

    def flush(self) -> None:
        """Insert every row held back (full-text rows, then the repositories' buffers): before
        a commit, and before deleting what those rows belong to."""
        self.flush_text()
        for buffer in self._buffers:
            buffer.flush()

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Every row of a query (the buffered full-text rows are inserted first)."""
        with self._lock:
            self.flush_text()
            return self.fetch(sql, params)

    def one(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row (None when there is no row)."""
        rows = self.rows(sql, params)
        return rows[0][0] if rows else None

    def columns(
        self, sql: str, params: Params = ()
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """The column names of a query and its rows (no names when there is no row)."""
        with self._lock:
            self.flush_text()
            return self._columns(sql, params)

    def records(
        self, cls: type[R], sql: str, params: Params = (), *, json_columns: Sequence[str] = ()
    ) -> list[R]:
        """The rows of a query as dataclasses of ``cls``, each column set on the field of its
        name (``json_columns`` are decoded first); a column no field is named after is an
        error."""
        names, rows = self.columns(sql, params)
        if not rows:
            return []
        build: Callable[[tuple[Any, ...]], R] = row_builder(cls, names, frozenset(json_columns))
        return [build(row) for row in rows]


class Database(BaseDatabase):
    """One connection to ``brain.db`` (migrated when opened); writes go through :meth:`write`."""

    dialect = "sqlite"
    Error = apsw.Error
    latest_schema = SCHEMA_VERSION
    rebuild_hint = "delete brain.db and run `brainmap reindex`"

    def __init__(
        self,
        path: Path | str,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        migrate: Callable[[apsw.Connection], None] = migrate,
    ) -> None:
        """``migrate`` brings the file's schema up to date (the index's, by default; the
        team's ``team.db`` has its own)."""
        super().__init__()
        self.path = Path(path)
        self.location = str(self.path)
        self.conn = connect(self.path, busy_timeout_ms)
        try:
            migrate(self.conn)
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        self.conn.close()

    def execute(self, sql: str, params: Params = ()) -> int:
        with self._lock:
            self.conn.execute(sql, params)
            return int(self.conn.changes())

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        with self._lock:
            self.conn.executemany(sql, rows)

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    def _columns(self, sql: str, params: Params) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        return columns(self.conn, sql, params)

    def _transaction(self) -> AbstractContextManager[Any]:
        return immediate(self.conn)  # BEGIN IMMEDIATE: a deferred read-then-write would fail

    def _insert_text(self, rows: list[FtsRow]) -> None:
        self.conn.executemany(_INSERT_FTS, rows)

    def drop_text(self, chunk_id: int) -> None:
        self.conn.execute("DELETE FROM chunk_fts WHERE rowid = ?", (chunk_id,))

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            if not self.conn.getautocommit():
                yield
                return
            self.conn.execute("BEGIN")
            try:
                yield
            finally:
                self.conn.execute("COMMIT")

    def schema_version(self) -> int:
        with self._lock:
            return user_version(self.conn)

    def checkpoint(self) -> None:
        with self._lock:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def vacuum(self) -> None:
        """Rewrite the file without its free pages, then checkpoint."""
        with self._lock:
            self.conn.execute("VACUUM")
        self.checkpoint()

    def size_bytes(self) -> int:
        """The database file with its WAL and shared-memory files."""
        paths = (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
        return sum(p.stat().st_size for p in paths if p.exists())

    def pragmas(self) -> dict[str, Any]:
        """The connection's PRAGMA values that the contract fixes."""
        return {name: self.one(f"PRAGMA {name}") for name in PRAGMAS}


def columns(
    conn: apsw.Connection, sql: str, params: Params = ()
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """The column names of a query and its rows (no names when there is no row)."""
    cursor = conn.execute(sql, params)
    try:
        names = tuple(name for name, _ in cursor.get_description())
    except apsw.ExecutionCompleteError:  # no row: SQLite has finished the statement
        return (), []
    return names, cursor.fetchall()


def records(
    conn: apsw.Connection,
    cls: type[R],
    sql: str,
    params: Params = (),
    *,
    json_columns: Sequence[str] = (),
) -> list[R]:
    """The rows of a query as dataclasses of ``cls``, each column set on the field of its name
    (``json_columns`` are decoded first); a column no field is named after is an error."""
    names, rows = columns(conn, sql, params)
    if not rows:
        return []
    build: Callable[[tuple[Any, ...]], R] = row_builder(cls, names, frozenset(json_columns))
    return [build(row) for row in rows]


# how to build a dataclass from the rows of one query shape: (class, columns, JSON columns)
_BUILDERS: dict[tuple[type[Any], tuple[str, ...], frozenset[str]], Callable[..., Any]] = {}


def row_builder(
    cls: type[Any], names: tuple[str, ...], json_columns: frozenset[str]
) -> Callable[[tuple[Any, ...]], Any]:
    """How to build ``cls`` from rows with these columns, worked out once per query shape
    (the search reads build thousands of rows per query); both backends' rows are tuples."""
    key = (cls, names, json_columns)
    if key in _BUILDERS:
        return _BUILDERS[key]
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(names) - set(fields))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field for column(s) {', '.join(unknown)}")
    decode = [i for i, name in enumerate(names) if name in json_columns]
    # columns in the order of the fields (most queries): positional arguments, the fastest
    positional = tuple(fields[: len(names)]) == names

    def build(row: tuple[Any, ...]) -> Any:
        values = list(row)
        for i in decode:
            values[i] = json.loads(values[i])
        return cls(*values) if positional else cls(**dict(zip(names, values, strict=True)))

    _BUILDERS[key] = build
    return build
