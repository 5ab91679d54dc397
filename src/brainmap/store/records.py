"""Rows the store reads and writes, and the metadata filters of searches."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from brainmap.store.schema import marks


@dataclass(frozen=True)
class LibraryRow:
    id: int
    name: str
    path: str
    scope: str
    indexed_at: str | None
    analyzer: int = 0  # the text-analysis version its FTS rows were made with
    language: str = "auto"  # and the library's language setting then


@dataclass(frozen=True)
class EntryState:
    """What the stat fast path compares against."""

    path: str
    id: str
    mtime_ns: int
    size: int
    indexed_ns: int
    content_hash: str


@dataclass
class EntryRecord:
    id: str
    library_id: int
    path: str
    title: str
    type: str
    project: str | None
    tags: list[str]
    aliases: list[str]
    created: str | None
    last_verified: str | None
    updated: str
    content_hash: str
    mtime_ns: int
    size: int
    indexed_ns: int
    observed_at: str
    source_rev: str | None
    meta: dict[str, Any]
    warnings: list[str]
    slug: str = ""
    blob: str | None = None  # git blob id of the content, to match it with git history
    language: str | None = None  # the Snowball language its words were stemmed in
    # what its own file says: active, retired (`status: retired`) or archived (`archive/`)
    file_status: str = "active"
    # the entries its frontmatter says it replaces / was replaced by: "slug" (of its own
    # library) or "library:slug"
    supersedes: list[str] = field(default_factory=list)
    superseded_by: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CodeFileRecord:
    """A code file scanned for ``Brain:`` breadcrumbs."""

    id: str
    library_id: int
    path: str
    content_hash: str
    blob: str
    mtime_ns: int
    size: int
    indexed_ns: int
    observed_at: str
    source_rev: str | None


@dataclass(slots=True)  # not frozen: a rebuild creates a few per file, frozen ones cost more
class NodeRecord:
    key: str
    kind: str
    label: str
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class EdgeRecord:
    """A triplet with its provenance; the owner (entry, code file, library) is set on write."""

    subject: str
    predicate: str
    object: str
    source_uri: str | None = None
    line: int | None = None
    observed_at: str | None = None
    source_rev: str | None = None
    props: dict[str, Any] = field(default_factory=dict)
    confidence: str | None = None  # facts only: confirmed | partial | hypothesis | contradicted


@dataclass
class Graph:
    """The nodes and edges one source (an entry, a code file, a git history) contributes."""

    nodes: list[NodeRecord] = field(default_factory=list)
    edges: list[EdgeRecord] = field(default_factory=list)


@dataclass(frozen=True)
class EdgeRow:
    """An edge as read back, with its library's name."""

    subject: str
    predicate: str
    object: str
    library: str
    source_uri: str | None
    line: int | None
    observed_at: str | None
    source_rev: str | None
    props: dict[str, Any]
    root: str  # info (what notes and code say) or facts (what collectors observed)


EDGE_SELECT = """
SELECT g.subject, g.predicate, g.object, l.name AS library, g.source_uri, g.line,
       g.observed_at, g.source_rev, g.props, g.root
FROM edge g JOIN library l ON l.id = g.library_id
"""


@dataclass(frozen=True)
class ChunkRecord:
    id: int
    ord: int
    heading: str
    line_start: int
    line_end: int
    text: str
    embed_hash: str
    fts_title: str
    fts_heading: str
    fts_body: str
    fts_forms: str = ""  # the words' other forms: stems, bracketed words joined


@dataclass(frozen=True)
class PendingChunk:
    """A chunk without a vector for the current model, with what its embedding text needs."""

    id: int
    library_id: int
    embed_hash: str
    title: str
    aliases: list[str]
    heading: str
    text: str


