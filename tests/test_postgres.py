"""The PostgreSQL backend on a real server (tests/pg_server.py): connections, migrations under
the advisory lock, the schema's triggers, and what doctor reports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from brainmap.errors import UserError
from brainmap.store.postgres import (
    MIGRATIONS,
    SCHEMA_VERSION,
    PgDatabase,
    is_postgres_url,
    redact,
    server_report,
)
from conftest import free_port

OPENERS = 6

OPEN_AT_ONCE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from brainmap.store.postgres import PgDatabase
    print("ready", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.001)
    db = PgDatabase(sys.argv[1])
    print(db.schema_version())
    db.close()
    """
)


def test_processes_opening_a_new_database_at_once_migrate_it_once(
    pg_url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    command = [sys.executable, "-c", OPEN_AT_ONCE, pg_url, str(go)]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(OPENERS)
    ]
    for proc in procs:  # every one imported, waiting: then all connect at once
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * OPENERS, [err for _, err in results]
    assert {out.strip() for out, _ in results} == {str(SCHEMA_VERSION)}
    with psycopg.connect(pg_url) as conn:
        ledger = conn.execute("SELECT version, applied_by FROM brainmap_migration").fetchall()
        tables = {
            row[0]
            for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    assert [version for version, _ in ledger] == sorted(MIGRATIONS)
    assert ":" in ledger[0][1]  # host:pid of the process that applied it
    assert tables >= {"library", "entry", "chunk", "chunk_vec", "edge", "observation", "map_block"}


def test_reopening_applies_nothing_and_a_newer_database_is_refused(pg_url: str) -> None:
    from brainmap.store.postgres import migrate

    PgDatabase(pg_url).close()
    db = PgDatabase(pg_url)
    assert migrate(db.conn, pg_url) == []
    db.conn.execute(
        "INSERT INTO brainmap_migration(version, applied_by) VALUES (%s, 'later')",
        (SCHEMA_VERSION + 1,),
    )
    db.close()
    with pytest.raises(UserError) as refused:
        PgDatabase(pg_url)
    assert f"schema version {SCHEMA_VERSION + 1}" in refused.value.message
    assert "upgrade brainmap" in (refused.value.hint or "")
    report = server_report(pg_url)
    assert any("newer than this brainmap" in p for p in report.problems)


def test_a_server_that_does_not_answer_is_a_user_error_without_the_password() -> None:
    url = f"postgresql://team:s3cret-pass@127.0.0.1:{free_port()}/brain"
    with pytest.raises(UserError) as failed:
        PgDatabase(url)
    assert "cannot connect to PostgreSQL" in failed.value.message
    assert "s3cret-pass" not in failed.value.message
    assert "team:***@127.0.0.1" in failed.value.message
    with pytest.raises(UserError):
        PgDatabase("postgresql://127.0.0.1:notaport/x")


def test_redact_and_url_recognition() -> None:
    assert redact("postgresql://u:p@h:5432/db?sslmode=require") == (
        "postgresql://u:***@h:5432/db?sslmode=require"
    )
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert "hunter2" not in redact("postgresql://x@127.0.0.1:1/x?password=hunter2")
    assert "hunter2" not in redact("host=h password=hunter2 dbname=d")
    assert redact("postgresql://a:b@[::1") == "(the configured URL)"  # unparseable: not shown
    assert is_postgres_url("postgres://h/db") and is_postgres_url("postgresql://h/db")
    assert not is_postgres_url("/home/me/.brainmap/brain.db")


def test_doctor_report_before_and_after_migrating(pg_url: str) -> None:
    before = server_report(pg_url)
    assert before.server_version_num >= 130000
    assert before.vector_version is None and before.vector_available  # not yet installed
    assert before.migrations == [] and before.problems == []
    PgDatabase(pg_url).close()
    after = server_report(pg_url)
    assert after.vector_version == before.vector_available
    assert after.migrations == sorted(MIGRATIONS) and after.problems == []


def test_write_transactions_nest_and_roll_back_whole(pg_url: str) -> None:
    db = PgDatabase(pg_url)
    add = "INSERT INTO library(name, path, scope) VALUES (?, '/x', 'global')"
    with db.write():
        db.rows(add, ("one",))
        with db.write():
            db.rows(add, ("two",))

    def crash() -> None:
        with db.write():
            db.rows(add, ("three",))
            with db.write():
                db.rows(add, ("four",))
            raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        crash()
    assert [r[0] for r in db.rows("SELECT name FROM library ORDER BY name")] == ["one", "two"]
    with db.reading():
        assert db.one("SELECT count(*) FROM library") == 2
    db.close()


def test_triggers_log_vectors_count_text_and_drop_orphan_nodes(pg_url: str) -> None:
    db = PgDatabase(pg_url)
    with db.write():
        library = db.one("INSERT INTO library(name, path, scope) VALUES ('l', '/l', 'global') RETURNING id")  # fmt: skip
        db.rows(
            "INSERT INTO entry(id, library_id, path, title, type, updated, content_hash, "
            "mtime_ns, size, indexed_ns, observed_at) "
            "VALUES ('e1', ?, 'a.md', 'A', 'note', 'now', 'h', 0, 0, 0, 'now')",
            (library,),
        )
        chunks = [
            db.one(
                "INSERT INTO chunk(entry_id, ord, heading, line_start, line_end, text, embed_hash) "
                "VALUES ('e1', ?, '', 1, 1, 't', 'h') RETURNING id",
                (ord_,),
            )
            for ord_ in range(3)
        ]
        for chunk in chunks:
            db.rows(
                "INSERT INTO chunk_vec(chunk_id, library_id, model, vec) VALUES (?, ?, 'm', ?::vector)",
                (chunk, library, "[1,0,0]"),
            )  # fmt: skip
        db.rows("INSERT INTO node(key, kind, label) VALUES ('entity:a', 'entity', 'a'), ('entity:b', 'entity', 'b')")  # fmt: skip
        db.rows(
            "INSERT INTO edge(subject, predicate, object, library_id, entry_id) "
            "VALUES ('entity:a', 'uses', 'entity:b', ?, 'e1')",
            (library,),
        )
    assert db.one("SELECT value FROM meta WHERE key = 'vec_gen'") == 3
    with db.write():
        db.rows("DELETE FROM chunk WHERE id = ?", (chunks[0],))
    assert db.one("SELECT value FROM meta WHERE key = 'text_gen'") == 1
    assert db.rows("SELECT seq, chunk_id FROM vec_change ORDER BY seq") == [
        (1, chunks[0]), (2, chunks[1]), (3, chunks[2]), (4, chunks[0])
    ]  # fmt: skip
    with db.write():
        db.rows("DELETE FROM entry WHERE id = 'e1'")  # its chunks, vectors and edges go too
    assert db.one("SELECT count(*) FROM node") == 0
    assert db.one("SELECT value FROM meta WHERE key = 'vec_gen'") == 6
    assert db.one("SELECT value FROM meta WHERE key = 'text_gen'") == 3
    db.close()


def test_a_write_waits_for_another_writer_and_both_land(pg_url: str) -> None:
    import threading
    import time

    first, second = PgDatabase(pg_url), PgDatabase(pg_url)
    add = "INSERT INTO library(name, path, scope) VALUES (?, '/x', 'global')"
    order: list[str] = []
    inside = threading.Event()

    def hold() -> None:
        with first.write():
            first.rows(add, ("first",))
            inside.set()
            time.sleep(0.5)
            order.append("first commits")

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(10)
    with second.write():  # waits for the first writer's lock
        order.append("second writes")
        second.rows(add, ("second",))
    holder.join()
    assert order == ["first commits", "second writes"]
    assert second.one("SELECT count(*) FROM library") == 2
    first.close()
    second.close()


def test_a_role_that_may_only_read_and_write_rows_opens_a_migrated_database(
    pg_url: str,
) -> None:
    """Team members need not own the schema: once migrated, the database is only read at
    open; before that, such a role is told who must connect first."""
    PgDatabase(pg_url).close()
    member = pg_url.replace("postgresql://postgres@", "postgresql://member@")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS member")
        conn.execute("CREATE ROLE member LOGIN")
        conn.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO member"
        )
        conn.execute("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO member")
    db = PgDatabase(member)
    with db.write():
        db.rows("INSERT INTO library(name, path, scope) VALUES ('team', '/t', 'global')")
    assert db.one("SELECT count(*) FROM library") == 1
    db.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM brainmap_migration")  # as if the schema were not there yet
    with pytest.raises(UserError) as refused:
        PgDatabase(member)
    assert "may not create" in refused.value.message and "owner" in (refused.value.hint or "")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("REASSIGN OWNED BY member TO postgres")
        conn.execute("DROP OWNED BY member")
        conn.execute("DROP ROLE member")


