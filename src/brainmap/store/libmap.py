"""The library map in ``brain.db``: what a map block is computed from (a library's graph, its
entries) and the blocks themselves."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from brainmap.store.database import BaseDatabase
from brainmap.store.schema import batched, marks

# Node kinds that are structure, not subject matter: they are never a library's top entities
# nor bridges (every library has files and entries; ports are numbers, not topics). Tags count:
# they are often what a library is about.
STRUCTURAL_KINDS = ("entry", "file", "commit", "person", "slug", "port")
_STRUCTURAL = ",".join(f":kind{i}" for i in range(len(STRUCTURAL_KINDS)))
HISTORY_KEPT = 3  # superseded blocks kept per library, newest first

# Every edge of one library, through the index of its owner (an entry, a code file, or the
# library itself for git history and facts): there is no index on edge(library_id) alone.
_LIBRARY_EDGES = """
WITH lib_edges(subject, predicate, object, entry_id) AS (
  SELECT g.subject, g.predicate, g.object, g.entry_id
    FROM entry e JOIN edge g ON g.entry_id = e.id WHERE e.library_id = :lib
  UNION ALL
  SELECT g.subject, g.predicate, g.object, NULL
    FROM code_file c JOIN edge g ON g.code_id = c.id WHERE c.library_id = :lib
  UNION ALL
  SELECT g.subject, g.predicate, g.object, NULL FROM edge g
    WHERE g.library_id = :lib AND g.entry_id IS NULL AND g.code_id IS NULL
)
"""


@dataclass(frozen=True)
class MapBlockRow:
    """A stored map block: the block itself is JSON, decoded by ``brainmap.libmap``."""

    id: int
    library_id: int
    library: str
    status: str
    created_at: str
    fingerprint: str
    state: str
    block: str
    model: str | None
    vec: bytes | None
    centroid: bytes | None
    centroid_n: int
    partners: str  # JSON: library -> digest of the entities it shares with this one


@dataclass(frozen=True)
class MapVectors:
    """A block's vectors: its embedded sentence, and the mean of its library's chunk vectors."""

    model: str | None = None
    sentence: bytes | None = None
    centroid: bytes | None = None
    centroid_n: int = 0


@dataclass(frozen=True)
class NewBlock:
    """A block to store as its library's active one."""

    library_id: int
    fingerprint: str
    state: str
    block: str  # JSON
    created_at: str
    vectors: MapVectors
    partners: str  # JSON
    replaces: int | None  # the active block it was computed against


@dataclass(frozen=True)
class LibrarySize:
    """How big a library is, and when its newest file changed."""

    entries: int
    chunks: int
    last_change_ns: int | None