@dataclass
class Filters:
    """Metadata filters shared by the BM25 and vector candidate queries."""

    library_ids: list[int] | None = None
    types: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    since: str | None = None
    # a project: entries that say `project: <name>`, or that live in one of its libraries, or
    # (``shared_library_ids``, the global brain) that name no other project
    project: str | None = None
    project_library_ids: list[int] = field(default_factory=list)
    shared_library_ids: list[int] = field(default_factory=list)
    not_types: list[str] = field(default_factory=list)
    # superseded, retired and archived entries too (by default only active ones)
    include_inactive: bool = False

    @property
    def only_libraries(self) -> bool:
        """True when no filter other than the library and the status is set (vectors filter
        those in memory)."""
        return not (self.types or self.tags or self.since or self.project or self.not_types)

    def sql(self) -> tuple[str, list[Any]]:
        """The conditions on ``e`` (the entry), status included."""
        where, params = self.metadata_sql()
        if self.include_inactive:
            return where, params
        active = "e.status = 'active'"
        return (active if where == "TRUE" else f"{where} AND {active}"), params

    def metadata_sql(self) -> tuple[str, list[Any]]:
        """The conditions on ``e`` but the status ("TRUE" when there are none)."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.library_ids is not None:
            clauses.append(f"e.library_id IN ({marks(len(self.library_ids))})")
            params += self.library_ids
        if self.types:
            clauses.append(f"e.type IN ({marks(len(self.types))})")
            params += self.types
        for tag in self.tags:
            clauses.append(
                "EXISTS (SELECT 1 FROM entry_tag t WHERE t.entry_id = e.id AND t.tag = ?)"
            )
            params.append(tag)
        if self.since:
            clauses.append("e.updated >= ?")
            params.append(self.since)
        if self.project is not None:
            ids, shared = self.project_library_ids, self.shared_library_ids
            clauses.append(
                f"(e.project = ? OR e.library_id IN ({marks(len(ids))}) OR "
                f"(e.library_id IN ({marks(len(shared))}) AND e.project IS NULL))"
            )
            params += [self.project, *ids, *shared]
        if self.not_types:
            clauses.append(f"e.type NOT IN ({marks(len(self.not_types))})")
            params += self.not_types
        return " AND ".join(clauses) or "TRUE", params


def this_machine() -> str:
    """The name this machine goes by in a shared index: ``$BRAINMAP_MACHINE``, else the host
    name."""
    return os.environ.get("BRAINMAP_MACHINE") or socket.gethostname()


def source_of(host: str | None, library_path: str, path: str) -> str:
    """Where an entry's file is: ``machine:/folder/of/the/library/path.md`` (a library of a
    shared index is one machine's folder; without a host, this machine's)."""
    return f"{host or this_machine()}:{PurePath(library_path) / path}"


def chunk_scope(
    library_ids: Sequence[int] | None, entry_ids: Sequence[str] | None
) -> tuple[str, list[Any]]:
    """SQL conditions (with a leading AND) limiting chunks to libraries and/or entries."""
    where, params = "", list[Any]()
    if library_ids is not None:
        where += f" AND e.library_id IN ({marks(len(library_ids))})"
        params += list(library_ids)
    if entry_ids is not None:
        where += f" AND c.entry_id IN ({marks(len(entry_ids))})"
        params += list(entry_ids)
    return where, params


@dataclass(frozen=True)
class HitRow:
    chunk_id: int
    entry_id: str
    ord: int
    heading: str
    line_start: int
    line_end: int
    text: str
    path: str
    title: str
    type: str
    tags: list[str]
    project: str | None
    created: str | None
    last_verified: str | None
    updated: str
    mtime_ns: int
    library: str
    library_path: str
    scope: str
    source_rev: str | None
    status: str = "active"  # active, superseded, retired or archived
    host: str | None = None  # the machine whose folder the library is (None: this one)


HIT_SELECT = """
SELECT c.id AS chunk_id, c.entry_id, c.ord, c.heading, c.line_start, c.line_end, c.text, e.path,
       e.title, e.type, e.tags, e.project, e.created, e.last_verified, e.updated, e.mtime_ns,
       l.name AS library, l.path AS library_path, l.scope, e.source_rev, e.status, l.host
FROM chunk c JOIN entry e ON e.id = c.entry_id JOIN library l ON l.id = e.library_id
"""


@dataclass(slots=True)
class ObservationRecord:
    """A triplet one source states (facts root), as written and read back."""

    subject: str
    predicate: str
    object: str
    kind: str  # runtime | config | narrative
    method: str  # compose, docker-ps, sockets, ssh-config, yaml-config, url, compose-ps, ...
    path: str  # the file (library-relative), or what was run ("docker ps", "psutil")
    line: int | None
    observed_at: str
    source_rev: str | None
    props: dict[str, Any] = field(default_factory=dict)
    library: str = ""  # set when read back


@dataclass(frozen=True)
class FactRow(EdgeRow):
    """An assertion of the facts root as read back: an edge with its confidence."""

    confidence: str


@dataclass(frozen=True)
class VectorRows:
    """Vectors of one model as of one vector generation: chunk ids (ascending), their library
    ids and their float32 vectors concatenated. A chunk with windows has several vectors in a
    row under its id, its whole text's first. As a change set (``since`` set), ``touched`` are
    the chunks whose vector was added or removed after generation ``since``: those of them that
    have a vector now are in ``ids``."""

    generation: int
    ids: list[int]
    library_ids: list[int]
    vectors: bytes
    since: int | None = None
    touched: list[int] = field(default_factory=list)
