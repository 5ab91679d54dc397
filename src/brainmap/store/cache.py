"""The embedding cache in ``vectors.db``: it survives a rebuild of the index."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from brainmap.store.schema import (
    CACHE_SCHEMA,
    CACHE_SCHEMA_VERSION,
    batched,
    connect,
    immediate,
    marks,
    user_version,
    value,
)


class VectorCache:
    """Embeddings keyed by (model id, sha256 of the text), in ``vectors.db``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.conn = connect(self.path)
        if user_version(self.conn) != CACHE_SCHEMA_VERSION:
            with immediate(self.conn):
                self.conn.execute(CACHE_SCHEMA)
                self.conn.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for part in batched(list(hashes)):
            rows = self.conn.execute(
                f"SELECT hash, vec FROM vec WHERE model = ? AND hash IN ({marks(len(part))})",
                (model, *part),
            ).fetchall()
            out.update((str(h), bytes(v)) for h, v in rows)  # type: ignore[arg-type]
        return out

    def put_many(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        with immediate(self.conn):
            self.conn.executemany(
                "INSERT OR REPLACE INTO vec(model, hash, vec) VALUES (?, ?, ?)",
                [(model, h, v) for h, v in items],
            )

    def count(self) -> int:
        return int(value(self.conn, "SELECT count(*) FROM vec"))

    def prune(self, model: str, keep: set[str]) -> int:
        """Delete cached vectors of other models and of texts no chunk uses any more."""
        with immediate(self.conn):
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep(hash TEXT PRIMARY KEY)")
            self.conn.execute("DELETE FROM temp.keep")
            self.conn.executemany(
                "INSERT OR IGNORE INTO temp.keep VALUES (?)", [(h,) for h in keep]
            )
            self.conn.execute(
                "DELETE FROM vec WHERE model != ? OR hash NOT IN (SELECT hash FROM temp.keep)",
                (model,),
            )
            removed = int(self.conn.changes())
            self.conn.execute("DROP TABLE temp.keep")
        return removed

    def vacuum(self) -> None:
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
