"""Libraries, entries, chunks and their full-text rows, and code files in ``brain.db``, with
the search reads (BM25, hits, filtered chunks), supersession and skipped files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import Any

from brainmap.analysis import ANALYZER_VERSION, fts_quote
from brainmap.keys import EntryRef
from brainmap.store.database import BaseDatabase, FtsRow
from brainmap.store.facts import FactRepo
from brainmap.store.graph import GraphRepo
from brainmap.store.records import (
    HIT_SELECT,
    ChunkRecord,
    CodeFileRecord,
    EntryRecord,
    EntryState,
    Filters,
    Graph,
    HitRow,
    LibraryRow,
    ObservationRecord,
    chunk_scope,
)
from brainmap.store.schema import batched, marks, slug_of


def _json(value: list[Any] | dict[str, Any]) -> str:
    # most entries have no tags, aliases, meta or warnings: skip the encoder for those
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(value, ensure_ascii=False)


def _fts_row(ch: ChunkRecord) -> FtsRow:
    return (ch.id, ch.fts_title, ch.fts_heading, ch.fts_body, ch.fts_forms)


class EntryRepo:
    """Libraries and the files indexed from them: entries with their chunks and full-text
    rows, and code files. A file's edges and observations are written through the graph and
    facts repositories, in the file's transaction."""

    def __init__(self, db: BaseDatabase, graph: GraphRepo, facts: FactRepo) -> None:
        self.db = db
        self._graph = graph
        self._facts = facts

    # libraries

    def ensure_library(self, name: str, path: str, scope: str, language: str = "auto") -> int:
        """Insert or update a library row and return its id."""
        with self.db.write():
            self.db.execute(
                # a new library has no rows to rebuild: it starts at the current analysis
                "INSERT INTO library(name, path, scope, analyzer, language) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET path = excluded.path, "
                "scope = excluded.scope WHERE library.path != excluded.path "
                "OR library.scope != excluded.scope",
                (name, path, scope, ANALYZER_VERSION, language),
            )
            return int(self.db.one("SELECT id FROM library WHERE name = ?", (name,)))

    def libraries(self) -> list[LibraryRow]:
        return self.db.records(
            LibraryRow,
            "SELECT id, name, path, scope, indexed_at, analyzer, language FROM library "
            "ORDER BY name",
        )

    def library_ids(self, names: Iterable[str]) -> dict[str, int]:
        names = list(names)
        rows = self.db.rows(
            f"SELECT name, id FROM library WHERE name IN ({marks(len(names))})", names
        )
        return {name: int(id_) for name, id_ in rows}

    def delete_library(self, name: str) -> int:
        """Remove a library and everything indexed from it; return the entries removed."""
        with self.db.write():
            count = self.db.one(
                "SELECT count(*) FROM entry e JOIN library l ON l.id = e.library_id "
                "WHERE l.name = ?",
                (name,),
            )
            self.db.flush()  # rows buffered for its files must go too, not fail later
            self.db.execute("DELETE FROM library WHERE name = ?", (name,))
            self._restatus(None)  # its entries may have superseded others' (rare: all of them)
        return int(count or 0)

    def mark_indexed(
        self, library_id: int, when: str, analysis: tuple[int, str] | None = None
    ) -> None:
        """Record a finished index run (and, after a full one, the text-analysis version and
        language setting its rows were made with)."""
        with self.db.write():
            self.db.execute("UPDATE library SET indexed_at = ? WHERE id = ?", (when, library_id))
            if analysis is not None:
                self.db.execute(
                    "UPDATE library SET analyzer = ?, language = ? WHERE id = ?",
                    (*analysis, library_id),
                )

    def library_collectors(self, library_id: int) -> int:
        """The config collectors' version its config files' facts were read with (0: before
        versions)."""
        value = self.db.one("SELECT collectors FROM library WHERE id = ?", (library_id,))
        return int(value) if value is not None else 0

    def mark_collected(self, library_id: int, version: int) -> None:
        """Record that every config file of the library was read by collectors ``version``."""
        with self.db.write():
            self.db.execute("UPDATE library SET collectors = ? WHERE id = ?", (version, library_id))

    def library_analysis(self, library_id: int) -> tuple[int, str]:
        """The text-analysis version (0: made before versions) and the language setting of
        a library's FTS rows."""
        rows = self.db.rows("SELECT analyzer, language FROM library WHERE id = ?", (library_id,))
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, "auto")

    def behind_analyzer(self, analyzer: int) -> list[str]:
        """Libraries whose FTS rows were made with an older text analysis."""
        return [
            r[0] for r in self.db.rows("SELECT name FROM library WHERE analyzer < ?", (analyzer,))
        ]

    def languages(self) -> dict[str, int]:
        """Entries per stemming language (those stemmed in one)."""
        return {
            str(lang): int(n)
            for lang, n in self.db.rows(
                "SELECT language, count(*) FROM entry "
                "WHERE language IS NOT NULL AND language != 'none' GROUP BY language"
            )
        }

    # entries

    def entry_states(
        self, library_id: int, paths: Sequence[str] | None = None
    ) -> dict[str, EntryState]:
        """Path -> what the index knows of the library's entries (of ``paths`` only, when
        given: a save looks up its file, not the whole library)."""
        return self._file_states("entry", library_id, paths)

    def code_states(self, library_id: int) -> dict[str, EntryState]:
        return self._file_states("code_file", library_id)

    def _file_states(
        self, table: str, library_id: int, paths: Sequence[str] | None = None
    ) -> dict[str, EntryState]:
        query = (
            f"SELECT path, id, mtime_ns, size, indexed_ns, content_hash FROM {table} "
            "WHERE library_id = ?"
        )
        if paths is None:
            states = self.db.records(EntryState, query, (library_id,))
        else:
            states = []
            for part in batched(list(paths)):
                states += self.db.records(
                    EntryState, f"{query} AND path IN ({marks(len(part))})", (library_id, *part)
                )
        return {s.path: s for s in states}

    def touch_entry(self, entry_id: str, mtime_ns: int, size: int, indexed_ns: int) -> None:
        """Record a new stat for an entry whose content did not change."""
        self._touch("entry", entry_id, mtime_ns, size, indexed_ns)

    def touch_code_file(self, code_id: str, mtime_ns: int, size: int, indexed_ns: int) -> None:
        self._touch("code_file", code_id, mtime_ns, size, indexed_ns)

    def _touch(self, table: str, row_id: str, mtime_ns: int, size: int, indexed_ns: int) -> None:
        with self.db.write():
            self.db.execute(
                f"UPDATE {table} SET mtime_ns = ?, size = ?, indexed_ns = ? WHERE id = ?",
                (mtime_ns, size, indexed_ns, row_id),
            )

    def put_entry(
        self,
        entry: EntryRecord,
        chunks: list[ChunkRecord],
        *,
        rewrite: bool = False,
        new: bool = False,
        graph: Graph | None = None,
        observations: Sequence[ObservationRecord] | None = None,
    ) -> None:
        """Insert or replace an entry with its tags, chunks, FTS rows, graph edges and the
        observations of its narrative (info and facts roots in one transaction).

        Chunks whose id and embedding hash are unchanged keep their vector and only have their
        position updated (and their FTS row rewritten when ``rewrite`` is set). ``new`` says
        the caller knows the entry is not in the index yet.
        """
        with self.db.write():
            try:
                c = self.db
                if new and c.fetch("SELECT 1 FROM entry WHERE id = ?", (entry.id,)):
                    new = False  # indexed meanwhile (a save while a reindex runs)
                if not new:
                    self.db.flush_text()  # its old chunks' rows may still be in the buffer
                c.execute(
                    "INSERT INTO entry(id, library_id, path, title, type, project, tags, aliases, "
                    "created, last_verified, updated, content_hash, mtime_ns, size, indexed_ns, "
                    "observed_at, source_rev, meta, warnings, slug, blob, language, file_status) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT(id) DO UPDATE SET "
                    "library_id=excluded.library_id, path=excluded.path, title=excluded.title, "
                    "type=excluded.type, project=excluded.project, tags=excluded.tags, "
                    "aliases=excluded.aliases, created=excluded.created, "
                    "last_verified=excluded.last_verified, updated=excluded.updated, "
                    "content_hash=excluded.content_hash, mtime_ns=excluded.mtime_ns, "
                    "size=excluded.size, indexed_ns=excluded.indexed_ns, "
                    "observed_at=excluded.observed_at, source_rev=excluded.source_rev, "
                    "meta=excluded.meta, warnings=excluded.warnings, slug=excluded.slug, "
                    "blob=excluded.blob, language=excluded.language, "
                    "file_status=excluded.file_status",
                    (
                        entry.id, entry.library_id, entry.path, entry.title, entry.type,
                        entry.project, _json(entry.tags), _json(entry.aliases), entry.created,
                        entry.last_verified, entry.updated, entry.content_hash, entry.mtime_ns,
                        entry.size, entry.indexed_ns, entry.observed_at, entry.source_rev,
                        _json(entry.meta), _json(entry.warnings), entry.slug, entry.blob,
                        entry.language, entry.file_status,
                    ),
                )  # fmt: skip
                self._put_supersession(entry, new)
                if graph is not None:
                    self._graph.put("entry_id", entry.id, entry.library_id, graph, replace=not new)
                if observations is not None:
                    self._facts.put_observations(
                        "entry_id", entry.id, entry.library_id, observations, replace=not new
                    )
                old: dict[int, str] = {}
                if not new:  # a new entry has no tags or chunks to compare with (most of a build)
                    c.execute("DELETE FROM entry_tag WHERE entry_id = ?", (entry.id,))
                    old = dict(
                        c.fetch("SELECT id, embed_hash FROM chunk WHERE entry_id = ?", (entry.id,))
                    )
                if entry.tags:
                    c.executemany(
                        "INSERT INTO entry_tag(tag, entry_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        [(tag, entry.id) for tag in entry.tags],
                    )
                new_ids = {ch.id for ch in chunks}
                gone = [(cid,) for cid in old if cid not in new_ids]
                if gone:
                    c.executemany("DELETE FROM chunk WHERE id = ?", gone)
                for ch in chunks:
                    if old.get(ch.id) == ch.embed_hash:
                        # same text: the vector stays; only the position (and, when asked, the
                        # full-text row, e.g. after a change of text analysis) is rewritten
                        c.execute(
                            "UPDATE chunk SET ord = ?, line_start = ?, line_end = ? WHERE id = ?",
                            (ch.ord, ch.line_start, ch.line_end, ch.id),
                        )
                        if rewrite:
                            self.db.drop_text(ch.id)
                            self.db.add_text(entry.id, _fts_row(ch))
                        continue
                    if ch.id in old:
                        c.execute("DELETE FROM chunk WHERE id = ?", (ch.id,))
                    c.execute(
                        "INSERT INTO chunk(id, entry_id, ord, heading, line_start, line_end, text, "
                        "embed_hash) VALUES (?,?,?,?,?,?,?,?)",
                        (ch.id, entry.id, ch.ord, ch.heading, ch.line_start, ch.line_end, ch.text,
                         ch.embed_hash),
                    )  # fmt: skip
                    self.db.add_text(entry.id, _fts_row(ch))

            except Exception:
                # inside a batch the transaction goes on: leave no half-written entry
                # for it to commit (no row at all, so the next reindex reads the file)
                self._graph.discard_owner(entry.id)
                self.db.discard_text(entry.id)
                with suppress(self.db.Error):
                    c.execute("DELETE FROM entry WHERE id = ?", (entry.id,))
                raise

    def delete(self, entry_ids: Sequence[str]) -> None:
        """Delete entries; chunks, FTS rows, vectors, tags and edges go with them."""
        with self.db.write():
            self.db.flush()  # rows buffered for these entries must go too, not fail later
            touched = self._supersession_neighbours(entry_ids)
            self.db.executemany("DELETE FROM entry WHERE id = ?", [(i,) for i in entry_ids])
            self._restatus(touched)

    # supersession and status

    # the effective status of entry ``x`` (see _SCHEMA_V7): its file's, else superseded when
    # another entry claims it, or it names an indexed entry as its replacement
    _STATUS = """CASE WHEN x.file_status != 'active' THEN x.file_status
  WHEN EXISTS (SELECT 1 FROM supersession s WHERE s.role = 'supersedes' AND s.slug = x.slug
    AND s.library = (SELECT name FROM library WHERE id = x.library_id) AND s.entry_id != x.id)
  THEN 'superseded'
  WHEN EXISTS (SELECT 1 FROM supersession s JOIN library l ON l.name = s.library
    JOIN entry n ON n.library_id = l.id AND n.slug = s.slug
    WHERE s.entry_id = x.id AND s.role = 'superseded_by' AND n.id != x.id)
  THEN 'superseded'
  ELSE 'active' END"""

    def _put_supersession(self, entry: EntryRecord, new: bool) -> None:
        """Replace the links an entry's frontmatter states and recompute the statuses they
        touch: its own, those of the entries it names (before and now), and of those that
        name it as their replacement (in the caller's transaction)."""
        # fetch, not one: reading the library's name need not flush the held-back full-text
        # rows (a flush per entry made a round trip or two more per file on PostgreSQL)
        library = str(
            self.db.fetch("SELECT name FROM library WHERE id = ?", (entry.library_id,))[0][0]
        )
        links = {
            (role, *_target(ref, library))
            for role, refs in (
                ("supersedes", entry.supersedes),
                ("superseded_by", entry.superseded_by),
            )
            for ref in refs
        }
        touched = self._supersession_neighbours([entry.id]) if not new else set()
        if not new:
            self.db.execute("DELETE FROM supersession WHERE entry_id = ?", (entry.id,))
        if links:
            self.db.executemany(
                "INSERT INTO supersession(entry_id, role, library, slug) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(entry.id, *link) for link in links],
            )
            touched |= self._supersession_neighbours([entry.id])
        elif new:
            touched |= self._named_by_replacement(library, entry.slug)
        self._restatus(touched | {entry.id})

    def _supersession_neighbours(self, entry_ids: Sequence[str]) -> set[str]:
        """The entries whose status may change with these: those they claim to supersede,
        and those that name them as their replacement."""
        out: set[str] = set()
        for part in batched(list(entry_ids)):
            out.update(
                str(r[0])
                for r in self.db.fetch(
                    "SELECT o.id FROM supersession s JOIN library l ON l.name = s.library "
                    "JOIN entry o ON o.library_id = l.id AND o.slug = s.slug "
                    f"WHERE s.role = 'supersedes' AND s.entry_id IN ({marks(len(part))}) "
                    "UNION SELECT s.entry_id FROM entry e JOIN library l ON l.id = e.library_id "
                    "JOIN supersession s ON s.slug = e.slug AND s.library = l.name "
                    f"AND s.role = 'superseded_by' WHERE e.id IN ({marks(len(part))})",
                    [*part, *part],
                )
            )
        return out

    def _named_by_replacement(self, library: str, slug: str) -> set[str]:
        return {
            str(r[0])
            for r in self.db.fetch(
                "SELECT entry_id FROM supersession WHERE slug = ? AND library = ? "
                "AND role = 'superseded_by'",
                (slug, library),
            )
        }

    def _restatus(self, entry_ids: Iterable[str] | None) -> None:
        """Recompute the effective status of these entries (None: of every entry)."""
        if entry_ids is None:
            self.db.execute(
                f"UPDATE entry AS x SET status = {self._STATUS} WHERE status != {self._STATUS}"
            )
            return
        for part in batched(sorted(entry_ids)):
            self.db.execute(
                f"UPDATE entry AS x SET status = {self._STATUS} "
                f"WHERE id IN ({marks(len(part))}) AND status != {self._STATUS}",
                part,
            )

    def inactive_chunk_ids(self, library_ids: Sequence[int] | None = None) -> list[int]:
        """Chunks of entries that are not active (superseded, retired, archived)."""
        where, params = chunk_scope(library_ids, None)
        return [
            int(r[0])
            for r in self.db.rows(
                "SELECT c.id FROM entry e JOIN chunk c ON c.entry_id = e.id "
                f"WHERE e.status != 'active'{where}",
                params,
            )
        ]

    def supersession(self, entry_id: str) -> dict[str, list[dict[str, str]]]:
        """What replaced an entry (``superseded_by``: the entries claiming it, and those its
        own frontmatter names) and what it replaced (``supersedes``), as indexed entries
        (id, library, path, title, status); ``unresolved`` lists what names no entry."""
        rows = self.db.rows(
            "SELECT 'superseded_by', n.id, l.name, n.path, n.title, n.status "
            "FROM entry x JOIN library xl ON xl.id = x.library_id "
            "JOIN supersession s ON s.role = 'supersedes' AND s.slug = x.slug "
            "AND s.library = xl.name JOIN entry n ON n.id = s.entry_id "
            "JOIN library l ON l.id = n.library_id WHERE x.id = ? AND n.id != x.id "
            "UNION SELECT CASE s.role WHEN 'supersedes' THEN 'supersedes' "
            "ELSE 'superseded_by' END, n.id, l.name, n.path, n.title, n.status "
            "FROM supersession s JOIN library l ON l.name = s.library "
            "JOIN entry n ON n.library_id = l.id AND n.slug = s.slug "
            "WHERE s.entry_id = ? AND n.id != ? "
            "UNION SELECT 'supersedes', n.id, l.name, n.path, n.title, n.status "
            "FROM entry x JOIN library xl ON xl.id = x.library_id "
            "JOIN supersession s ON s.role = 'superseded_by' AND s.slug = x.slug "
            "AND s.library = xl.name JOIN entry n ON n.id = s.entry_id "
            "JOIN library l ON l.id = n.library_id WHERE x.id = ? AND n.id != x.id",
            (entry_id,) * 4,
        )
        out: dict[str, list[dict[str, str]]] = {
            "supersedes": [],
            "superseded_by": [],
            "unresolved": [],
        }
        for role, eid, library, path, title, status in sorted(rows, key=lambda r: (r[2], r[3])):
            if not self.db.sees(library):  # another library's entry: not the caller's to see
                continue
            item = {"id": eid, "library": library, "path": path, "title": title, "status": status}
            if item not in out[role]:
                out[role].append(item)
        # a link into a library the caller may not see names nothing they can see either
        for role, library, slug, found in self.db.rows(
            "SELECT s.role, s.library, s.slug, EXISTS (SELECT 1 FROM library l JOIN entry n "
            "ON n.library_id = l.id WHERE l.name = s.library AND n.slug = s.slug) "
            "FROM supersession s WHERE s.entry_id = ? ORDER BY s.role, s.library, s.slug",
            (entry_id,),
        ):
            if not found or not self.db.sees(library):
                out["unresolved"].append({"role": role, "library": library, "slug": slug})
        return out

    def find_entry(self, ref: str) -> tuple[str, str] | None:
        """Resolve an entry id, ``library:path`` or library-relative path to (id, library);
        only an entry the current call may see (:meth:`Database.seeing`) resolves."""
        row = self.db.rows(
            "SELECT e.id, l.name FROM entry e JOIN library l ON l.id = e.library_id WHERE e.id = ?",
            (ref,),
        )
        row = [r for r in row if self.db.sees(r[1])]
        entry = EntryRef.parse(ref)
        if not row and entry.library:
            row = self.db.rows(
                "SELECT e.id, l.name FROM entry e JOIN library l ON l.id = e.library_id "
                "WHERE l.name = ? AND e.path = ?",
                (entry.library, entry.path),
            )
        if not row:
            row = self.db.rows(
                "SELECT e.id, l.name FROM entry e JOIN library l ON l.id = e.library_id "
                "WHERE e.path = ? ORDER BY l.name",
                (ref,),
            )
        row = [r for r in row if self.db.sees(r[1])]
        return (row[0][0], row[0][1]) if row else None

    def entry(self, entry_id: str) -> dict[str, Any] | None:
        """An entry row as a dict (JSON columns decoded), with its library's name and path;
        None for an entry the current call may not see."""
        names, rows = self.db.columns(
            "SELECT e.*, l.name AS library, l.path AS library_path, l.scope AS scope, "
            "l.host AS host FROM entry e JOIN library l ON l.id = e.library_id WHERE e.id = ?",
            (entry_id,),
        )
        if not rows:
            return None
        data = dict(zip(names, rows[0], strict=True))
        if not self.db.sees(data["library"]):
            return None
        for key in ("tags", "aliases", "meta", "warnings"):
            data[key] = json.loads(data[key])
        return data

    def titled(self, title: str, library: str) -> list[tuple[str, str, str]]:
        """(id, path, title) of a library's entries with this title, ignoring case."""
        rows = self.db.rows(
            "SELECT e.id, e.path, e.title FROM entry e JOIN library l ON l.id = e.library_id "
            "WHERE l.name = ? AND lower(e.title) = lower(?)",
            (library, title),
        )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    def vocabulary(self, library: str, limit: int = 100) -> tuple[list[str], list[str]]:
        """(types, tags) a library's entries use, the most used first (``limit`` of each)."""
        types = self.db.rows(
            "SELECT e.type FROM entry e JOIN library l ON l.id = e.library_id WHERE l.name = ? "
            "GROUP BY e.type ORDER BY count(*) DESC, e.type LIMIT ?",
            (library, limit),
        )
        tags = self.db.rows(
            "SELECT t.tag FROM entry_tag t JOIN entry e ON e.id = t.entry_id "
            "JOIN library l ON l.id = e.library_id WHERE l.name = ? "
            "GROUP BY t.tag ORDER BY count(*) DESC, t.tag LIMIT ?",
            (library, limit),
        )
        return [str(r[0]) for r in types], [str(r[0]) for r in tags]

    def entry_chunks(self, entry_id: str) -> list[HitRow]:
        return self._hits("WHERE c.entry_id = ? ORDER BY c.ord", (entry_id,))

    # skipped files

    def record_skip(
        self,
        library_id: int,
        path: str,
        reason: str,
        when: str,
        mtime_ns: int | None = None,
        size: int | None = None,
    ) -> None:
        """Remember why a file was not indexed, and its stat (so it is not re-read unchanged)."""
        with self.db.write():
            self.db.execute(
                "INSERT INTO skipped(library_id, path, reason, at, mtime_ns, size) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(library_id, path) DO UPDATE SET reason = excluded.reason, "
                "at = excluded.at, mtime_ns = excluded.mtime_ns, size = excluded.size",
                (library_id, path, reason, when, mtime_ns, size),
            )

    def skip_states(self, library_id: int) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of the skipped files of a library that had a stat."""
        rows = self.db.rows(
            "SELECT path, mtime_ns, size FROM skipped WHERE library_id = ? AND size IS NOT NULL",
            (library_id,),
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def clear_skips(self, library_id: int, keep: set[str]) -> None:
        """Forget skip records of a library except for the paths in ``keep``."""
        with self.db.write():
            rows = self.db.rows("SELECT path FROM skipped WHERE library_id = ?", (library_id,))
            stale = [(library_id, p) for (p,) in rows if p not in keep]
            self.db.executemany("DELETE FROM skipped WHERE library_id = ? AND path = ?", stale)

    def skipped(self) -> list[tuple[str, str, str]]:
        """(library, path, reason) of files that could not be indexed."""
        return [
            (r[0], r[1], r[2])
            for r in self.db.rows(
                "SELECT l.name, s.path, s.reason FROM skipped s JOIN library l "
                "ON l.id = s.library_id ORDER BY l.name, s.path"
            )
        ]

    def entry_warnings(self) -> list[tuple[str, str, list[str]]]:
        rows = self.db.rows(
            "SELECT l.name, e.path, e.warnings FROM entry e JOIN library l ON l.id = e.library_id "
            "WHERE e.warnings != '[]' ORDER BY l.name, e.path"
        )
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    # code files

    def put_code_file(
        self,
        record: CodeFileRecord,
        graph: Graph,
        *,
        new: bool = False,
        observations: Sequence[ObservationRecord] = (),
    ) -> None:
        """Insert or replace a code file with its breadcrumb edges and, for a config file,
        its observations."""
        with self.db.write():
            self.db.execute(
                "INSERT INTO code_file(id, library_id, path, content_hash, blob, mtime_ns, size, "
                "indexed_ns, observed_at, source_rev) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET content_hash = excluded.content_hash, "
                "blob = excluded.blob, mtime_ns = excluded.mtime_ns, size = excluded.size, "
                "indexed_ns = excluded.indexed_ns, observed_at = excluded.observed_at, "
                "source_rev = excluded.source_rev",
                (record.id, record.library_id, record.path, record.content_hash, record.blob,
                 record.mtime_ns, record.size, record.indexed_ns, record.observed_at,
                 record.source_rev),
            )  # fmt: skip
            self._graph.put("code_id", record.id, record.library_id, graph, replace=not new)
            try:
                self._facts.put_observations(
                    "code_id", record.id, record.library_id, observations, replace=not new
                )
            except Exception:  # leave no half-written file: no row, so the next run reads it
                self._graph.discard_owner(record.id)
                with suppress(self.db.Error):
                    self.db.execute("DELETE FROM code_file WHERE id = ?", (record.id,))
                raise

    def delete_code_files(self, ids: Sequence[str]) -> None:
        with self.db.write():
            self.db.flush()  # rows buffered for these files must go too, not fail later
            self.db.executemany("DELETE FROM code_file WHERE id = ?", [(i,) for i in ids])

    # search

    def text_generation(self) -> int:
        """A counter that changes whenever the full-text index does."""
        return int(self.db.one("SELECT value FROM meta WHERE key = 'text_gen'"))

    def chunk_count(self) -> int:
        return int(self.db.one("SELECT count(*) FROM chunk"))

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (terms already folded)."""
        out: dict[str, int] = {}
        for part in batched(list(terms)):
            sql = f"SELECT term, doc FROM chunk_vocab WHERE term IN ({marks(len(part))})"
            out.update((str(t), int(d)) for t, d in self.db.rows(sql, part))
        return out

    def held_by(self, terms: Sequence[str], library_ids: Sequence[int]) -> set[str]:
        """Those of ``terms`` (folded) that some chunk of these libraries holds."""
        if not library_ids:
            return set()
        found = set()
        for term in terms:
            if self.db.rows(
                "SELECT 1 FROM chunk_fts f JOIN chunk c ON c.id = f.rowid "
                "JOIN entry e ON e.id = c.entry_id WHERE chunk_fts MATCH ? "
                f"AND e.library_id IN ({marks(len(library_ids))}) LIMIT 1",
                (fts_expression([term]), *library_ids),
            ):
                found.add(term)
        return found

    def bm25(
        self,
        terms: Sequence[str],
        filters: Filters,
        limit: int,
        weights: tuple[float, ...],
        within: Sequence[Sequence[str]] | None = None,
    ) -> list[int]:
        """Chunk ids matching any of ``terms`` (folded words, or phrases of them joined by
        spaces), best BM25 first. ``weights`` are those of the title, heading, body and forms
        columns (missing ones weigh 1). With ``within``, only the chunks that also match a
        term of each of its groups are scored."""
        match = fts_expression(terms)
        within = [group for group in within or () if group] or None
        weights = (*weights, 1.0, 1.0, 1.0, 1.0)[:4]
        where, params = filters.sql()
        # `+rowid` keeps the candidates out of FTS5's own plan: offered as rowid = ?, each
        # one would run the whole query again
        scored = "" if within is None else (
            " AND +{rowid} IN (SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ?)"
        )  # fmt: skip
        extra = [] if within is None else [
            " AND ".join(f"({fts_expression(group)})" for group in within)
        ]  # fmt: skip
        if filters.metadata_sql()[0] == "TRUE":
            # no join per match: the few inactive entries' chunks are left out by one set
            # (the partial index entry_inactive finds them), read once per query
            inactive = (
                ""
                if filters.include_inactive
                else " AND rowid NOT IN (SELECT c.id FROM entry e JOIN chunk c "
                "ON c.entry_id = e.id WHERE e.status != 'active')"
            )
            sql = (
                "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ?"
                f"{scored.format(rowid='rowid')}{inactive} "
                "ORDER BY bm25(chunk_fts, ?, ?, ?, ?) LIMIT ?"
            )
            args: list[Any] = [match, *extra, *weights, limit]
        else:
            sql = (
                "SELECT f.rowid FROM chunk_fts f JOIN chunk c ON c.id = f.rowid "
                "JOIN entry e ON e.id = c.entry_id WHERE chunk_fts MATCH ?"
                f"{scored.format(rowid='f.rowid')} AND {where} "
                "ORDER BY bm25(chunk_fts, ?, ?, ?, ?) LIMIT ?"
            )
            args = [match, *extra, *params, *weights, limit]
        return [r[0] for r in self.db.rows(sql, args)]

    def first_chunks(self, filters: Filters, limit: int) -> list[HitRow]:
        """The first chunk of each entry that passes the filters, newest entries first (by
        their last verification, else their date)."""
        where, params = filters.sql()
        return self._hits(
            f"WHERE c.ord = 0 AND {where} "
            "ORDER BY coalesce(e.last_verified, e.updated) DESC, e.path LIMIT ?",
            [*params, limit],
        )

    def filtered_chunk_ids(self, filters: Filters) -> list[int]:
        where, params = filters.sql()
        rows = self.db.rows(
            f"SELECT c.id FROM chunk c JOIN entry e ON e.id = c.entry_id WHERE {where}", params
        )
        return [r[0] for r in rows]

    def hits(self, chunk_ids: Sequence[int]) -> dict[int, HitRow]:
        """The hit row of each chunk id (ids that name no chunk are left out)."""
        out: dict[int, HitRow] = {}
        for part in batched(list(chunk_ids)):
            out.update(
                (h.chunk_id, h) for h in self._hits(f"WHERE c.id IN ({marks(len(part))})", part)
            )
        return out

    def freshness(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str | None, int]]:
        """(last verified, file mtime in ns) of each chunk's entry: what the staleness decay
        reads, without the hit rows' text (ids that name no chunk are left out)."""
        out: dict[int, tuple[str | None, int]] = {}
        for part in batched(list(chunk_ids)):
            rows = self.db.rows(
                "SELECT c.id, e.last_verified, e.mtime_ns FROM chunk c "
                f"JOIN entry e ON e.id = c.entry_id WHERE c.id IN ({marks(len(part))})",
                part,
            )
            out.update((int(cid), (seen, int(mtime))) for cid, seen, mtime in rows)
        return out

    def _hits(self, where: str, params: Sequence[Any]) -> list[HitRow]:
        return self.db.records(HitRow, f"{HIT_SELECT} {where}", params, json_columns=("tags",))

    # health

    def library_counts(self) -> dict[str, tuple[int, int, int | None]]:
        """Entries, chunks and when an entry was last indexed (ns, None when none) per
        library name."""
        rows = self.db.rows(
            "SELECT l.name, count(DISTINCT e.id), count(c.id), max(e.indexed_ns) FROM library l "
            "LEFT JOIN entry e ON e.library_id = l.id LEFT JOIN chunk c ON c.entry_id = e.id "
            "GROUP BY l.id"
        )
        return {r[0]: (int(r[1]), int(r[2]), None if r[3] is None else int(r[3])) for r in rows}

    def compact_text(self) -> None:
        """Merge the full-text index's segments into one (after bulk writes)."""
        with self.db.write():
            self.db.execute("INSERT INTO chunk_fts(chunk_fts) VALUES ('optimize')")

    # by slug; due for re-verification

    def with_slug(self, slug: str) -> list[tuple[str, str, str]]:
        """(entry id, library, path) of the entries whose file is called ``slug`` (those the
        current call may see)."""
        rows = self.db.rows(
            "SELECT e.id, l.name, e.path FROM entry e JOIN library l ON l.id = e.library_id "
            "WHERE e.slug = ? ORDER BY l.name, e.path",
            (slug,),
        )
        return [(str(a), str(b), str(c)) for a, b, c in rows if self.db.sees(str(b))]

    def reverify_due(
        self, before: str, library_ids: Sequence[int], project: str | None = None
    ) -> list[tuple[str, ...]]:
        """(entry id, library, path, last_verified) of entries verified before ``before``, in
        the libraries given (or, with ``project``, also saying `project: <name>`); active
        ones only (a superseded, retired or archived entry is not worth re-verifying)."""
        either = " OR e.project = ?" if project is not None else ""
        rows = self.db.rows(
            "SELECT e.id, l.name, e.path, e.last_verified FROM entry e "
            "JOIN library l ON l.id = e.library_id WHERE e.last_verified < ? "
            "AND e.status = 'active' "
            f"AND (e.library_id IN ({marks(len(library_ids))}){either}) ORDER BY e.last_verified",
            (before, *library_ids, *([project] if project is not None else [])),
        )
        return [tuple(str(v) for v in r) for r in rows]


def fts_expression(terms: Sequence[str]) -> str:
    """The FTS5 expression matching any of ``terms`` (each quoted: no operator inside is
    read as one)."""
    return " OR ".join(fts_quote(t) for t in terms)


def _target(ref: str, library: str) -> tuple[str, str]:
    """(library, slug) of a supersession reference: ``slug``, ``path/name.md`` (of the
    entry's own library) or ``library:slug``."""
    target = EntryRef.parse(ref)
    if target.library.strip() and target.path.strip():
        return target.library.strip(), slug_of(target.path.strip())
    return library, slug_of(ref.strip())
