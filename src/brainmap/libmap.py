"""The library map: one block per library saying what it is about, recomputed when it changes.

A block holds the library's narrative (the first paragraph of its top-level README or index
page, else of its most central entry), its top entities by graph degree, its relation profile
(how many edges of each predicate), the bridges (entities other libraries mention too), its
size and git HEAD. Blocks are computed from the index only; a recompute writes a new active
block and supersedes the old one in one transaction, and only when the content changed.
Each block also keeps a routing vector: the centroid of its library's chunk vectors, or, for
a library without any, its sentence ("{library}: {narrative}. Core: {entities}") embedded.
Search routes by the centroids (by the sentences only where no library has a centroid),
through :class:`Router`: on tldr split by language and platform the centroid put the
query's library among the 3 picked for 96% of queries, the sentence for 28%
(benchmarks/routing.py). A block with a centroid gets no sentence vector, which nothing would
read: a note saved into a library then costs no second model call for its map.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from brainmap.analysis import CHARS_PER_TOKEN
from brainmap.config import Config, LibraryConfig
from brainmap.markdown import cut, first_paragraph
from brainmap.project import git_head
from brainmap.store import MapBlockRow, MapVectors, NewBlock, Store

if TYPE_CHECKING:
    import numpy as np

# Files whose first paragraph says what a library is, in order of preference (at its root,
# in any case).
NARRATIVE_FILES = ("README.md", "index.md", "_index.md", "README.markdown", "home.md")
PROFILE_SIZE = 12  # predicates kept in the relation profile
# Predicates that every entry or file has: they describe the index, not the library.
STRUCTURAL_PREDICATES = frozenset({"from_file"})
CENTROID_DRIFT = 0.05  # a centroid is recomputed when its library's vector count moves more


@dataclass
class Entity:
    """A node of the library's graph with its degree inside the library."""

    name: str
    key: str
    degree: int


@dataclass
class Bridge:
    """An entity this library shares with others."""

    name: str
    key: str
    libraries: list[str]


@dataclass
class MapBlock:
    """The summary of one library (``status`` active, or superseded by a newer block)."""

    library: str
    narrative: str
    narrative_source: str | None  # the entry path the narrative comes from
    top_entities: list[Entity]
    relation_profile: dict[str, int]
    bridges: list[Bridge]
    bridged_libraries: dict[str, int]  # library -> how many entities it shares with this one
    triplet_count: int
    entries: int
    chunks: int
    last_change: str | None  # newest file modification time of its entries
    commit_hash: str | None  # git HEAD of the library's folder, when it is in a repository
    id: int = 0
    status: str = "active"
    created_at: str = ""
    routable: bool = False  # search can route to it (it has a centroid or sentence vector)

    def sentence(self) -> str:
        """What is embedded for routing: the library, its narrative and its core entities."""
        core = ", ".join(e.name for e in self.top_entities)
        return f"{self.library}: {self.narrative}. Core: {core}"


def _content(block: MapBlock) -> dict[str, Any]:
    data = asdict(block)
    for key in ("id", "status", "created_at", "routable"):
        data.pop(key)
    return data


