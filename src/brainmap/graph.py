"""The knowledge graph: node keys, the triplets of entries and code files, walks and hops.

Nodes are keyed ``kind:identity``: ``entity:<name>`` (names folded for case and spaces),
``entry:<id>``, ``file:<library>/<path>``, ``commit:<sha>``, ``person:<email>``,
``tag:<tag>`` and ``slug:<file stem>`` (what a ``Brain:`` comment names). Aliases are resolved
when the graph is read, not when it is written: an entry's ``aliases`` become
``entity:<alias> -alias_of-> entity:<title>`` edges, so renaming an alias merges or splits
nodes without rewriting the edges of any other entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from brainmap.errors import UserError
from brainmap.keys import EntryRef, NodeKey, name_of
from brainmap.markdown import LINKS_TO, Entry
from brainmap.store import (
    ALIAS_OF,
    AUTHORED_BY,
    REFERENCES,
    EdgeRecord,
    EdgeRow,
    Graph,
    NodeRecord,
    Store,
)

FROM_FILE = "from_file"
DESCRIBES = "describes"
TAGGED = "tagged"
KINDS = ("entity", "entry", "file", "commit", "person", "tag", "slug")
# Titles that name a kind of page, not a thing: entries called so describe no entity (else
# every README of every library would meet at one node)
GENERIC_TITLES = frozenset(
    {"readme", "index", "notes", "todo", "changelog", "overview", "introduction", "intro",
     "untitled", "home", "contents", "license", "contributing", "faq", "summary"}
)  # fmt: skip
MAX_DEPTH = 3
MAX_ALIAS_CHAIN = 8  # a -alias_of-> b -alias_of-> c ... is followed this far


def norm_name(name: str) -> str:
    """Entity names compare without case and with runs of spaces folded."""
    return " ".join(name.split()).casefold()


def entity_key(name: str) -> str:
    return "entity:" + norm_name(name)


def entry_key(entry_id: str) -> str:
    return "entry:" + entry_id


def file_key(library: str, rel: str) -> str:
    return f"file:{library}/{rel}"


def commit_key(sha: str) -> str:
    return "commit:" + sha


def person_key(email: str, name: str) -> str:
    return "person:" + (email.strip().lower() or norm_name(name))


def breadcrumb_slug(ref: str) -> str:
    """What a ``Brain:`` reference names: the file name of an entry, without ``library:``,
    folders or a markdown extension (``docs:ops/Release-1.2.md`` -> ``release-1.2``)."""
    name = EntryRef.parse(ref).path.rsplit("/", 1)[-1]
    for ext in (".md", ".markdown"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name.lower()


def slug_key(ref: str) -> str:
    return "slug:" + breadcrumb_slug(ref)


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (to match a file with its history)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def file_node(library: str, rel: str) -> NodeRecord:
    # no props: library and path are in the key (library names have no "/")
    return NodeRecord(file_key(library, rel), "file", rel)


# --- building -------------------------------------------------------------------------------


def entry_graph(
    library: str, entry_id: str, rel: str, parsed: Entry, observed_at: str, source_rev: str | None
) -> Graph:
    """The triplets an entry states: its file, the entity it describes, its aliases, tags,
    wiki links and typed relations (frontmatter ``relations`` and ``- predicate [[X]]``)."""
    me = entry_key(entry_id)
    graph = Graph()
    nodes: dict[str, NodeRecord] = {}

    def edge(predicate: str, obj: NodeRecord, line: int | None = None, subject: str = me) -> None:
        nodes.setdefault(obj.key, obj)
        graph.edges.append(
            EdgeRecord(subject, predicate, obj.key, rel, line, observed_at, source_rev)
        )

    nodes[me] = NodeRecord(me, "entry", parsed.title)
    edge(FROM_FILE, file_node(library, rel))
    title = _entity(parsed.title) if norm_name(parsed.title) not in GENERIC_TITLES else None
    if title is not None:
        edge(DESCRIBES, title)
        for alias in parsed.aliases:
            node = _entity(alias)
            if node is not None and node.key != title.key:
                nodes.setdefault(node.key, node)
                edge(ALIAS_OF, title, subject=node.key)
    for tag in parsed.tags:
        edge(TAGGED, NodeRecord("tag:" + tag, "tag", tag))
    seen: set[tuple[str, str]] = set()
    for link in parsed.links:
        node = _entity(link.target)
        if node is None or (link.predicate, node.key) in seen:
            continue  # a second mention of the same link adds nothing
        seen.add((link.predicate, node.key))
        edge(link.predicate or LINKS_TO, node, link.line)
    graph.nodes = list(nodes.values())
    return graph


def _entity(name: str) -> NodeRecord | None:
    key = entity_key(name)
    return NodeRecord(key, "entity", " ".join(name.split())) if len(key) > 7 else None


def code_graph(
    library: str,
    rel: str,
    crumbs: list[tuple[str, int]],
    observed_at: str,
    source_rev: str | None,
) -> Graph:
    """``file -references-> slug`` for each ``Brain: slug`` comment of a code file (a file
    without any contributes nothing: a node lives only as long as an edge names it)."""
    graph = Graph()
    if not crumbs:
        return graph
    me = file_node(library, rel)
    nodes = {me.key: me}
    for slug, line in crumbs:
        key = slug_key(slug)
        if not name_of(key):
            continue
        nodes.setdefault(key, NodeRecord(key, "slug", name_of(key)))
        graph.edges.append(
            EdgeRecord(me.key, REFERENCES, key, rel, line, observed_at, source_rev, {"ref": slug})
        )
    graph.nodes = list(nodes.values())
    return graph


# --- reading --------------------------------------------------------------------------------


@dataclass
class Node:
    key: str
    kind: str
    label: str
    depth: int = 0
    props: dict[str, Any] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)


@dataclass
class Edge:
    """A triplet as shown to users: endpoints resolved (aliases merged), with provenance."""

    subject: str
    predicate: str
    object: str
    library: str
    path: str | None
    line: int | None
    observed_at: str | None
    source_rev: str | None
    # info: what a note or code says; facts: what a collector observed (`ask` and `audit`
    # give its confidence)
    root: str = "info"


@dataclass
class Neighborhood:
    center: Node
    nodes: list[Node]
    edges: list[Edge]
    truncated: bool = False


@dataclass
class CommitInfo:
    sha: str
    time: str | None
    message: str
    author: str | None = None


@dataclass
class PersonInfo:
    name: str
    email: str


@dataclass
class Hops:
    """The provenance chain of a hit: Leaf -from_file-> File -has_version-> Commit
    -authored_by-> Person, as deep as asked."""

    file: str
    library: str
    path: str
    source_rev: str | None = None
    commits: list[CommitInfo] | None = None
    people: list[PersonInfo] | None = None


@dataclass
class Breadcrumb:
    """A ``Brain:`` comment: which code line names which entry."""

    library: str
    file: str
    line: int
    ref: str
    entries: list[str]  # the entries it names, as library:path (none: a dangling breadcrumb)


class GraphReader:
    """Walks over the stored graph (one store, one thread)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def resolve(self, ref: str, libraries: Iterable[str] = ()) -> str:
        """A node key from a key (``entity:x``), an entry ref (id, ``library:path``) or a name.

        A file path inside a library may be given as ``library:path`` or ``library/path``.
        """
        node = NodeKey.parse(ref)
        if node.kind in KINDS and node.name:
            return ref if node.kind != "entity" else entity_key(node.name)
        # any stored key: host:nas, service:shop/web
        if node.kind and self.store.graph.nodes([ref]):
            return ref
        found = self.store.entries.find_entry(ref)
        if found is not None:
            return entry_key(found[0])
        entry = EntryRef.parse(ref)
        if entry.library and entry.library in set(libraries):
            return file_key(entry.library, entry.path)
        key = entity_key(ref)
        if not self.store.graph.nodes([key]):
            # a name as the map and the GUI show it: the label of a fact's node (``nas`` is
            # host:nas), an entity first when several nodes carry it
            labelled = self.store.graph.keys_labelled(ref)
            if labelled:
                return min(labelled, key=lambda k: (not k.startswith("entity:"), k))
        return key

    def canonical(self, keys: list[str]) -> dict[str, str]:
        """Each key's node after merging: an alias becomes its entity; a slug naming exactly
        one entry becomes that entry."""
        out = {k: k for k in keys}
        for key, target in self.store.graph.alias_targets(
            [k for k in keys if k.startswith("entity:")]
        ).items():
            out[key] = self._alias_chain(key, target)
        for key in keys:
            if key.startswith("slug:"):
                entries = self.store.entries.with_slug(name_of(key))
                if len(entries) == 1:
                    out[key] = entry_key(entries[0][0])
        return out

    def _alias_chain(self, key: str, target: str) -> str:
        """Follow ``alias_of`` from ``key`` (whose first target is ``target``) to its end; in a
        cycle the smallest key stands for all of it."""
        chain = [key]
        while target not in chain and len(chain) < MAX_ALIAS_CHAIN:
            chain.append(target)
            following = self.store.graph.alias_targets([target]).get(target)
            if following is None:
                return target
            target = following
        return min(chain[chain.index(target) :]) if target in chain else target

    def members(self, key: str) -> list[str]:
        """The stored keys that make up one merged node (an entity and its aliases, and
        theirs; an entry and the slug that code comments use for it)."""
        keys = [key]
        if key.startswith("entity:"):
            for name in keys:  # grows while aliases of aliases turn up
                if len(keys) >= MAX_ALIAS_CHAIN * 8:
                    break
                aliases = self.store.graph.edges_to(name, ALIAS_OF)
                keys += [e.subject for e in aliases if e.subject not in keys]
        elif key.startswith("entry:"):
            row = self.store.entries.entry(name_of(key))
            if row is not None:
                keys.append("slug:" + row["slug"])
        return keys

    def neighbors(
        self,
        ref: str,
        *,
        depth: int = 1,
        predicates: list[str] | None = None,
        limit: int = 200,
        libraries: Iterable[str] = (),
        only: Sequence[str] | None = None,
    ) -> Neighborhood:
        """Breadth-first walk from a node, ``depth`` edges out, in both directions, up to
        ``limit`` neighbours; only edges between returned nodes are returned. With ``only``,
        only edges of those libraries, from a node that is not an entry or file of another."""
        depth = max(1, min(depth, MAX_DEPTH))
        start = self.resolve(ref, libraries)
        start = self.canonical([start])[start]
        seeing = self.store.db.visible
        if only is not None:
            seeing = frozenset(only) if seeing is None else seeing & frozenset(only)
        if seeing is not None and not self._inside(start, seeing):
            raise _nothing_called(ref)
        seen = {start: 0}
        aliases: dict[str, list[str]] = {}
        edges: dict[tuple[str, str, str, str | None, int | None], Edge] = {}
        frontier, truncated = [start], False
        for level in range(1, depth + 1):
            following: list[str] = []
            for key in frontier:
                members = self.members(key)
                aliases[key] = [m for m in members if m != key and m.startswith("entity:")]
                # a cap on what one node brings in (a commit may touch 40k files)
                room = max(limit + 2 - len(seen), 1)
                touching, cut = self.store.graph.edges_touching(
                    members, predicates, limit=room * 8, libraries=only
                )
                truncated = truncated or cut
                ends = [e.object if hit == e.subject else e.subject for hit, e in touching]
                resolved = self.canonical(sorted(set(ends)))
                for (hit, edge), other in zip(touching, ends, strict=True):
                    if edge.predicate == ALIAS_OF and resolved[other] == key:
                        continue  # the merge itself, shown as the node's aliases
                    target = resolved[other]
                    if target not in seen:
                        if len(seen) > limit:  # the start node does not count
                            truncated = True
                            continue
                        seen[target] = level
                        following.append(target)
                    ends_ = (key, target) if hit == edge.subject else (target, key)
                    out = _edge(edge, *ends_)
                    edges.setdefault(
                        (out.subject, out.predicate, out.object, out.path, out.line), out
                    )
            frontier = following
        info = self.store.graph.nodes(list(seen))
        nodes = [
            Node(key, *_describe(key, info.get(key)), depth=d, aliases=aliases.get(key, []))
            for key, d in seen.items()
        ]
        center = nodes[0]
        # a node only libraries out of sight hold is none of the caller's (their own entries
        # and files are theirs, linked or not)
        hidden = (
            seeing is not None and not edges and NodeKey.parse(start).kind not in ("entry", "file")
        )
        if (start not in info and not edges) or hidden:
            raise _nothing_called(ref)
        return Neighborhood(center, nodes[1:], list(edges.values()), truncated)

    def _inside(self, key: str, libraries: Collection[str]) -> bool:
        """Whether a node that belongs to one library (an entry, a file) is in ``libraries``;
        any other node (an entity, a commit, a person) belongs to none."""
        node = NodeKey.parse(key)
        if node.kind == "entry":  # one out of the call's sight has no row for it
            row = self.store.entries.entry(node.name)
            return row is not None and row["library"] in libraries
        if node.kind == "file":
            return node.name.split("/", 1)[0] in libraries
        return True

    def hops(self, hits: list[tuple[str, str, str | None]], depth: int, commits: int) -> list[Hops]:
        """The provenance chain of each ``(library, path, source_rev)`` up to ``depth``."""
        out = []
        people_of: dict[str, list[PersonInfo]] = {}
        for library, rel, source_rev in hits:
            key = file_key(library, rel)
            chain = Hops(key, library, rel, source_rev)
            if depth >= 2:
                versions = self.store.graph.file_versions(key, commits)
                chain.commits = [_commit(self.store, v) for v in versions]
            if depth >= 3 and chain.commits is not None:
                chain.people = []
                for commit in chain.commits:
                    if commit.sha not in people_of:
                        people_of[commit.sha] = _authors(self.store, commit.sha)
                    for person in people_of[commit.sha]:
                        if person not in chain.people:
                            chain.people.append(person)
            out.append(chain)
        return out

    def backlinks(self, ref: str) -> tuple[list[str], list[Breadcrumb]]:
        """The code lines whose ``Brain:`` comments name an entry: (the entries as
        ``library:path``, breadcrumbs)."""
        found = self.store.entries.find_entry(ref)
        if found is not None:
            row = self.store.entries.entry(found[0])
            assert row is not None
            slug, refs = row["slug"], [f"{row['library']}:{row['path']}"]
        else:
            slug = breadcrumb_slug(ref)
            refs = [f"{lib}:{rel}" for _, lib, rel in self.store.entries.with_slug(slug)]
        crumbs = [_crumb(e, refs) for e in self.store.graph.edges_to("slug:" + slug, REFERENCES)]
        if not refs and not crumbs:
            raise UserError(f"no entry or breadcrumb named {ref!r}", status=404)
        return refs, crumbs

    def refs(self, library: str, rel: str) -> list[Breadcrumb]:
        """The entries a code file's ``Brain:`` comments name."""
        out = []
        for edge in self.store.graph.edges_from(file_key(library, rel), REFERENCES):
            named = self.store.entries.with_slug(name_of(edge.object))
            out.append(_crumb(edge, [f"{lib}:{rel}" for _, lib, rel in named]))
        return out


