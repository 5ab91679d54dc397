"""The database object of the PostgreSQL backend: one connection, its write transactions and
its reads, as :class:`brainmap.store.Database` is for SQLite.

Several machines write at once here, so a write transaction is PostgreSQL's (row locks,
constraints and the advisory locks the repositories take), not SQLite's one writer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brainmap.errors import UserError
from brainmap.store.database import BaseDatabase, FtsRow, Params
from brainmap.store.postgres.schema import (
    MIN_SERVER_VERSION,
    MIN_VECTOR_VERSION,
    SCHEMA_VERSION,
    TEAM,
    applied,
    migrate,
    redact,
)

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_S = 10
# the tables a reindex fills in bulk (another application's tables in the database are its own)
BULK_TABLES = (
    "chunk",
    "entry",
    "entry_tag",
    "edge",
    "node",
    "code_file",
    "observation",
    "chunk_vec",
)
WRITE_LOCK = 0x6272_6D61_7077  # pg_advisory_xact_lock's key for writes ("brmapw")


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return url.startswith(("postgresql://", "postgres://"))


def connect(url: str) -> psycopg.Connection[Any]:
    """A connection in autocommit mode (transactions are explicit), or a :class:`UserError`
    saying why there is none: psycopg missing, a bad URL, a server that does not answer."""
    try:
        import psycopg
    except ImportError as exc:
        raise UserError(
            "a PostgreSQL store needs psycopg", hint="pip install 'brainmap[postgres]'"
        ) from exc
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.ProgrammingError as exc:  # the URL itself is malformed
        raise UserError(f"not a PostgreSQL URL: {redact(url)}: {exc}") from None
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"cannot connect to PostgreSQL at {redact(url)}: {reason}",
            hint="check the URL ([store] url, --db or $BRAINMAP_DB) and that the server runs",
        ) from None


class PgDatabase(BaseDatabase):
    """One connection to a PostgreSQL database (migrated when opened); writes go through
    :meth:`write`.

    The repositories' SQL is SQLite's, in what both understand; :func:`translate` turns its
    ``?`` and ``:name`` parameters into psycopg's and ``json_extract(col, '$.key')`` into
    ``(col::jsonb ->> 'key')``. Full-text rows become the ``tsv`` and ``words`` of their
    chunk (:func:`text_vector`).
    """

    dialect = "postgres"
    latest_schema = SCHEMA_VERSION
    rebuild_hint = "run `brainmap reindex`: the next brainmap that opens it migrates it"

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.location = redact(url)
        self.conn = connect(url)
        import psycopg

        self.Error = psycopg.Error
        try:
            self._prepare()
        except BaseException:
            self.conn.close()
            raise

    def _prepare(self) -> None:
        """Make the new connection ready: a usable server, the schema migrated."""
        _check_server(self.conn, self.url)
        migrate(self.conn, self.url)
        from pgvector.psycopg import register_vector

        register_vector(self.conn)

    def close(self) -> None:
        self.conn.close()

    def execute(self, sql: str, params: Params = ()) -> int:
        with self._lock:
            return int(self.conn.execute(translate(sql), params).rowcount)

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        rows = list(rows)
        if not rows:
            return
        with self._lock, self.conn.cursor() as cursor:
            cursor.executemany(translate(sql), rows)

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            cursor = self.conn.execute(translate(sql), params)
            return cursor.fetchall() if cursor.description is not None else []

    def _columns(self, sql: str, params: Params) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        cursor = self.conn.execute(translate(sql), params)
        rows = cursor.fetchall() if cursor.description is not None else []
        if not rows or cursor.description is None:
            return (), []
        return tuple(column.name for column in cursor.description), rows

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # one writer at a time, as SQLite's BEGIN IMMEDIATE: the generations in ``meta`` and
        # the vector change log then move in commit order, and two writers never deadlock on
        # those rows (a chunk's delete takes them in one order, a flush in the other). A
        # crashed writer's connection closes, and its lock goes with it.
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield

    def _insert_text(self, rows: list[FtsRow]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(
                "UPDATE chunk SET tsv = %s::tsvector, words = %s WHERE id = %s",
                [(*text_vector(row[1:]), row[0]) for row in rows],
            )

    def drop_text(self, chunk_id: int) -> None:
        self.execute("UPDATE chunk SET tsv = NULL, words = 0 WHERE id = ?", (chunk_id,))

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction (REPEATABLE READ: several queries see one state); within a
        write transaction, that one."""
        with self._lock:
            if self._depth:
                yield
                return
            with self.conn.transaction():
                self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield

    def schema_version(self) -> int:
        """The newest migration recorded in the database."""
        with self._lock:
            done = applied(self.conn)
            return done[-1] if done else 0

    def size_bytes(self) -> int:
        """The size of the whole database on the server."""
        return int(self.one("SELECT pg_database_size(current_database())"))

    def vacuum(self) -> None:
        """VACUUM ANALYZE (outside any transaction): dead rows freed, statistics renewed."""
        with self._lock:
            self.conn.execute("VACUUM (ANALYZE)")

    def checkpoint(self) -> None:
        """After bulk work: fresh planner statistics for the tables it changed much (a tenth
        of their rows, as autovacuum would, but now, so that the first searches are not
        planned on the figures of a table half filled). After a reindex of the tldr pages,
        with warm caches, BM25 searches took p50 38.0 ms, 34.4 once analysed (p95 57.9 and
        51.0): autovacuum had not come round yet."""
        with self._lock:
            # this connection's counts of changed rows reach the statistics views when it
            # flushes them: at the end of this statement
            self.conn.execute("SELECT pg_stat_force_next_flush()")
            stale = self.conn.execute(
                "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() "
                "AND relname = ANY(%s) AND n_mod_since_analyze > 50 + n_live_tup / 10",
                (list(BULK_TABLES),),
            ).fetchall()
            for (table,) in stale:
                # a role that does not own the table gets a warning, not an error
                self.conn.execute(f'ANALYZE "{table}"')


