"""The facts root in ``brain.db``: observations of each source and the assertions paired
from them (edges with root ``facts``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from brainmap.store.database import BaseDatabase
from brainmap.store.graph import GraphRepo
from brainmap.store.records import EdgeRecord, FactRow, NodeRecord, ObservationRecord
from brainmap.store.schema import marks

FACTS_ROOT = "facts"
# an observation is evidence unless its entry is superseded, retired or archived
_COUNTS = (
    "(o.entry_id IS NULL OR NOT EXISTS (SELECT 1 FROM entry x WHERE x.id = o.entry_id "
    "AND x.status != 'active'))"
)

_FACT_SELECT = """
SELECT g.subject, g.predicate, g.object, l.name AS library, g.source_uri, g.line, g.observed_at,
       g.source_rev, g.props, g.root, g.confidence
FROM edge g JOIN library l ON l.id = g.library_id
WHERE g.root = 'facts'
"""


class FactRepo:
    """Observations and assertions (pairing itself is ``brainmap.facts.pairing``). An entry's or code
    file's observations are written by the entry repository in its transaction."""

    def __init__(self, db: BaseDatabase, graph: GraphRepo) -> None:
        self.db = db
        self._graph = graph  # assertions name nodes

    def put_observations(
        self,
        owner_column: str,
        owner: str | None,
        library_id: int,
        records: Sequence[ObservationRecord],
        *,
        replace: bool,
    ) -> None:
        """Write a source's observations in the caller's transaction (``owner_column`` is
        entry_id, code_id or unit); with ``replace`` its earlier ones go first."""
        if replace:
            self.db.execute(
                f"DELETE FROM observation WHERE library_id = ? AND {owner_column} = ?",
                (library_id, owner),
            )
        if records:
            self.db.executemany(
                f"INSERT INTO observation(library_id, {owner_column}, subject, predicate, object,"
                " kind, method, path, line, observed_at, source_rev, props) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (library_id, owner, r.subject, r.predicate, r.object, r.kind, r.method,
                     r.path, r.line, r.observed_at, r.source_rev, _json(r.props))
                    for r in records
                ],
            )  # fmt: skip

    def put_unit_observations(
        self, library_id: int, unit: str, records: Sequence[ObservationRecord]
    ) -> None:
        """Replace what one collected unit (a runtime snapshot, an outside file) observed."""
        with self.db.write():
            self.put_observations("unit", unit, library_id, records, replace=True)

    def observations(self, library_id: int) -> list[ObservationRecord]:
        """The observations that count as evidence: those of a superseded, retired or
        archived entry do not (they confirm nothing)."""
        return self.db.records(
            ObservationRecord,
            "SELECT o.subject, o.predicate, o.object, o.kind, o.method, o.path, o.line, "
            "o.observed_at, o.source_rev, o.props, l.name AS library FROM observation o "
            f"JOIN library l ON l.id = o.library_id WHERE o.library_id = ? AND {_COUNTS} "
            "ORDER BY o.id",
            (library_id,),
            json_columns=("props",),
        )

    def compose_reads(self, library_id: int) -> dict[str, list[list[Any]]]:
        """Compose file -> what the other files it was read with were like then (its
        ``part_of`` observations' ``reads``: the files its ``extends`` name, its include's env
        files): those to read again when one changed."""
        rows = self.db.rows(
            "SELECT o.path, o.props FROM observation o WHERE o.library_id = ? "
            "AND o.method = 'compose' AND o.predicate = 'part_of' "  # collectors.PART_OF
            "AND o.props LIKE '%\"reads\"%'",
            (library_id,),
        )
        out: dict[str, list[list[Any]]] = {}
        for path, props in rows:
            reads = json.loads(props).get("reads")
            if isinstance(reads, list):
                out[str(path)] = reads
        return out

    def observation_digest(self, library_id: int) -> str:
        """Changes whenever an observation of the library that counts as evidence is added
        or removed (also by its entry's status changing)."""
        row = self.db.rows(
            "SELECT count(*), coalesce(sum(o.id), 0), coalesce(max(o.id), 0) FROM observation o "
            f"WHERE o.library_id = ? AND {_COUNTS}",
            (library_id,),
        )[0]
        return f"{row[0]}:{row[1]}:{row[2]}"

    def pairing_digest(self, library_id: int) -> str | None:
        value = self.db.one("SELECT digest FROM fact_pairing WHERE library_id = ?", (library_id,))
        return None if value is None else str(value)

    def put_assertions(
        self,
        library_id: int,
        digest: str,
        nodes: Sequence[NodeRecord],
        edges: Sequence[EdgeRecord],
        when: str,
    ) -> None:
        """Replace a library's assertions in one transaction, remembering the digest of the
        observations they were paired from."""
        with self.db.write():
            self.db.execute(
                "DELETE FROM edge WHERE library_id = ? AND root = ?", (library_id, FACTS_ROOT)
            )
            self._graph.upsert_nodes(nodes)
            self.db.executemany(
                "INSERT INTO edge(subject, predicate, object, root, confidence, library_id, "
                "source_uri, line, observed_at, source_rev, props) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (e.subject, e.predicate, e.object, FACTS_ROOT, e.confidence, library_id,
                     e.source_uri, e.line, e.observed_at, e.source_rev, _json(e.props))
                    for e in edges
                ],
            )  # fmt: skip
            self.db.execute(
                "INSERT INTO fact_pairing(library_id, digest, at) VALUES (?, ?, ?) "
                "ON CONFLICT(library_id) DO UPDATE SET digest = excluded.digest, at = excluded.at",
                (library_id, digest, when),
            )

    def assertions(self, library_ids: Sequence[int] | None = None) -> list[FactRow]:
        """Assertions of the facts root (of some libraries), in a stable order."""
        sql, params = _FACT_SELECT, []
        if library_ids is not None:
            sql += f" AND g.library_id IN ({marks(len(library_ids))})"
            params = list(library_ids)
        return self.db.records(
            FactRow,
            sql + " ORDER BY l.name, g.subject, g.predicate, g.object, g.id",
            params,
            json_columns=("props",),
        )

    def counts(self, library_id: int | None = None) -> dict[str, int]:
        """Assertions by confidence (of one library, or all)."""
        where, params = ("AND library_id = ?", [library_id]) if library_id is not None else ("", [])
        rows = self.db.rows(
            f"SELECT confidence, count(*) FROM edge WHERE root = 'facts' {where} "
            "GROUP BY confidence",
            params,
        )
        return {str(c): int(n) for c, n in rows}

    def observation_counts(self, library_id: int | None = None) -> dict[str, int]:
        """Observations by collection method (of one library, or all)."""
        where, params = (
            ("WHERE library_id = ?", [library_id]) if library_id is not None else ("", [])
        )
        rows = self.db.rows(
            f"SELECT method, count(*) FROM observation {where} GROUP BY method ORDER BY method",
            params,
        )
        return {str(m): int(n) for m, n in rows}


def _json(props: dict[str, Any]) -> str:
    return json.dumps(props, ensure_ascii=False, sort_keys=True) if props else "{}"