def _nothing_called(ref: str) -> UserError:
    return UserError(
        f"nothing in the graph is called {ref!r}",
        hint="give an entry id, library:path, a name, or a key such as entity:postgres",
        status=404,
    )


def _edge(row: EdgeRow, subject: str, obj: str) -> Edge:
    return Edge(
        subject, row.predicate, obj, row.library, row.source_uri, row.line, row.observed_at,
        row.source_rev, row.root,
    )  # fmt: skip


def _describe(key: str, info: tuple[str, str, dict[str, Any]] | None) -> tuple[str, str]:
    if info is None:
        node = NodeKey.parse(key)
        return node.kind, node.name
    return info[0], info[1]


def _commit(store: Store, version: EdgeRow) -> CommitInfo:
    sha = version.object.removeprefix("commit:")
    info = store.graph.nodes([version.object]).get(version.object)
    props = info[2] if info else {}
    return CommitInfo(sha, version.observed_at, info[1] if info else "", props.get("author"))


def _authors(store: Store, sha: str) -> list[PersonInfo]:
    people = [e.object for e in store.graph.edges_from(commit_key(sha), AUTHORED_BY)]
    info = store.graph.nodes(people)
    return [
        PersonInfo(info[p][2].get("name", ""), info[p][2].get("email", ""))
        for p in people
        if p in info
    ]


def _crumb(edge: EdgeRow, entries: list[str]) -> Breadcrumb:
    file = edge.subject.split("/", 1)[1]
    return Breadcrumb(edge.library, file, edge.line or 0, edge.props.get("ref", ""), entries)