def has_team(url: str) -> bool:
    """Whether the database holds the team's schema (read only: nothing is created)."""
    conn = connect(url)
    try:
        return bool(applied(conn, TEAM))
    finally:
        conn.close()


class PgTeamDatabase(PgDatabase):
    """A connection to the team's tables (users, tokens, the write log) in the schema
    ``brainmap_team`` of the index's database: apart from the index, which may be dropped and
    rebuilt, and with transactions of their own (a token's use never waits for a reindex)."""

    latest_schema = TEAM.latest
    rebuild_hint = "the team is no derived data: restore schema brainmap_team from a backup"

    def _prepare(self) -> None:
        migrate(self.conn, self.url, TEAM)
        self.conn.execute("SET search_path TO brainmap_team")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def schema_version(self) -> int:
        with self._lock:
            done = applied(self.conn, TEAM)
            return done[-1] if done else 0


# where each full-text column's words go: its weight, and its first position (a gap between
# columns keeps a phrase from matching across two of them, as in FTS5)
TEXT_WEIGHTS = ("A", "B", "C", "D")  # title, heading, body, other forms
COLUMN_GAP = 8
MAX_POSITION = 16383  # tsvector's largest position


MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses longer words in a tsvector or tsquery


def clip(word: str) -> str:
    """A word as the index keeps it: at most ``MAX_LEXEME_BYTES`` of UTF-8 (a longer one,
    cut the same way in the index and in a query, still matches itself)."""
    data = word.encode("utf-8")
    return (
        word if len(data) <= MAX_LEXEME_BYTES else data[:MAX_LEXEME_BYTES].decode("utf-8", "ignore")
    )


def text_vector(columns: Sequence[str]) -> tuple[str, int]:
    """The ``tsvector`` literal of a chunk's full-text columns (title, heading, body, other
    forms) and its number of words: the tokens FTS5's unicode61 would make
    (:func:`brainmap.analysis.split_tokens`, folded), each at its position with its column's
    weight."""
    from brainmap.analysis import fold, split_tokens

    positions: dict[str, list[str]] = {}
    position = 0
    words = 0
    for weight, text in zip(TEXT_WEIGHTS, columns, strict=False):
        for token in split_tokens(text or ""):
            word = clip(fold(token))
            if not word:  # only combining marks (a Lao tone mark alone): nothing to match
                continue
            position += 1
            words += 1
            at = min(position, MAX_POSITION)
            positions.setdefault(word, []).append(f"{at}{weight}")
        position += COLUMN_GAP
    literal = " ".join(
        "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "':" + ",".join(at)
        for lexeme, at in positions.items()
    )
    return literal, words


