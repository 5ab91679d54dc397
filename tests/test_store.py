"""The store's contracts: PRAGMAs, migrations, write locking, hygiene (RELIABILITY 4, 5, 6, 11, 15)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import pytest

from brainmap import ops, store
from brainmap.errors import UserError
from brainmap.store import SCHEMA_VERSION, Store, VectorCache


def _assert_contract(conn: apsw.Connection) -> None:
    def value(name: str) -> object:
        return conn.execute(f"PRAGMA {name}").fetchall()[0][0]

    assert value("journal_mode") == "wal"
    assert value("foreign_keys") == 1
    assert value("synchronous") == 1
    assert int(value("busy_timeout")) >= 5000  # type: ignore[call-overload]


def test_pragma_contract_on_every_connection(tmp_path: Path) -> None:
    """RELIABILITY 6: the one factory sets every PRAGMA, for the index and the cache."""
    _assert_contract(store.connect(tmp_path / "a.db"))
    s = Store(tmp_path / "brain.db")
    _assert_contract(s.db.conn)
    assert s.db.pragmas() == {"journal_mode": "wal", "foreign_keys": 1, "synchronous": 1,
                           "busy_timeout": store.BUSY_TIMEOUT_MS}  # fmt: skip
    cache = VectorCache(tmp_path / "vectors.db")
    _assert_contract(cache.conn)
    s.close()
    cache.close()


def test_write_waits_for_another_writer(tmp_path: Path) -> None:
    """RELIABILITY 4: while another connection holds a write transaction for ~1 s, our write
    path (BEGIN IMMEDIATE + busy timeout) waits and succeeds."""
    path = tmp_path / "brain.db"
    s = Store(path)
    other = store.connect(path)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO meta(key, value) VALUES ('holder', 1)")
    release = threading.Timer(1.0, lambda: other.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    library_id = s.entries.ensure_library("lib", "/tmp/x", "project")
    waited = time.monotonic() - started
    release.join()
    assert library_id > 0
    assert waited >= 0.8  # it really waited for the other writer
    assert s.entries.library_ids(["lib"]) == {"lib": library_id}
    s.close()
    other.close()


def test_deferred_read_then_write_fails_where_immediate_waits(tmp_path: Path) -> None:
    """Why BEGIN IMMEDIATE: the same read-then-write in a deferred transaction fails at once."""
    path = tmp_path / "brain.db"
    Store(path).close()
    holder, deferred = store.connect(path), store.connect(path)
    holder.execute("BEGIN IMMEDIATE")
    deferred.execute("BEGIN")
    deferred.execute("SELECT count(*) FROM library").fetchall()
    holder.execute("INSERT INTO library(name, path, scope) VALUES ('a', '/a', 'project')")
    holder.execute("COMMIT")
    with pytest.raises(apsw.BusyError):
        deferred.execute("INSERT INTO library(name, path, scope) VALUES ('b', '/b', 'project')")
    deferred.execute("ROLLBACK")


_OPEN_SCRIPT = """
import sys, time
from brainmap.store import Store
while time.time() < float(sys.argv[2]):
    time.sleep(0.001)
s = Store(sys.argv[1])
print(s.db.schema_version())
s.close()
"""


def test_cold_start_race_migrates_once(tmp_path: Path) -> None:
    """RELIABILITY 5: N processes open a brand-new database at the same moment."""
    path = tmp_path / "brain.db"
    start_at = str(time.time() + 1.5)
    procs = [
        subprocess.Popen([sys.executable, "-c", _OPEN_SCRIPT, str(path), start_at],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(12)
    ]  # fmt: skip
    results = [p.communicate(timeout=60) for p in procs]
    failures = [err[-800:] for p, (_, err) in zip(procs, results, strict=True) if p.returncode]
    assert failures == []
    assert all(out.strip() == str(SCHEMA_VERSION) for out, _ in results)
    conn = store.connect(path)
    tables = conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'entry'").fetchall()
    assert tables[0][0] == 1
    assert conn.execute("SELECT value FROM meta WHERE key = 'vec_gen'").fetchall() == [(0,)]


def test_old_schema_is_rebuilt_and_newer_schema_refused(tmp_path: Path) -> None:
    """RELIABILITY 11: an old-layout database is rebuilt automatically; a newer one is refused."""
    path = tmp_path / "brain.db"
    conn = store.connect(path)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("CREATE VIRTUAL TABLE notes_fts USING fts5(body)")
    conn.execute("INSERT INTO notes(body) VALUES ('old layout')")
    conn.close()
    s = Store(path)
    assert s.db.schema_version() == SCHEMA_VERSION
    names = {r[0] for r in s.db.conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    assert "notes" not in names and "notes_fts" not in names and "entry" in names
    s.close()
    conn = store.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UserError, match="newer"):
        Store(path)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    path.write_bytes(b"this is not a database" * 1000)
    with pytest.raises(UserError, match="damaged or not a brainmap database") as info:
        Store(path)
    assert "delete" in (info.value.hint or "")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_open_close_200_times_leaks_nothing(tmp_path: Path) -> None:
    """RELIABILITY 15: no file descriptors or threads left behind."""
    home = tmp_path / "home"
    ops.Brain(home).close()
    for _ in range(5):  # warm up lazy imports and the process-wide query-embedding thread
        with ops.Brain(home) as b:
            b.store.counts()
            b.searcher.search("anything")
    fds, threads = _fds(), threading.active_count()
    for _ in range(200):
        with ops.Brain(home) as b:
            b.store.counts()
            b.searcher.search("anything", mode="bm25")
            b.searcher.search("anything")  # hybrid: the query embedding runs in a thread
    assert _fds() <= fds
    assert threading.active_count() <= threads


def test_connections_of_finished_threads_are_closed(tmp_path: Path) -> None:
    """A server's worker threads come and go; their connections must not pile up."""
    brain = ops.Brain(tmp_path / "home")
    brain.store.counts()
    barrier = threading.Barrier(20)

    def work() -> None:
        brain.store.counts()  # this thread's connection
        barrier.wait()  # 20 threads at once: 20 connections

    counts = []
    for _ in range(4):
        workers = [threading.Thread(target=work) for _ in range(20)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        del workers, w
        gc.collect()
        counts.append((_fds(), len(brain._stores)))
    assert counts[0][1] == 21  # the main thread's and those of 20 concurrent workers
    assert counts[-1] == counts[0]  # later threads reuse them: no growth
    brain.close()


def test_rows_are_mapped_by_column_name(tmp_path: Path) -> None:
    """Rows become dataclasses by column name: in any column order, with JSON decoded, and a
    column that names no field is an error rather than a value in the wrong field."""
    with Store(tmp_path / "brain.db") as s:
        s.entries.ensure_library("lib", "/tmp/x", "project")
        [row] = s.entries.libraries()
        shuffled = "SELECT language, analyzer, indexed_at, scope, path, name, id FROM library"
        assert s.db.records(store.LibraryRow, shuffled) == [row]
        decoded = s.db.records(
            store.NodeRecord,
            """SELECT 'k' AS key, 'entity' AS kind, 'K' AS label, '{"a": 1}' AS props""",
            json_columns=("props",),
        )
        assert decoded == [store.NodeRecord("k", "entity", "K", {"a": 1})]
        assert s.db.records(store.LibraryRow, "SELECT * FROM library WHERE id < 0") == []
        with pytest.raises(TypeError, match="no field for column"):
            s.db.records(store.LibraryRow, "SELECT id, name AS title FROM library")