def _digest(data: Any) -> str:
    return hashlib.sha256(
        json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()


def fingerprint(block: MapBlock) -> str:
    """The digest of a block's content (not of its id, status or time)."""
    return _digest(_content(block))


def sentence_hash(block: MapBlock) -> str:
    """The vector cache key of a block's embedded sentence."""
    return hashlib.sha256(("map\n" + block.sentence()).encode("utf-8")).hexdigest()


def decode(row: MapBlockRow) -> MapBlock:
    """The block stored in a row, with the row's id, status and time."""
    data = json.loads(row.block)
    block = MapBlock(
        **{k: v for k, v in data.items() if k not in ("top_entities", "bridges")},
        top_entities=[Entity(**e) for e in data["top_entities"]],
        bridges=[Bridge(**b) for b in data["bridges"]],
    )
    block.id, block.status, block.created_at = row.id, row.status, row.created_at
    block.routable = row.centroid is not None or row.vec is not None
    return block


# --- computing a block ----------------------------------------------------------------------


@dataclass
class Computed:
    """A computed block, and per partner library a digest of the entities it shares with it
    (a partner's bridges change exactly when its digest does)."""

    block: MapBlock
    partners: dict[str, str]


def compute(
    cfg: Config, store: Store, lib: LibraryConfig, library_id: int, head: str | None
) -> Computed:
    """The block of one library, from the index as it is now (``head``: its git HEAD)."""
    settings = cfg.map
    degrees = store.maps.entity_degrees(library_id)
    top = _top_entities(degrees, settings.top_entities)
    predicates = store.maps.predicate_counts(library_id)
    profile = dict(
        sorted(
            ((p, n) for p, n in predicates.items() if p not in STRUCTURAL_PREDICATES),
            key=lambda item: (-item[1], item[0]),
        )[:PROFILE_SIZE]
    )
    shared = store.maps.libraries_sharing(list(degrees), library_id)
    by_partner: dict[str, list[str]] = {}
    for key, names in shared.items():
        for name in names:
            by_partner.setdefault(name, []).append(key)
    bridged = {name: len(keys) for name, keys in by_partner.items()}
    partners = {name: _digest(sorted(keys)) for name, keys in by_partner.items()}
    bridges = [
        Bridge(degrees[key][0], key, sorted(names))
        for key, names in sorted(
            shared.items(), key=lambda item: (-len(item[1]), -degrees[item[0]][1], item[0])
        )[: settings.bridges]
    ]
    source, narrative = _narrative(store, library_id, top, settings.narrative_chars)
    size = store.maps.library_size(library_id)
    last = (
        dt.datetime.fromtimestamp(size.last_change_ns / 1e9, dt.UTC).isoformat(timespec="seconds")
        if size.last_change_ns
        else None
    )
    block = MapBlock(
        library=lib.name, narrative=narrative, narrative_source=source, top_entities=top,
        relation_profile=profile, bridges=bridges,
        bridged_libraries=dict(sorted(bridged.items(), key=lambda item: (-item[1], item[0]))),
        triplet_count=sum(predicates.values()), entries=size.entries, chunks=size.chunks,
        last_change=last, commit_hash=head,
    )  # fmt: skip
    return Computed(block, partners)


MAX_NAME_CHARS = 48  # longer is a sentence (an untitled note's first line), not a name
MAX_NAME_WORDS = 6
_PATH_LIKE = re.compile(r"^(~|/|\.{1,2}/)|\.\./|://|\\")


def readable_name(label: str) -> bool:
    """Whether a reader would name what a library is about with ``label``: words with
    letters, not an address (192.168.1.10), a path (../../etc/x), a URL or a sentence."""
    if not label.isprintable() or len(label) > MAX_NAME_CHARS:
        return False
    if not any(c.isalpha() for c in label) or len(label.split()) > MAX_NAME_WORDS:
        return False
    if _PATH_LIKE.search(label):
        return False
    if ":" not in label:  # a label with letters is an address only as IPv6 (hex and colons)
        return True
    host, _, port = label.rpartition(":")
    for address in (label, host if port.isdigit() else label, label.strip("[]")):
        try:
            ipaddress.ip_address(address)
            return False
        except ValueError:
            pass
    return True


def _prose(text: str) -> bool:
    """Whether a paragraph reads as prose: a few words, mostly letters (not a pasted token,
    a hash or a line of code)."""
    words = [w for w in text.split() if any(c.isalpha() for c in w)]
    letters = sum(c.isalpha() or c.isspace() for c in text)
    # scripts written without spaces (Chinese, Japanese) make few words of many letters
    enough = len(words) >= 3 or (not text.isascii() and letters >= 12)
    return enough and letters >= 0.75 * len(text)


def _top_entities(degrees: dict[str, tuple[str, int]], count: int) -> list[Entity]:
    """The ``count`` entities of highest degree whose names a reader would choose; a tag and
    an entity of the same name are one (their degrees add up, the better connected key names
    it)."""
    merged: dict[str, Entity] = {}
    for key, (label, degree) in sorted(degrees.items(), key=lambda item: (-item[1][1], item[0])):
        if not readable_name(label):
            continue
        same = merged.get(label.casefold())
        if same is None:
            merged[label.casefold()] = Entity(label, key, degree)
        else:
            same.degree += degree
    return sorted(merged.values(), key=lambda e: (-e.degree, e.key))[:count]


def _narrative(
    store: Store, library_id: int, top: list[Entity], limit: int
) -> tuple[str | None, str]:
    """(entry path, first paragraph) of the top-level README/index page, else of the entry
    describing the top entity, else of the entry with the most edges."""
    candidates: tuple[Callable[[], str | None], ...] = (
        lambda: store.maps.top_level_entry(library_id, NARRATIVE_FILES),
        lambda: store.maps.entry_describing(library_id, top[0].key) if top else None,
        lambda: store.maps.busiest_entry(library_id),
    )
    tried: set[str] = set()
    for candidate in candidates:  # lazily: the last one is a GROUP BY over every edge
        entry_id = candidate()
        if entry_id is None or entry_id in tried:
            continue
        tried.add(entry_id)
        text = first_paragraph(store.maps.chunk_texts(entry_id, 3), limit)
        if text and _prose(text):
            row = store.entries.entry(entry_id)
            return (str(row["path"]) if row else None), text
    return None, ""


def _head(lib: LibraryConfig) -> str | None:
    """The commit the library's repository is at (None outside git or before a commit)."""
    return git_head(lib.path.absolute())


# --- recompute ------------------------------------------------------------------------------


@dataclass
class RecomputeReport:
    """Which libraries got a new block, which kept theirs, which have nothing indexed."""

    recomputed: list[str] = field(default_factory=list)  # a new block was written
    unchanged: list[str] = field(default_factory=list)  # computed, same content as before
    not_indexed: list[str] = field(default_factory=list)  # no index rows yet


def state_of(store: Store, library_id: int, head: str | None) -> str:
    """What the library's block was computed from, as a string to compare."""
    return json.dumps([*store.maps.library_state(library_id), head])


def refresh(
    cfg: Config, store: Store, libs: Sequence[LibraryConfig] | None = None, *, embed: bool = True
) -> list[str]:
    """Recompute the blocks of those ``libs`` (all by default) whose state changed since
    their block was computed (files indexed, facts paired, git history imported or HEAD
    moved), or which have none. Returns the libraries given a new block."""
    todo = _behind(store, list(cfg.libraries if libs is None else libs), new_ones=True)
    if not todo:
        refresh_vectors(cfg, store, embed=embed)
        return []
    return recompute(cfg, store, todo, embed=embed, just_indexed=True).recomputed


def stale(cfg: Config, store: Store) -> list[str]:
    """The indexed libraries whose block is missing or was computed from an older index."""
    return _behind(store, cfg.libraries, new_ones=False)


def _behind(store: Store, libs: Sequence[LibraryConfig], *, new_ones: bool) -> list[str]:
    """The libraries whose block's state is not their state now; with ``new_ones``, also
    those never indexed and without a block (an empty library just indexed)."""
    ids = store.entries.library_ids(lib.name for lib in libs)
    current = {row.library: row.state for row in store.maps.blocks([lib.name for lib in libs])}
    known = set(current) | {row.name for row in store.entries.libraries() if row.indexed_at}
    return [
        lib.name
        for lib in libs
        if lib.name in ids
        and (new_ones or lib.name in known)
        and current.get(lib.name) != state_of(store, ids[lib.name], _head(lib))
    ]


def recompute(
    cfg: Config,
    store: Store,
    names: Sequence[str] | None = None,
    *,
    embed: bool = True,
    just_indexed: bool = False,
    exact: bool = False,
    attempts: int = 3,
) -> RecomputeReport:
    """Recompute the blocks of the named libraries (all when None), and of the libraries
    whose bridges to them changed, and store them in one transaction. A library whose
    block would not change keeps it; one added but never indexed (unless ``just_indexed``)
    gets none. ``exact`` also recomputes the named libraries' centroids from all their
    vectors. A block that lost a race with a concurrent recompute is computed again."""
    libs = cfg.select(list(names) if names is not None else None)
    ids = store.entries.library_ids(lib.name for lib in cfg.libraries)
    old = {row.library: row for row in store.maps.blocks()}
    report = RecomputeReport()
    new: list[NewBlock] = []
    kept: list[tuple[int, str, str]] = []
    partners: set[str] = set()
    embedding = [embed]

    def plan(lib: LibraryConfig) -> Computed:
        library_id = ids[lib.name]
        # the state first: a change indexed while computing leaves the state behind, so the
        # next refresh computes again (the other way round it would be missed for good)
        head = _head(lib)
        state = state_of(store, library_id, head)
        computed = compute(cfg, store, lib, library_id, head)
        block = computed.block
        digest = fingerprint(block)
        before = old.get(lib.name)
        if before is not None and before.fingerprint == digest:
            report.unchanged.append(lib.name)
            kept.append((before.id, state, json.dumps(computed.partners)))
            return computed
        block.created_at = _now()
        vectors = _vectors(cfg, store, library_id, block, embedding[0], before, exact)
        embedding[0] = embedding[0] and _embedded(vectors)
        content = json.dumps(_content(block), ensure_ascii=False)
        new.append(NewBlock(library_id, digest, state, content, block.created_at, vectors,
                            json.dumps(computed.partners), before.id if before else None))  # fmt: skip
        report.recomputed.append(lib.name)
        return computed

    indexed = {row.name for row in store.entries.libraries() if row.indexed_at} | set(old)
    for lib in libs:
        if lib.name not in ids or (
            not just_indexed
            and lib.name not in indexed
            and not store.maps.library_size(ids[lib.name]).entries
        ):  # added, never indexed: nothing to say about it yet
            report.not_indexed.append(lib.name)
            continue
        # partners whose shared entities changed get new bridges (even when this block
        # itself stays: a shared entity may be outside what it lists)
        was = json.loads(old[lib.name].partners) if lib.name in old else {}
        now = plan(lib).partners
        partners |= {name for name in set(was) | set(now) if was.get(name) != now.get(name)}
    done = {lib.name for lib in libs}
    for lib in cfg.libraries:
        if lib.name in partners - done and lib.name in ids:
            plan(lib)
    lost = store.maps.save(new, kept) if new or kept else []
    if lost:
        names_of = {library_id: name for name, library_id in ids.items()}
        again = [names_of[i] for i in lost]
        report.recomputed = [n for n in report.recomputed if n not in again]
        if attempts > 1:
            retry = recompute(cfg, store, again, embed=embedding[0], just_indexed=True,
                              exact=exact, attempts=attempts - 1)  # fmt: skip
            report.recomputed += retry.recomputed
    refresh_vectors(cfg, store, embed=embedding[0], skip=set(report.recomputed),
                    exact=[lib.name for lib in libs] if exact else ())  # fmt: skip
    return report


def refresh_vectors(
    cfg: Config,
    store: Store,
    *,
    embed: bool = True,
    exact: Collection[str] = (),
    skip: Collection[str] = (),
) -> None:
    """Bring the vectors of the active blocks up to date: the centroid when the number of
    the library's chunk vectors moved by more than ``CENTROID_DRIFT`` (or the model changed),
    the sentence of a block without centroid or sentence vector (with ``embed``). The libraries in ``exact`` get their
    centroid recomputed in any case; those in ``skip`` were just computed."""
    from brainmap.embedders import model_id_of

    model = model_id_of(cfg.embedder)
    counts = store.vectors.counts(model)
    for row in store.maps.blocks():
        if row.library in skip:
            continue
        current = row.model == model and _near(row.centroid_n, counts.get(row.library, 0))
        current = current and not (row.library in exact and counts.get(row.library))
        if not current or (embed and row.vec is None and row.centroid is None):
            block = decode(row)
            vectors = _vectors(cfg, store, row.library_id, block, embed, row, row.library in exact)
            store.maps.set_vectors(row.id, vectors)
            embed = embed and _embedded(vectors)


def _embedded(vectors: MapVectors) -> bool:
    """Whether the embedder did its part (a block with a centroid needs no sentence vector;
    one without whose sentence got none: the embedder is down, stop trying)."""
    return vectors.centroid is not None or vectors.sentence is not None


def _near(before: int, now: int) -> bool:
    return before == now or (before > 0 and abs(now - before) <= CENTROID_DRIFT * before)


def _vectors(
    cfg: Config,
    store: Store,
    library_id: int,
    block: MapBlock,
    embed: bool,
    previous: MapBlockRow | None,
    exact: bool = False,
) -> MapVectors:
    """A block's vectors: the mean of its library's chunk vectors (what search routes by:
    benchmarks/routing.py), or its embedded sentence when it has none. Unless ``exact``, the
    previous block's centroid is kept while the number of chunk vectors stays within
    ``CENTROID_DRIFT`` of it: a big library's mean barely moves with one saved note, and
    reading all its vectors takes a while. Without ``embed`` the previous sentence vector is
    kept if the sentence is."""
    from brainmap.embedders import model_id_of

    model = model_id_of(cfg.embedder)
    same = previous is not None and previous.model == model
    reusable = not exact and same and previous is not None and previous.centroid is not None
    count = store.vectors.counts(model, library_id).get(block.library, 0) if reusable else -1
    if reusable and previous is not None and _near(previous.centroid_n, count):
        centroid, count = previous.centroid, previous.centroid_n
    else:
        stored = store.vectors.of_library(library_id, model)
        count, centroid = len(stored), None
        if stored:
            import numpy as np  # only a recomputed centroid needs it

            matrix = np.frombuffer(b"".join(stored), dtype=np.float32).reshape(len(stored), -1)
            mean = matrix.mean(axis=0)
            norm = float(np.linalg.norm(mean))
            centroid = (mean / norm if norm else mean).astype(np.float32).tobytes()
    if centroid is not None:  # routed by it: the sentence's vector would go unread
        return MapVectors(model, None, centroid, count)
    sentence = _sentence_vector(cfg, block) if embed else None
    unchanged = previous is not None and decode(previous).sentence() == block.sentence()
    if sentence is None and same and unchanged and previous is not None:
        sentence = previous.vec
    return MapVectors(model, sentence, centroid, count)


def _sentence_vector(cfg: Config, block: MapBlock) -> bytes | None:
    """The vector of a block's sentence (from the vector cache when known), or None when no
    embedder can be loaded."""
    from brainmap.embedders import EmbedderError, load_embedder, model_id_of
    from brainmap.store import VectorCache

    model = model_id_of(cfg.embedder)
    digest = sentence_hash(block)
    cache = VectorCache(cfg.cache_path)
    try:
        found = cache.get_many(model, [digest]).get(digest)
        if found is not None:
            return found
        try:
            vec = load_embedder(cfg.embedder).passages([block.sentence()])[0]
        except EmbedderError:
            return None
        data: bytes = vec.astype("float32").tobytes()
        cache.put_many(model, [(digest, data)])
        return data
    finally:
        cache.close()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --- reading --------------------------------------------------------------------------------


def blocks(store: Store, names: Sequence[str] | None = None) -> list[MapBlock]:
    """The active blocks, by library name."""
    return [decode(row) for row in store.maps.blocks(names)]


def compact(all_blocks: Sequence[MapBlock], budget_tokens: int) -> str:
    """The map as text for an agent's instructions, within ``budget_tokens``.

    Truncation rule: libraries are listed largest first (by triplets, then entries). Each
    gets its narrative (cut to 160 chars), core entities and bridges; when that exceeds the
    budget every line loses its narrative and bridges; when that still exceeds it, the
    smallest libraries are left out and a last line says how many and where to find them.
    """
    budget = budget_tokens * CHARS_PER_TOKEN
    ordered = sorted(all_blocks, key=lambda b: (-b.triplet_count, -b.entries, b.library))
    count = f"{len(ordered)} {'library' if len(ordered) == 1 else 'libraries'}"
    header = f"Library map ({count}; `map` lists them, `get_map` gives one in full):"
    if not ordered:
        return header + "\n(no library is indexed yet)"
    for full in (True, False):
        lines = [_line(b, full) for b in ordered]
        if len(header) + sum(len(line) + 1 for line in lines) <= budget:
            return "\n".join([header, *lines])
    kept: list[str] = []
    used = len(header)
    for line in lines:
        # keep room for the closing line
        if used + len(line) + 1 + 90 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    left = len(ordered) - len(kept)
    closing = f"... and {left} smaller libraries not shown: call `map` for all of them."
    return "\n".join([header, *kept, closing])


def _line(block: MapBlock, full: bool) -> str:
    core = ", ".join(e.name for e in block.top_entities[: 5 if full else 3])
    line = f"- {block.library} ({block.entries} entries)"
    if full and block.narrative:
        line += f": {cut(block.narrative, 160)}"
    if core:
        line += f" Core: {core}."
    if full and block.bridged_libraries:
        partners = ", ".join(list(block.bridged_libraries)[:4])
        line += f" Bridges to: {partners}."
    return line


# --- routing: the libraries a query searches, by the blocks' vectors --------------------------


class Router:
    """Routes queries to the libraries nearest them, by the map's routing vectors (kept as of
    the map's generation and the configured libraries)."""

    def __init__(self, cfg: Config, store: Store, model: str) -> None:
        self.cfg = cfg
        self.store = store
        self.model = model  # the embedder's: a block's vectors of another model do not route
        self._routes: _Routes | None = None

    def route(self, query_vector: np.ndarray) -> list[str] | None:
        """The libraries a query should search, or None when routing does not apply (too
        few libraries, or none with a routing vector): the ``route_libraries`` nearest the
        query, plus every library the map cannot place (no block or no vector yet)."""
        routes = self._table()
        if not routes.applies(self.cfg.map.route_above):
            return None
        count = self.cfg.map.route_libraries
        return route_libraries(query_vector, routes.names, routes.matrix, count) + routes.always

    def applies(self) -> bool:
        """Whether :meth:`route` picks libraries (see :meth:`_Routes.applies`)."""
        return self._table().applies(self.cfg.map.route_above)

    def _table(self) -> _Routes:
        """The routing vectors, as of the map's current generation and libraries. Libraries
        are placed by the centroid of their chunk vectors; only when none has one, by their
        embedded sentence (the two are not on one scale)."""
        generation: tuple[int | str, ...] = (
            *self.store.maps.generation(),
            *(lib.name for lib in self.cfg.libraries),
        )
        routes = self._routes
        if routes is not None and routes.generation == generation:
            return routes
        rows = {row.library: row for row in self.store.maps.blocks()}
        centroids: dict[str, bytes] = {}
        sentences: dict[str, bytes] = {}
        always: list[str] = []
        for lib in self.cfg.libraries:
            row = rows.get(lib.name)
            if row is None or row.model != self.model or not json.loads(row.block)["chunks"]:
                # no block, no vector, or none yet when its block was made (it may have
                # chunks by now, if a map refresh failed): searched whatever the query
                always.append(lib.name)
            elif row.centroid is not None:
                centroids[lib.name] = row.centroid
            elif row.vec is not None:
                sentences[lib.name] = row.vec
            else:
                always.append(lib.name)
        chosen = centroids or sentences
        if centroids:
            always += list(sentences)
        import numpy as np

        names = list(chosen)
        matrix = (
            np.stack([np.frombuffer(chosen[n], dtype=np.float32) for n in names])
            if names
            else np.zeros((0, 0), dtype=np.float32)
        )
        routes = self._routes = _Routes(generation, names, matrix, always)
        return routes


@dataclass(frozen=True)
class _Routes:
    """The routing vectors of the map blocks, as of one map generation."""

    generation: tuple[int | str, ...]  # the map's generation and the configured libraries
    names: list[str]
    matrix: np.ndarray
    always: list[str]  # searched whatever the query: the map cannot place them

    def applies(self, above: int) -> bool:
        """More libraries than ``above``, some of them with a routing vector."""
        return bool(self.names) and len(self.names) + len(self.always) > above


def route_libraries(
    query_vector: np.ndarray, names: list[str], matrix: np.ndarray, count: int
) -> list[str]:
    """The ``count`` libraries whose routing vector is nearest the query (cosine)."""
    import numpy as np

    scores = matrix @ query_vector.astype(np.float32)
    order = np.argsort(-scores, kind="stable")[:count]
    return [names[int(i)] for i in order]
