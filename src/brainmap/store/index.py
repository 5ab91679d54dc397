"""The index in ``brain.db``: one database object and its repositories by kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from brainmap.store.database import BaseDatabase, Database
from brainmap.store.entries import EntryRepo
from brainmap.store.facts import FactRepo
from brainmap.store.graph import GraphRepo
from brainmap.store.libmap import MapRepo
from brainmap.store.schema import BUSY_TIMEOUT_MS
from brainmap.store.vectors import VectorRepo


class Store:
    """The index in ``brain.db``: ``db`` (the connection, ``write()`` transactions) and the
    repositories over it, ``entries``, ``vectors``, ``graph``, ``facts`` and ``maps``; what
    reads or checks the whole database is here."""

    db: BaseDatabase

    def __init__(self, path: Path | str, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.db = Database(path, busy_timeout_ms)
        self.graph = GraphRepo(self.db)
        self.facts = FactRepo(self.db, self.graph)
        self.entries = EntryRepo(self.db, self.graph, self.facts)
        self.vectors = VectorRepo(self.db)
        self.maps = MapRepo(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counts(self) -> dict[str, int]:
        """Rows of each kind (libraries, entries, chunks, vectors, skipped files, graph)."""
        return {
            "libraries": int(self.db.one("SELECT count(*) FROM library")),
            "entries": int(self.db.one("SELECT count(*) FROM entry")),
            "chunks": self.entries.chunk_count(),
            "vectors": int(self.db.one("SELECT count(*) FROM chunk_vec")),
            "skipped": int(self.db.one("SELECT count(*) FROM skipped")),
            **self.graph.counts(),
        }

    def integrity(self) -> list[str]:
        """Problems found by SQLite's and FTS5's integrity checks (empty when healthy).

        Raises ``apsw.BusyError`` when another process holds the write lock too long: busy
        is not damage.
        """
        problems = [r[0] for r in self.db.rows("PRAGMA quick_check") if r[0] != "ok"]
        try:
            with self.db.write():
                self.db.execute("INSERT INTO chunk_fts(chunk_fts) VALUES ('integrity-check')")
        except apsw.BusyError:
            raise
        except apsw.Error as exc:
            problems.append(f"full-text index: {exc}")
        return problems

    def orphans(self) -> dict[str, int]:
        """Rows whose parent is gone (the schema's cascades should keep all of these at 0)."""
        return {
            "chunks": int(self.db.one("SELECT count(*) FROM chunk WHERE entry_id NOT IN (SELECT id FROM entry)")),
            "fts": int(self.db.one("SELECT count(*) FROM chunk_fts WHERE rowid NOT IN (SELECT id FROM chunk)")),
            "vectors": int(self.db.one("SELECT count(*) FROM chunk_vec WHERE chunk_id NOT IN (SELECT id FROM chunk)")),
            "missing_fts": int(self.db.one("SELECT count(*) FROM chunk WHERE id NOT IN (SELECT rowid FROM chunk_fts)")),
            **{f"graph_{k}": v for k, v in self.graph.orphans().items()},
        }  # fmt: skip

    def remove_orphans(self) -> int:
        """Delete the rows :meth:`orphans` counts; return how many went."""
        with self.db.write():
            self.db.flush_text()
            total = 0
            for sql in (
                "DELETE FROM chunk WHERE entry_id NOT IN (SELECT id FROM entry)",
                "DELETE FROM chunk_fts WHERE rowid NOT IN (SELECT id FROM chunk)",
                "DELETE FROM chunk_vec WHERE chunk_id NOT IN (SELECT id FROM chunk)",
                "DELETE FROM entry WHERE library_id NOT IN (SELECT id FROM library)",
            ):
                deleted = self.db.execute(sql)
                total += deleted
                if sql.startswith("DELETE FROM chunk_fts"):  # chunks count by chunk_text_ad
                    self.db.text_changed(deleted)
            total += self.graph.remove_orphans()
        return total

    def vacuum(self) -> None:
        """Merge the full-text index, then rewrite the file without its free pages."""
        self.entries.compact_text()
        self.db.vacuum()

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every derived row in a comparable form (used to check rebuilds are identical)."""
        return {
            "libraries": self.db.rows("SELECT name, path, scope FROM library ORDER BY name"),
            "entries": self.db.rows(
                "SELECT e.id, l.name, e.path, e.title, e.type, e.tags, e.content_hash, e.meta, "
                "e.slug, e.blob, e.source_rev "
                "FROM entry e JOIN library l ON l.id = e.library_id ORDER BY e.id"
            ),
            "chunks": self.db.rows(
                "SELECT id, entry_id, ord, heading, line_start, line_end, text, embed_hash "
                "FROM chunk ORDER BY id"
            ),
            **self._text_snapshot(),
            **self.graph.snapshot(),
        }

    def _text_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """The full-text rows and the vectors, as :meth:`snapshot` compares them."""
        return {
            "fts": self.db.rows("SELECT rowid FROM chunk_fts ORDER BY rowid"),
            "fts_terms": self.db.rows("SELECT term, doc, cnt FROM chunk_vocab ORDER BY term"),
            "vectors": self.db.rows(
                "SELECT chunk_id, model, vec, parts FROM chunk_vec ORDER BY chunk_id"
            ),
        }
