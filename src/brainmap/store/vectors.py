"""Chunk vectors in ``brain.db`` (the cache that outlives the index is ``VectorCache``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from brainmap.store.database import BaseDatabase
from brainmap.store.records import PendingChunk, VectorRows, chunk_scope
from brainmap.store.schema import batched, marks

if TYPE_CHECKING:
    import numpy as np

    from brainmap.progress import ProgressFn


class VectorRepo:
    """The vectors of chunks, per embedding model; a change log lets searchers catch up."""

    def __init__(self, db: BaseDatabase) -> None:
        self.db = db

    # how a vector is stored: SQLite keeps its float32 bytes as they are
    VEC = "vec"  # the column as selected
    PARTS = "?"  # a window vectors' parameter as inserted

    def _stored(self, vector: bytes) -> Any:
        return vector

    def _read(self, value: Any) -> bytes:
        return bytes(value)

    def _joined(self, rows: Sequence[tuple[Any, ...]]) -> bytes:
        """The vectors of rows (chunk id, library id, vector) as one run of bytes."""
        return b"".join(r[2] for r in rows)

    def pending_chunks(
        self,
        model: str,
        library_ids: Sequence[int] | None,
        limit: int,
        after: int | None = None,
        entry_ids: Sequence[str] | None = None,
    ) -> list[PendingChunk]:
        """Chunks with no vector for ``model`` (of these libraries / entries when given), in
        id order, ids greater than ``after`` only."""
        where, params = chunk_scope(library_ids, entry_ids)
        return self.db.records(
            PendingChunk,
            "SELECT c.id, e.library_id, c.embed_hash, e.title, e.aliases, c.heading, c.text "
            "FROM chunk c JOIN entry e ON e.id = c.entry_id "
            "LEFT JOIN chunk_vec v ON v.chunk_id = c.id AND v.model = ? "
            f"WHERE v.chunk_id IS NULL{where} AND c.id > ? ORDER BY c.id LIMIT ?",
            (model, *params, -(2**63) if after is None else after, max(limit, 1)),
            json_columns=("aliases",),
        )

    def pending_count(
        self,
        model: str,
        library_ids: Sequence[int] | None = None,
        entry_ids: Sequence[str] | None = None,
    ) -> int:
        where, params = chunk_scope(library_ids, entry_ids)
        return int(
            self.db.one(
                "SELECT count(*) FROM chunk c JOIN entry e ON e.id = c.entry_id "
                "LEFT JOIN chunk_vec v ON v.chunk_id = c.id AND v.model = ? "
                f"WHERE v.chunk_id IS NULL{where}",
                [model, *params],
            )
        )

    def put(
        self,
        model: str,
        rows: Sequence[tuple[int, int, bytes]],
        parts: Mapping[int, bytes] | None = None,
    ) -> None:
        """Store ``(chunk_id, library_id, vector bytes)`` for ``model``, replacing older ones;
        ``parts`` are the vectors of a chunk's windows (float32 bytes one after another), for
        the chunks that have them."""
        parts = parts or {}
        with self.db.write():
            self.db.executemany("DELETE FROM chunk_vec WHERE chunk_id = ?", [(r[0],) for r in rows])
            self.db.executemany(
                "INSERT INTO chunk_vec(chunk_id, library_id, model, vec, parts) "
                f"SELECT ?, ?, ?, ?, {self.PARTS} WHERE EXISTS (SELECT 1 FROM chunk WHERE id = ?)",
                [
                    (cid, lib, model, self._stored(vec), parts.get(cid), cid)
                    for cid, lib, vec in rows
                ],
            )

    def generation(self) -> int:
        """A counter that changes whenever any vector is added or removed."""
        return int(self.db.one("SELECT value FROM meta WHERE key = 'vec_gen'"))

    def load(self, model: str) -> VectorRows:
        """All vectors of ``model``, as of the generation they come with."""
        with self.db.reading():
            generation = self.generation()
            rows = self.db.rows(
                f"SELECT chunk_id, library_id, {self.VEC}, parts FROM chunk_vec WHERE model = ? "
                "ORDER BY chunk_id",
                (model,),
            )
        return self._vector_rows(generation, rows)

    def changes(self, model: str, since: int, limit: int) -> VectorRows | None:
        """The vectors of ``model`` added or removed after generation ``since``: the chunks
        touched and the vectors those of them have now. None when the change log no longer
        reaches back to ``since`` (or the index is older than it: rebuilt), or when more than
        ``limit`` changes were made since (reading all vectors is then about as fast)."""
        with self.db.reading():
            generation = self.generation()
            pruned = int(self.db.one("SELECT value FROM meta WHERE key = 'vec_pruned'") or 0)
            if since < pruned or generation < since or generation - since > limit:
                return None
            touched = [
                int(r[0])
                for r in self.db.rows(
                    "SELECT DISTINCT chunk_id FROM vec_change WHERE seq > ? AND model = ? "
                    "ORDER BY chunk_id",
                    (since, model),
                )
            ]
            rows: list[tuple[Any, ...]] = []
            for part in batched(touched):
                rows += self.db.rows(
                    f"SELECT chunk_id, library_id, {self.VEC}, parts FROM chunk_vec "
                    f"WHERE model = ? AND chunk_id IN ({marks(len(part))}) ORDER BY chunk_id",
                    [model, *part],
                )
        return self._vector_rows(generation, rows, since, touched)

    def _vector_rows(
        self,
        generation: int,
        rows: Sequence[tuple[Any, ...]],
        since: int | None = None,
        touched: list[int] | None = None,
    ) -> VectorRows:
        """Rows ``(chunk id, library id, vector, parts)`` as :class:`VectorRows`: a chunk's
        vector, then those of its windows, each a row under the chunk's id."""
        whole = self._joined(rows)
        ids = [r[0] for r in rows]
        libraries = [r[1] for r in rows]
        if any(r[3] for r in rows):
            size = len(whole) // len(rows)  # bytes of one vector
            pieces: list[bytes] = []
            ids, libraries = [], []
            for i, (cid, lib, _, parts) in enumerate(rows):
                count = 1 + (len(parts) // size if parts else 0)
                pieces.append(whole[i * size : (i + 1) * size])
                if parts:
                    pieces.append(bytes(parts)[: (count - 1) * size])
                ids += [cid] * count
                libraries += [lib] * count
            whole = b"".join(pieces)
        return VectorRows(generation, ids, libraries, whole, since, touched or [])

    def count(self, model: str) -> int:
        """How many chunk vectors ``model`` has."""
        return int(self.db.one("SELECT count(*) FROM chunk_vec WHERE model = ?", (model,)))

    # an approximate nearest-neighbour index in the database itself: PostgreSQL's only
    # (brain.db's vectors are searched exactly in memory, brainmap.vectorindex)

    def ann_dim(self, model: str) -> int | None:
        """The dimension of ``model``'s ANN index, when there is a usable one."""
        return None

    def ensure_ann(
        self, model: str, at_least: int, progress: ProgressFn | None = None
    ) -> str | None:
        """Give ``model`` an ANN index once it has ``at_least`` vectors: None when it has one,
        needs none yet, or another process builds it; else why it has none."""
        return None

    def ann_nearest(
        self,
        model: str,
        dim: int,
        query: np.ndarray,
        k: int,
        library_ids: Sequence[int] | None,
        allowed: np.ndarray | None,
        excluded: np.ndarray | None,
    ) -> list[tuple[int, float]]:
        """The ``k`` chunks nearest ``query`` by the ANN index (see :meth:`ann_dim`)."""
        raise NotImplementedError(f"{self.db.location} has no ANN index")

    def models(self) -> dict[str, int]:
        return dict(self.db.rows("SELECT model, count(*) FROM chunk_vec GROUP BY model"))

    def delete_except(self, model: str) -> int:
        with self.db.write():
            return self.db.execute("DELETE FROM chunk_vec WHERE model != ?", (model,))

    def embed_hashes(self) -> set[str]:
        return {r[0] for r in self.db.rows("SELECT DISTINCT embed_hash FROM chunk")}

    def windowed_chunks(self, model: str) -> list[PendingChunk]:
        """The chunks whose vectors of ``model`` include their windows', with what their
        embedding texts need."""
        return self.db.records(
            PendingChunk,
            "SELECT c.id, e.library_id, c.embed_hash, e.title, e.aliases, c.heading, c.text "
            "FROM chunk c JOIN entry e ON e.id = c.entry_id "
            "JOIN chunk_vec v ON v.chunk_id = c.id AND v.model = ? "
            "WHERE v.parts IS NOT NULL ORDER BY c.id",
            (model,),
            json_columns=("aliases",),
        )

    def of_library(self, library_id: int, model: str) -> list[bytes]:
        """Every chunk vector of one library and model."""
        rows = self.db.rows(
            f"SELECT {self.VEC} FROM chunk_vec WHERE library_id = ? AND model = ?",
            (library_id, model),
        )
        return [self._read(r[0]) for r in rows]

    def counts(self, model: str, library_id: int | None = None) -> dict[str, int]:
        """Library name -> how many chunk vectors of this model it has (one library's only,
        when given)."""
        only = "" if library_id is None else " AND v.library_id = ?"
        rows = self.db.rows(
            "SELECT l.name, count(*) FROM chunk_vec v JOIN library l ON l.id = v.library_id "
            f"WHERE v.model = ?{only} GROUP BY l.id",
            (model,) if library_id is None else (model, library_id),
        )
        return {str(name): int(n) for name, n in rows}