class MapRepo:
    """What a library's map block is computed from, and the blocks (what goes into a block
    is ``brainmap.libmap``)."""

    def __init__(self, db: BaseDatabase) -> None:
        self.db = db

    # what a block is made of

    def predicate_counts(self, library_id: int) -> dict[str, int]:
        """How many edges of each predicate the library holds (info and facts)."""
        rows = self.db.rows(
            _LIBRARY_EDGES + "SELECT predicate, count(*) FROM lib_edges GROUP BY predicate",
            {"lib": library_id},
        )
        return {str(p): int(n) for p, n in rows}

    def entity_degrees(self, library_id: int) -> dict[str, tuple[str, int]]:
        """Key -> (label, degree inside the library) of every non-structural node it touches."""
        rows = self.db.rows(
            _LIBRARY_EDGES + "SELECT n.key, n.label, d.degree FROM ("
            "  SELECT k, count(*) AS degree FROM ("
            "    SELECT subject AS k FROM lib_edges UNION ALL SELECT object FROM lib_edges"
            "  ) AS u GROUP BY k"  # count first, then look each key up once by its primary key
            f") d JOIN node n ON n.key = d.k WHERE n.kind NOT IN ({_STRUCTURAL})",
            {"lib": library_id} | {f"kind{i}": k for i, k in enumerate(STRUCTURAL_KINDS)},
        )
        return {str(k): (str(label), int(n)) for k, label, n in rows}

    def libraries_sharing(self, keys: Sequence[str], library_id: int) -> dict[str, set[str]]:
        """For each key, the names of the other libraries with an edge on it."""
        out: dict[str, set[str]] = {}
        for part in batched(list(keys), 250):
            rows = self.db.rows(
                "SELECT g.k, l.name FROM ("
                f"  SELECT subject AS k, library_id FROM edge WHERE subject IN ({marks(len(part))})"
                "  UNION"
                f"  SELECT object, library_id FROM edge WHERE object IN ({marks(len(part))})"
                ") g JOIN library l ON l.id = g.library_id WHERE g.library_id != ?",
                (*part, *part, library_id),
            )
            for key, name in rows:
                out.setdefault(str(key), set()).add(str(name))
        return out

    def top_level_entry(self, library_id: int, names: Iterable[str]) -> str | None:
        """The id of the entry at the library's root whose file name (any case) is the first
        of ``names`` found."""
        wanted = [n.lower() for n in names]
        rows = self.db.rows(
            f"SELECT id, lower(path) FROM entry WHERE library_id = ? "
            f"AND lower(path) IN ({marks(len(wanted))})",
            (library_id, *wanted),
        )
        found = {str(path): str(eid) for eid, path in rows}
        return next((found[n] for n in wanted if n in found), None)

    def entry_describing(self, library_id: int, key: str) -> str | None:
        """The library's first entry (by path) that describes the entity ``key``."""
        return self.db.one(  # type: ignore[no-any-return]
            "SELECT e.id FROM edge g JOIN entry e ON e.id = g.entry_id "
            "WHERE g.object = ? AND g.predicate = 'describes' AND e.library_id = ? "
            "ORDER BY e.path LIMIT 1",
            (key, library_id),
        )

    def busiest_entry(self, library_id: int) -> str | None:
        """The entry with the most edges (ties: the first path)."""
        return self.db.one(  # type: ignore[no-any-return]
            "SELECT e.id FROM entry e JOIN edge g ON g.entry_id = e.id WHERE e.library_id = ? "
            "GROUP BY e.id ORDER BY count(*) DESC, e.path LIMIT 1",
            (library_id,),
        )

    def chunk_texts(self, entry_id: str, limit: int) -> list[str]:
        rows = self.db.rows(
            "SELECT text FROM chunk WHERE entry_id = ? ORDER BY ord LIMIT ?", (entry_id, limit)
        )
        return [str(r[0]) for r in rows]

    def library_size(self, library_id: int) -> LibrarySize:
        entries, last = self.db.rows(
            "SELECT count(*), max(mtime_ns) FROM entry WHERE library_id = ? AND mtime_ns > 0",
            (library_id,),
        )[0]
        chunks = self.db.one(
            "SELECT count(*) FROM chunk c JOIN entry e ON e.id = c.entry_id WHERE e.library_id = ?",
            (library_id,),
        )
        return LibrarySize(int(entries), int(chunks), int(last) if last is not None else None)

    # the blocks

    def blocks(
        self, names: Sequence[str] | None = None, *, history: bool = False
    ) -> list[MapBlockRow]:
        """The active blocks (or, with ``history``, every block, newest first) of the named
        libraries (all when None)."""
        where = "" if history else "WHERE b.status = 'active'"
        params: list[Any] = []
        if names is not None:
            where += (" AND " if where else "WHERE ") + f"l.name IN ({marks(len(names))})"
            params += names
        return self.db.records(
            MapBlockRow,
            "SELECT b.id, b.library_id, l.name AS library, b.status, b.created_at, "
            "b.fingerprint, b.state, b.block, b.model, b.vec, b.centroid, b.centroid_n, "
            "b.partners "
            f"FROM map_block b JOIN library l ON l.id = b.library_id {where} "
            "ORDER BY l.name, b.id DESC",
            params,
        )

    def save(self, new: Sequence[NewBlock], kept: Sequence[tuple[int, str, str]]) -> list[int]:
        """In one transaction: insert the new active blocks and mark the ones they replace
        superseded (history beyond ``HISTORY_KEPT`` goes), and record ``(block id, state,
        partners)`` for blocks that stay as they are. A block whose library got another
        active block since it was computed (another save at the same time) is not stored:
        the ids of those libraries are returned, to be computed again."""
        dropped = []
        with self.db.write():
            self._bump()
            for block in new:
                if not self._put_block(block):
                    dropped.append(block.library_id)
            self.db.executemany(
                "UPDATE map_block SET state = ?, partners = ? WHERE id = ? AND status = 'active'",
                [(state, partners, bid) for bid, state, partners in kept],
            )
        return dropped

    def _put_block(self, block: NewBlock) -> bool:
        lib, vectors = block.library_id, block.vectors
        active = self.db.one(
            "SELECT id FROM map_block WHERE library_id = ? AND status = 'active'", (lib,)
        )
        if active != block.replaces:
            return False
        self.db.execute(
            "UPDATE map_block SET status = 'superseded' WHERE library_id = ? AND status = 'active'",
            (lib,),
        )
        self.db.execute(
            "INSERT INTO map_block(library_id, status, created_at, fingerprint, state, block, "
            "partners, model, vec, centroid, centroid_n) "
            "VALUES (?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (lib, block.created_at, block.fingerprint, block.state, block.block, block.partners,
             vectors.model, vectors.sentence, vectors.centroid, vectors.centroid_n),
        )  # fmt: skip
        self.db.execute(
            "DELETE FROM map_block WHERE library_id = ? AND status = 'superseded' AND id NOT IN "
            "(SELECT id FROM map_block WHERE library_id = ? AND status = 'superseded' "
            "ORDER BY id DESC LIMIT ?)",
            (lib, lib, HISTORY_KEPT),
        )
        return True

    def library_state(self, library_id: int) -> list[Any]:
        """What a library's block depends on, cheaply: its entries and code files (count,
        newest index time), its facts pairing, its imported git history and the number of
        edges it owns itself (git history and facts: `gc` prunes commits)."""
        return list(
            self.db.rows(
                "SELECT (SELECT count(*) FROM entry WHERE library_id = :lib), "
                "(SELECT max(indexed_ns) FROM entry WHERE library_id = :lib), "
                "(SELECT count(*) FROM code_file WHERE library_id = :lib), "
                "(SELECT max(indexed_ns) FROM code_file WHERE library_id = :lib), "
                "(SELECT digest FROM fact_pairing WHERE library_id = :lib), "
                "(SELECT head || commits FROM git_import WHERE library_id = :lib), "
                "(SELECT count(*) FROM edge WHERE library_id = :lib AND entry_id IS NULL "
                "AND code_id IS NULL)",
                {"lib": library_id},
            )[0]
        )

    def set_vectors(self, block_id: int, vectors: MapVectors) -> None:
        """Replace the vectors of a block (computed before the library's chunks had theirs)."""
        with self.db.write():
            self._bump()
            self.db.execute(
                "UPDATE map_block SET model = ?, vec = ?, centroid = ?, centroid_n = ? "
                "WHERE id = ?",
                (vectors.model, vectors.sentence, vectors.centroid, vectors.centroid_n, block_id),
            )

    def _bump(self) -> None:
        self.db.execute("UPDATE meta SET value = value + 1 WHERE key = 'map_gen'")

    def generation(self) -> tuple[int, int]:
        """Changes whenever a block or its vectors are written, or a library (with its
        blocks) goes."""
        rows = self.db.rows(
            "SELECT (SELECT value FROM meta WHERE key = 'map_gen'), count(*) FROM map_block"
        )
        return int(rows[0][0] or 0), int(rows[0][1])