def test_bulk_indexing_leaves_fresh_planner_statistics(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Autovacuum analyses a table some time after it changed: a reindex does it at once for
    the tables it changed much, so that the first searches after it are planned on the
    statistics of the full table."""
    from brainmap import ops

    monkeypatch.setenv("BRAINMAP_DB", pg_url)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(300):
        (docs / f"note-{i}.md").write_text(f"# Note {i}\n\nWord{i} and the shared words.\n")
    brain = ops.Brain(tmp_path / "home")
    ops.library_add(brain, ops.LibraryAddInput(name="docs", path=str(docs)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        analysed = dict(
            conn.execute(
                "SELECT relname, last_analyze IS NOT NULL FROM pg_stat_user_tables "
                "WHERE relname IN ('chunk', 'entry')"
            ).fetchall()
        )
    assert analysed == {"chunk": True, "entry": True}  # by brainmap, not (later) autovacuum
    brain.close()


def _exact_top(brain: Any, query: str, k: int, library_ids: set[int] | None = None) -> list[int]:
    """The chunk ids nearest ``query`` by an exact scan of every stored vector."""
    import numpy as np

    model = brain.searcher.model
    rows = brain.store.vectors.load(model)
    matrix = np.frombuffer(rows.vectors, dtype=np.float32).reshape(len(rows.ids), -1)
    scores = matrix @ brain.searcher.embedder.query(query)
    order = [
        i for i in np.argsort(-scores) if library_ids is None or rows.library_ids[i] in library_ids
    ]
    return [rows.ids[i] for i in order[:k]]


def _scans(brain: Any, name: str) -> dict[str, int]:
    """How often the HNSW index and the vectors' table (any way) were read so far (the
    brain's own connection's reads included)."""
    db = brain.store.db
    db.fetch("SELECT pg_stat_force_next_flush()")
    db.fetch("SELECT pg_stat_clear_snapshot()")
    hnsw = db.one("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = ?", (name,))
    table = db.one(
        "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
        "WHERE relname = 'chunk_vec'"
    )
    return {"hnsw": int(hnsw), "table": int(table)}


def test_a_large_index_searches_its_vectors_with_hnsw_not_in_memory(
    pg_url: str, home: Path, library: Path, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``[store] hnsw_from`` vectors on, a reindex builds an HNSW index and searches go
    to it: nothing is held in memory, the nearest are those of an exact scan, filters hold
    (when they leave the index's candidates short, exactly), and a save is found at once."""
    import shutil

    from brainmap import ops
    from brainmap.store.postgres.repos import ANN_BUILD_LOCK, PgVectorRepo, ann_index_name

    monkeypatch.setenv("BRAINMAP_DB", pg_url)
    home.mkdir(parents=True)
    shutil.copyfile(warm_cache, home / "vectors.db")
    # few candidates: the index's own answers are used, not an exact search of the table
    (home / "config.toml").write_text("[store]\nhnsw_from = 5\n[search]\ncandidates = 3\n")
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="example", path=str(library)))
    small = library.parent / "small"
    small.mkdir()
    (small / "kettle.md").write_text("# Descaling a kettle\n\nVinegar and water, boiled.\n")
    ops.library_add(brain, ops.LibraryAddInput(name="small", path=str(small)))
    model = brain.searcher.model
    assert brain.store.vectors.ann_dim(model) is None
    ops.reindex(brain, ops.ReindexInput())
    assert brain.store.vectors.ann_dim(model) == 384
    name = ann_index_name(model)
    # a table this small is read and sorted (cheaper); what matters is that the index can
    # answer the search's query: its expression and condition match
    brain.store.db.execute("SET enable_seqscan = off")
    brain.store.db.execute("SET enable_sort = off")
    ops.search(brain, ops.SearchInput(query="warm up", mode="vector", limit=3))
    before = _scans(brain, name)
    queries = ("how to undo a git commit", "timeouts in asyncio", "descale the kettle")
    found = {
        q: ops.search(brain, ops.SearchInput(query=q, mode="vector", limit=3)) for q in queries
    }
    after = _scans(brain, name)
    # every search was one scan of the HNSW index and nothing else of the vectors' table
    assert after["hnsw"] - before["hnsw"] == len(queries)
    assert after["table"] - before["table"] == len(queries)
    for query, result in found.items():
        assert [h.chunk_id for h in result.hits] == _exact_top(brain, query, 3)
    assert brain.searcher.vectors.in_store
    assert len(brain.searcher.vectors) == brain.store.vectors.count(model)
    assert len(brain.searcher.vectors.snapshot()[0]) == 0  # no matrix in this process
    brain.store.db.execute("RESET enable_seqscan")
    brain.store.db.execute("RESET enable_sort")
    # one library of one chunk among many: the index's candidates hold too few of it
    small_id = brain.store.entries.library_ids(["small"])["small"]
    only = ops.search(
        brain, ops.SearchInput(query="boiling vinegar", mode="vector", library=["small"], limit=5)
    )
    assert [h.chunk_id for h in only.hits] == _exact_top(brain, "boiling vinegar", 5, {small_id})
    assert [h.library for h in only.hits] == ["small"]

    ops.save(
        brain,
        ops.SaveInput(title="Sourdough starter", body="Feed it flour daily.", library="small"),
    )
    fresh = ops.search(brain, ops.SearchInput(query="feeding a sourdough starter", mode="vector"))
    assert fresh.hits[0].title == "Sourdough starter"

    # an index lost (or a build cut short): doctor says so, and the next reindex builds it
    def vector_check() -> Any:
        return {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}["vector index"]

    assert vector_check().ok and "HNSW index over" in vector_check().detail
    brain.store.db.execute(f"DROP INDEX {name}")
    assert not vector_check().ok and "reindex" in (vector_check().fix or "")
    # another process building it: this one goes on, neither waiting nor building
    with psycopg.connect(pg_url, autocommit=True) as builder:
        builder.execute("SELECT pg_advisory_lock(%s)", (ANN_BUILD_LOCK,))
        assert ops.reindex(brain, ops.ReindexInput()).problems == []
        assert brain.store.vectors.ann_dim(model) is None
    # a role that does not own the tables cannot build it, and is told who can
    member = pg_url.replace("postgresql://postgres@", "postgresql://hnsw_member@")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS hnsw_member")
        conn.execute("CREATE ROLE hnsw_member LOGIN")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO hnsw_member")
    db = PgDatabase(member)
    refused = PgVectorRepo(db).ensure_ann(model, 5)
    db.close()
    assert refused and "owns the tables (postgres)" in refused and "reindex" in refused
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP OWNED BY hnsw_member")
        conn.execute("DROP ROLE hnsw_member")
    ops.reindex(brain, ops.ReindexInput())
    assert vector_check().ok and brain.store.vectors.ann_dim(model) == 384
    brain.close()
