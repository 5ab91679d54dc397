"""The index in a PostgreSQL database: :class:`~brainmap.store.Store` with the PostgreSQL
database object and repositories, and its own whole-database checks."""

from __future__ import annotations

from typing import Any

from brainmap.store.facts import FactRepo
from brainmap.store.graph import GraphRepo
from brainmap.store.index import Store
from brainmap.store.libmap import MapRepo
from brainmap.store.postgres.database import PgDatabase, is_postgres_url
from brainmap.store.postgres.repos import PgEntryRepo, PgVectorRepo

__all__ = ["PgStore", "is_postgres_url"]


class PgStore(Store):
    """The index in the PostgreSQL database at ``url`` (migrated when opened)."""

    def __init__(self, url: str) -> None:
        self.db = PgDatabase(url)
        self.graph = GraphRepo(self.db)
        self.facts = FactRepo(self.db, self.graph)
        self.entries = PgEntryRepo(self.db, self.graph, self.facts)
        self.vectors = PgVectorRepo(self.db)
        self.maps = MapRepo(self.db)

    def integrity(self) -> list[str]:
        """Problems the database can have that PostgreSQL itself does not check: chunks
        without their full text (empty when healthy)."""
        missing = int(self.db.one("SELECT count(*) FROM chunk WHERE tsv IS NULL"))
        return [f"full-text index: {missing} chunk(s) without their text"] if missing else []

    def orphans(self) -> dict[str, int]:
        """Rows whose parent is gone (foreign keys and triggers keep all of these at 0)."""
        return {
            "chunks": int(self.db.one("SELECT count(*) FROM chunk WHERE entry_id NOT IN (SELECT id FROM entry)")),
            "fts": 0,  # the full text is a column of its chunk
            "vectors": int(self.db.one("SELECT count(*) FROM chunk_vec WHERE chunk_id NOT IN (SELECT id FROM chunk)")),
            "missing_fts": int(self.db.one("SELECT count(*) FROM chunk WHERE tsv IS NULL")),
            **{f"graph_{k}": v for k, v in self.graph.orphans().items()},
        }  # fmt: skip

    def remove_orphans(self) -> int:
        """Delete the rows :meth:`orphans` counts (but chunks without text, which the next
        reindex writes again); return how many went."""
        with self.db.write():
            total = sum(
                self.db.execute(sql)
                for sql in (
                    "DELETE FROM chunk WHERE entry_id NOT IN (SELECT id FROM entry)",
                    "DELETE FROM chunk_vec WHERE chunk_id NOT IN (SELECT id FROM chunk)",
                    "DELETE FROM entry WHERE library_id NOT IN (SELECT id FROM library)",
                )
            )
            total += self.graph.remove_orphans()
        return total

    def vacuum(self) -> None:
        """VACUUM ANALYZE: free dead rows and refresh the planner's statistics."""
        self.db.vacuum()

    def _text_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        return {
            "fts": self.db.rows("SELECT id FROM chunk WHERE tsv IS NOT NULL ORDER BY id"),
            "fts_terms": self.db.rows("SELECT id, tsv::text, words FROM chunk ORDER BY id"),
            "vectors": self.db.rows(
                "SELECT chunk_id, model, vec::text, parts FROM chunk_vec ORDER BY chunk_id"
            ),
        }