_TOKEN = re.compile(r"'(?:[^']|'')*'|\?|(?<!:):(?![:=])([A-Za-z_]\w*)|%")
_JSON_FIELD = re.compile(r"json_extract\(([\w.]+), '\$\.(\w+)'\)")


@functools.lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """SQLite's SQL of the repositories in PostgreSQL's terms: ``?`` and ``:name``
    parameters as psycopg's, ``%`` escaped, ``json_extract(col, '$.key')`` as
    ``(col::jsonb ->> 'key')``. String literals are kept as they are."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        if token.startswith("'"):
            return token.replace("%", "%%")
        return f"%({match.group(1)})s"

    return _TOKEN.sub(one, _JSON_FIELD.sub(r"(\1::jsonb ->> '\2')", sql))


@dataclass
class ServerReport:
    """What ``brainmap doctor`` says about a PostgreSQL store."""

    url: str
    server_version: str
    server_version_num: int
    vector_version: str | None  # installed in the database; None: not installed
    vector_available: str | None  # the version the server could install
    migrations: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def server_report(url: str) -> ServerReport:
    """Check a PostgreSQL store without changing it: the server's version, the ``vector``
    extension, the migrations applied against those this brainmap knows."""
    conn = connect(url)
    try:
        version, number = _version(conn)
        installed = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        available = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        report = ServerReport(
            redact(url), version, number, installed[0] if installed else None,
            available[0] if available else None, applied(conn),
        )  # fmt: skip
    finally:
        conn.close()
    report.problems = _problems(report)
    return report


def _problems(report: ServerReport) -> list[str]:
    problems = []
    if report.server_version_num < MIN_SERVER_VERSION:
        problems.append(
            f"PostgreSQL {report.server_version} is too old: brainmap needs "
            f"{MIN_SERVER_VERSION // 10000} or newer"
        )
    vector = report.vector_version or report.vector_available
    if vector is None:
        problems.append("the server has no pgvector ('vector' extension): install pgvector")
    elif _parse(vector) < MIN_VECTOR_VERSION:
        wanted = ".".join(map(str, MIN_VECTOR_VERSION))
        problems.append(f"pgvector {vector} is too old: brainmap needs {wanted} (HNSW)")
    newer = [v for v in report.migrations if v > SCHEMA_VERSION]
    if newer:
        problems.append(
            f"the database is at schema version {newer[-1]}, newer than this brainmap's "
            f"{SCHEMA_VERSION}: upgrade brainmap"
        )
    elif report.migrations and report.migrations[-1] < SCHEMA_VERSION:
        problems.append(
            f"the database is at schema version {report.migrations[-1]} of {SCHEMA_VERSION}: "
            "the next brainmap that opens it migrates it"
        )
    return problems


def _check_server(conn: psycopg.Connection[Any], url: str) -> None:
    """Refuse, before migrating, a server brainmap cannot use."""
    version, number = _version(conn)
    if number < MIN_SERVER_VERSION:
        raise UserError(
            f"PostgreSQL {version} at {redact(url)} is too old: brainmap needs "
            f"{MIN_SERVER_VERSION // 10000} or newer"
        )
    found = conn.execute(
        "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
        "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector'))"
    ).fetchone()
    if not found or found[0] is None:
        raise UserError(
            f"the PostgreSQL server at {redact(url)} has no pgvector ('vector' extension)",
            hint="install pgvector on the server (https://github.com/pgvector/pgvector)",
        )


def _version(conn: psycopg.Connection[Any]) -> tuple[str, int]:
    row = conn.execute(
        "SELECT current_setting('server_version'), current_setting('server_version_num')::int"
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def _parse(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)
