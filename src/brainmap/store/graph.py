"""Graph rows in ``brain.db``: nodes, edges with provenance, imported git history.

An entry's or code file's edges are written by the entry repository in its transaction,
through :meth:`GraphRepo.put`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from brainmap.store.database import BaseDatabase
from brainmap.store.records import EDGE_SELECT, EdgeRow, Graph, NodeRecord
from brainmap.store.schema import batched, marks

# Predicates whose edges carry the git history and the breadcrumbs (hops and backlinks).
HAS_VERSION = "has_version"
AUTHORED_BY = "authored_by"
REFERENCES = "references"
ALIAS_OF = "alias_of"

# The narrative graph; the facts root (store/facts.py) is read only through its own queries.
INFO_ROOT = "info"

# Graph rows nothing holds any more (the trigger and the cascades keep both empty).
_ORPHAN_EDGES = (
    "library_id NOT IN (SELECT id FROM library) "
    "OR (entry_id IS NOT NULL AND entry_id NOT IN (SELECT id FROM entry)) "
    "OR (code_id IS NOT NULL AND code_id NOT IN (SELECT id FROM code_file))"
)
_ORPHAN_NODES = (
    "NOT EXISTS (SELECT 1 FROM edge WHERE subject = node.key) "
    "AND NOT EXISTS (SELECT 1 FROM edge WHERE object = node.key)"
)


class GraphRepo:
    """Nodes and edges (SQL only here; walking the graph is ``brainmap.graph``)."""

    def __init__(self, db: BaseDatabase) -> None:
        self.db = db
        # graph rows waiting for the end of the transaction: (owner column, owner, library, rows)
        self._pending: list[tuple[str, str | None, int, Graph]] = []
        db.add_buffer(self)

    # writing

    def put(
        self,
        owner_column: str,
        owner: str | None,
        library_id: int,
        graph: Graph,
        *,
        replace: bool,
    ) -> None:
        """Write a source's nodes and edges in the caller's transaction; with ``replace`` its
        earlier edges go first, so nodes no longer mentioned are collected.

        The rows are inserted when the transaction commits, all sources at once: one
        ``executemany`` per batch of files instead of two per file.
        """
        if replace and owner is not None:
            self.discard_owner(owner)
            self.db.execute(f"DELETE FROM edge WHERE {owner_column} = ?", (owner,))
        self._pending.append((owner_column, owner, library_id, graph))

    def discard_owner(self, owner: str) -> None:
        """Forget the pending rows of one source (its write failed)."""
        self._pending = [p for p in self._pending if p[1] != owner]

    def flush(self) -> None:
        """Insert the pending graph rows (the database calls this just before COMMIT)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        self.upsert_nodes([n for *_, g in pending for n in g.nodes])
        for column in ("entry_id", "code_id"):
            self.db.executemany(
                f"INSERT INTO edge(subject, predicate, object, library_id, {column}, "
                "source_uri, line, observed_at, source_rev, props) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (e.subject, e.predicate, e.object, library_id, owner, e.source_uri, e.line,
                     e.observed_at, e.source_rev, _json(e.props))
                    for owner_column, owner, library_id, graph in pending
                    if owner_column == column
                    for e in graph.edges
                ],
            )  # fmt: skip

    def discard(self) -> None:
        """Forget every pending row (the transaction ended)."""
        self._pending = []

    def upsert_nodes(self, nodes: Sequence[NodeRecord]) -> None:
        """Insert nodes in the caller's transaction; for a key already there, the smallest
        label (with its props) wins, so that the order of writes does not matter."""
        self.db.executemany(
            "INSERT INTO node(key, kind, label, props) VALUES (?, ?, ?, ?) ON CONFLICT(key) "
            "DO UPDATE SET label = excluded.label, props = excluded.props "
            "WHERE excluded.label < node.label",
            [(n.key, n.kind, n.label, _json(n.props)) for n in nodes],
        )

    # git history

    def git_state(self, library_id: int) -> tuple[tuple[str, str, str], str] | None:
        """((repository, folder prefix, file filters), last imported HEAD) of a library."""
        rows = self.db.rows(
            "SELECT repo, prefix, filters, head FROM git_import WHERE library_id = ?",
            (library_id,),
        )
        if not rows:
            return None
        repo, prefix, filters, head = (str(v) for v in rows[0])
        return (repo, prefix, filters), head

    def put_git_history(self, library_id: int, graph: Graph) -> None:
        """Add a batch of imported commits (one transaction)."""
        with self.db.write():
            self.put("entry_id", None, library_id, graph, replace=False)

    def imported_commits(self, library_id: int, keys: Sequence[str]) -> set[str]:
        """Which of these commit keys the library's history already holds."""
        out: set[str] = set()
        for part in batched(list(keys)):
            rows = self.db.rows(
                "SELECT DISTINCT subject FROM edge WHERE library_id = ? AND predicate = ? "
                f"AND entry_id IS NULL AND code_id IS NULL AND subject IN ({marks(len(part))})",
                [library_id, AUTHORED_BY, *part],
            )
            out.update(str(r[0]) for r in rows)
        return out

    def mark_git_import(
        self, library_id: int, source: tuple[str, str, str], head: str, when: str
    ) -> None:
        """Remember the HEAD imported last (the next import starts there) and what was
        imported: (repository, folder prefix, file filters)."""
        repo, prefix, filters = source
        with self.db.write():
            self.db.execute(
                "INSERT INTO git_import(library_id, repo, prefix, filters, head, commits, at) "
                "VALUES (?, ?, ?, ?, ?, (SELECT count(*) FROM edge WHERE library_id = ? "
                "AND predicate = ? AND entry_id IS NULL AND code_id IS NULL), ?) "
                "ON CONFLICT(library_id) DO UPDATE SET repo = excluded.repo, "
                "prefix = excluded.prefix, filters = excluded.filters, head = excluded.head, "
                "commits = excluded.commits, at = excluded.at",
                (library_id, repo, prefix, filters, head, library_id, AUTHORED_BY, when),
            )

    def forget_git_history(self, library_id: int) -> None:
        """Drop a library's imported history (the library moved, or its file globs changed)."""
        with self.db.write():
            self.flush()
            self.db.execute(
                "DELETE FROM edge WHERE library_id = ? AND entry_id IS NULL AND code_id IS NULL "
                "AND predicate IN (?, ?)",
                (library_id, HAS_VERSION, AUTHORED_BY),
            )
            self.db.execute("DELETE FROM git_import WHERE library_id = ?", (library_id,))

    def imported_commit_keys(self, library_id: int) -> set[str]:
        """Every commit of the library's imported history."""
        rows = self.db.rows(
            "SELECT DISTINCT subject FROM edge WHERE library_id = ? AND predicate = ? "
            "AND entry_id IS NULL AND code_id IS NULL",
            (library_id, AUTHORED_BY),
        )
        return {str(r[0]) for r in rows}

    def drop_commits(self, library_id: int, keys: Sequence[str]) -> int:
        """Remove these commits (their versions and authorship) from a library's history."""
        removed = 0
        with self.db.write():
            for part in batched(list(keys)):
                for column in ("subject", "object"):
                    deleted = self.db.execute(
                        f"DELETE FROM edge WHERE library_id = ? AND entry_id IS NULL "
                        f"AND code_id IS NULL AND {column} IN ({marks(len(part))})",
                        [library_id, *part],
                    )
                    removed += deleted if column == "subject" else 0
        return removed

    def commit_for_blob(self, file_key: str, blob: str) -> str | None:
        """The newest imported commit whose version of the file has exactly this content."""
        rows = self.db.rows(
            "SELECT object FROM edge WHERE subject = ? AND predicate = ? "
            "AND json_extract(props, '$.blob') = ? ORDER BY observed_at DESC LIMIT 1",
            (file_key, HAS_VERSION, blob),
        )
        return str(rows[0][0]) if rows else None

    def refresh_source_revs(self, library_id: int, library: str) -> int:
        """Set ``source_rev`` of the library's entries and code files from the imported
        history (the newest commit with their exact content); return how many changed."""
        changed = 0
        with self.db.write():
            for table in ("entry", "code_file"):
                changed += self.db.execute(
                    f"UPDATE {table} AS t SET source_rev = v.rev FROM ("
                    f"  SELECT t2.id AS id, (SELECT substr(g.object, 8) FROM edge g"
                    f"    WHERE g.subject = 'file:' || ? || '/' || t2.path AND g.predicate = ?"
                    f"    AND json_extract(g.props, '$.blob') = t2.blob"
                    f"    ORDER BY g.observed_at DESC LIMIT 1) AS rev"
                    f"  FROM {table} t2 WHERE t2.library_id = ?) AS v "
                    f"WHERE t.id = v.id AND v.rev IS NOT NULL AND t.source_rev IS DISTINCT FROM v.rev",
                    (library, HAS_VERSION, library_id),
                )
            for table, column in (("entry", "entry_id"), ("code_file", "code_id")):
                self.db.execute(
                    f"UPDATE edge SET source_rev = t.source_rev FROM {table} t "
                    f"WHERE edge.{column} = t.id AND t.library_id = ? "
                    "AND edge.source_rev IS DISTINCT FROM t.source_rev",
                    (library_id,),
                )
        return changed

    def file_versions(self, file_key: str, limit: int) -> list[EdgeRow]:
        """The file's imported versions (``has_version`` edges), newest first."""
        return self._edge_rows(
            " WHERE g.subject = ? AND g.predicate = ? ORDER BY g.observed_at DESC LIMIT ?",
            (file_key, HAS_VERSION, limit),
        )

    def latest_versions(
        self, library_ids: Sequence[int]
    ) -> list[tuple[str, str, str, str | None, str | None, str, str, str]]:
        """For each entry of these libraries whose file has imported history: (entry id,
        library, path, its blob, its source_rev, the newest commit, its time, its blob)."""
        rows = self.db.rows(
            "SELECT e.id, l.name, e.path, e.blob, e.source_rev, v.object, v.observed_at, "
            "json_extract(v.props, '$.blob') FROM entry e JOIN library l ON l.id = e.library_id "
            "JOIN edge v ON v.id = (SELECT g.id FROM edge g WHERE g.subject = "
            "'file:' || l.name || '/' || e.path AND g.predicate = ? "
            "ORDER BY g.observed_at DESC LIMIT 1) "
            f"WHERE e.library_id IN ({marks(len(library_ids))}) ORDER BY l.name, e.path",
            (HAS_VERSION, *library_ids),
        )
        return [tuple(r) for r in rows]

    # reading

    def edges_touching(
        self,
        keys: Sequence[str],
        predicates: Sequence[str] | None = None,
        limit: int = 10_000,
        libraries: Sequence[str] | None = None,
    ) -> tuple[list[tuple[str, EdgeRow]], bool]:
        """Edges of either root with any of ``keys`` as subject or object (of ``libraries``
        only, when given), as (matched key, edge) pairs, and whether some were left out (at
        most ``limit`` of each direction per 200 keys)."""
        out: list[tuple[str, EdgeRow]] = []
        cut = False
        pred_sql, pred_params = "", list[Any]()
        if predicates:
            pred_sql = f" AND g.predicate IN ({marks(len(predicates))})"
            pred_params = list(predicates)
        shown = self._in_view(libraries)
        if shown is not None:
            pred_sql += f" AND l.name IN ({marks(len(shown))})"
            pred_params += shown
        for part in batched(list(keys), 200):
            for column in ("subject", "object"):
                edges = self._edge_rows(
                    f" WHERE g.{column} IN ({marks(len(part))}){pred_sql} ORDER BY g.id LIMIT ?",
                    [*part, *pred_params, limit],
                )
                cut = cut or len(edges) >= limit
                out += [(e.subject if column == "subject" else e.object, e) for e in edges]
        return out, cut

    def edges_from(self, key: str, predicate: str) -> list[EdgeRow]:
        return self._edges("subject", key, predicate)

    def edges_to(self, key: str, predicate: str) -> list[EdgeRow]:
        return self._edges("object", key, predicate)

    def _edges(self, column: str, key: str, predicate: str) -> list[EdgeRow]:
        return self._edge_rows(
            f" WHERE g.{column} = ? AND g.predicate = ? AND g.root = '{INFO_ROOT}' ORDER BY g.id",
            (key, predicate),
        )

    def _edge_rows(self, where: str, params: Sequence[Any]) -> list[EdgeRow]:
        rows = self.db.records(EdgeRow, EDGE_SELECT + where, params, json_columns=("props",))
        return [e for e in rows if self.db.sees(e.library)]

    def _in_view(self, libraries: Sequence[str] | None) -> list[str] | None:
        """The libraries whose edges a read returns: those asked for, within those the
        current call may see (None: every one)."""
        if self.db.visible is None:
            return None if libraries is None else list(libraries)
        if libraries is None:
            return sorted(self.db.visible)
        return [name for name in libraries if name in self.db.visible]

    def alias_targets(self, keys: Sequence[str]) -> dict[str, str]:
        """The canonical entity of each alias key among ``keys`` (smallest, if several), by
        the alias edges the current call may see."""
        out: dict[str, str] = {}
        for part in batched(list(keys)):
            shown = self._in_view(None)
            within = (
                ""
                if shown is None
                else (
                    f" AND library_id IN (SELECT id FROM library WHERE name IN ({marks(len(shown))}))"
                )
            )
            rows = self.db.rows(
                f"SELECT subject, min(object) FROM edge WHERE subject IN ({marks(len(part))}) "
                f"AND predicate = ? AND root = '{INFO_ROOT}'{within} GROUP BY subject",
                [*part, ALIAS_OF, *(shown or [])],
            )
            out.update((str(a), str(b)) for a, b in rows)
        return out

    def nodes(self, keys: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        """(kind, label, props) of the nodes that exist among ``keys``."""
        out: dict[str, tuple[str, str, dict[str, Any]]] = {}
        for part in batched(list(keys)):
            rows = self.db.rows(
                f"SELECT key, kind, label, props FROM node WHERE key IN ({marks(len(part))})", part
            )
            out.update((r[0], (r[1], r[2], json.loads(r[3]))) for r in rows)
        return out

    def keys_labelled(self, label: str) -> list[str]:
        """The keys of the nodes whose label is ``label`` (any case), structural kinds apart."""
        rows = self.db.rows(
            "SELECT key FROM node WHERE lower(label) = lower(?) "
            "AND kind NOT IN ('entry', 'file', 'commit', 'slug')",
            (label,),
        )
        return [str(r[0]) for r in rows]

    def dangling_breadcrumbs(self) -> list[EdgeRow]:
        """``Brain:`` comments whose slug names no entry."""
        return self._edge_rows(
            " WHERE g.predicate = ? AND NOT EXISTS (SELECT 1 FROM entry e "
            "WHERE e.slug = substr(g.object, 6)) ORDER BY l.name, g.source_uri, g.line",
            (REFERENCES,),
        )

    def counts(self) -> dict[str, int]:
        return {
            "nodes": int(self.db.one("SELECT count(*) FROM node")),
            "edges": int(self.db.one("SELECT count(*) FROM edge")),
            "code_files": int(self.db.one("SELECT count(*) FROM code_file")),
            "commits": int(self.db.one("SELECT count(*) FROM node WHERE kind = 'commit'")),
        }

    def orphans(self) -> dict[str, int]:
        """Graph rows that nothing holds any more (the trigger and cascades keep these at 0)."""
        return {
            "nodes": int(self.db.one(f"SELECT count(*) FROM node WHERE {_ORPHAN_NODES}")),
            "edges": int(self.db.one(f"SELECT count(*) FROM edge WHERE {_ORPHAN_EDGES}")),
        }

    def remove_orphans(self) -> int:
        with self.db.write():
            total = 0
            for sql in (
                f"DELETE FROM edge WHERE {_ORPHAN_EDGES}",
                f"DELETE FROM node WHERE {_ORPHAN_NODES}",
            ):
                total += self.db.execute(sql)
        return total

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        return {
            "nodes": self.db.rows("SELECT key, kind, label, props FROM node ORDER BY key"),
            "edges": self.db.rows(
                "SELECT g.subject, g.predicate, g.object, l.name, g.entry_id, g.code_id, "
                "g.source_uri, g.line, g.props FROM edge g JOIN library l ON l.id = g.library_id "
                "ORDER BY g.subject, g.predicate, g.object, g.line, g.source_uri, l.name"
            ),
            "code_files": self.db.rows(
                "SELECT c.id, l.name, c.path, c.content_hash, c.blob, c.source_rev FROM code_file c "
                "JOIN library l ON l.id = c.library_id ORDER BY c.id"
            ),
        }


def _json(props: dict[str, Any]) -> str:
    return json.dumps(props, ensure_ascii=False) if props else "{}"  # most have none
