"""Hybrid retrieval: BM25 (FTS5) and exact vector search, fused by Reciprocal Rank Fusion.

The Searcher runs a search from its parts: what a query is searched by in the full-text index
(ftsquery), its vector (queryvectors), exact vector search (vectorindex), the libraries the
map routes it to (libmap), rank fusion and staleness decay (fusion); then it grades each hit's
match level and applies the floor.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from brainmap.analysis import (
    ANALYZER_VERSION,
    fold,
    forms_of,
    holds_phrase,
    number_run,
    spell_symbols,
)
from brainmap.config import Config, SearchSettings, scope_label
from brainmap.errors import UserError
from brainmap.ftsquery import MAX_QUERY_TERMS, QueryAnalyser, QueryAnalysis, TermStats
from brainmap.fusion import decay, fuse, rrf
from brainmap.graph import Hops
from brainmap.libmap import Router
from brainmap.queryvectors import QueryEmbedder
from brainmap.reasoner import Spent
from brainmap.store import Filters, HitRow, Store, source_of
from brainmap.vectorindex import VectorIndex

if TYPE_CHECKING:
    from concurrent.futures import Future

    import numpy as np

    from brainmap.project import Project
    from brainmap.rerank import Reranker

Mode = Literal["hybrid", "bm25", "vector"]
MatchLevel = Literal["strong", "weak", "none"]
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "vector")
SNIPPET_CHARS = 240
GRADE_CHARS = 20_000  # of a hit's text, what its match level reads (a chunk can be huge)
EXPAND_QUERY_WEIGHT = 2.0  # RRF weight of the query's own list among its rewrites' (1 each)


@dataclass
class Hit:
    """One retrieved chunk with its provenance and the parts of its score."""

    id: str
    chunk_id: int
    library: str
    scope: str
    path: str
    title: str
    heading: str
    type: str
    tags: list[str]
    line_start: int
    line_end: int
    score: float
    text: str
    snippet: str
    bm25_rank: int | None
    vector_rank: int | None
    similarity: float | None
    decay: float
    updated: str
    source_rev: str | None = None
    hops: Hops | None = None  # with --hop: File, Commits, People behind the hit
    match: MatchLevel = "none"  # how closely it answers the query
    coverage: float = 0.0  # the share of the query's word weight it holds
    status: str = "active"  # superseded, retired, archived: only with include_inactive
    source: str = ""  # machine:/path/of/the/file (a shared index holds many machines' files)


STRONG: MatchLevel = "strong"
WEAK: MatchLevel = "weak"
NONE: MatchLevel = "none"
LEVELS: tuple[MatchLevel, ...] = (NONE, WEAK, STRONG)


def match_level(coverage: float, similarity: float | None, s: SearchSettings) -> MatchLevel:
    """Strong, weak or none, by the thresholds calibrated on real negatives (the queries of
    one corpus against another, and against other text of their own kind: benchmarks/
    floor.py). Nearness of meaning alone makes a hit strong only when it also holds some of
    the query's words: in a library of one kind (recipes, chats) the text nearest to an
    absent topic is as near as a real answer."""
    sim = similarity if similarity is not None else -1.0
    if coverage >= s.strong_coverage or (
        sim >= s.strong_similarity and coverage >= s.weak_coverage
    ):
        return STRONG
    if coverage >= s.weak_coverage or sim >= s.weak_similarity:
        return WEAK
    return NONE


STANDOUT_MARGIN = 0.04  # cosine; nonsense never spreads its nearest ten this far (floor.py)
STANDOUT_RANK = 10


def standout(vector_hits: list[tuple[int, float]]) -> bool:
    """Whether the nearest vector stands out from the tenth: a query about something does,
    nonsense does not (its similarities are all alike). Too few vectors to tell: it does."""
    if len(vector_hits) < STANDOUT_RANK // 2:
        return bool(vector_hits)
    tail = vector_hits[min(STANDOUT_RANK, len(vector_hits)) - 1][1]
    return vector_hits[0][1] - tail >= STANDOUT_MARGIN


@dataclass
class SearchResult:
    query: str
    mode: Mode
    hits: list[Hit]
    terms: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    routed: list[str] | None = None  # the libraries the map routed the search to, if it did
    match: MatchLevel = "none"  # the best hit's level; none: no close match (and no hits)
    expansions: list[str] = field(default_factory=list)  # with expand: the rewrites searched too
    reasoner: Spent | None = None  # with expand: what the rewrites cost, or why they were skipped


def parse_since(value: str | None) -> str | None:
    """``YYYY-MM-DD``, an ISO timestamp, or a relative age like ``7d``, ``2w``, ``6m``, ``1y``."""
    if not value:
        return None
    text = value.strip()
    relative = re.fullmatch(r"(\d{1,9})\s*([dwmy])", text.lower())
    try:
        if relative:
            days = int(relative.group(1)) * {"d": 1, "w": 7, "m": 30, "y": 365}[relative.group(2)]
            today = dt.date.today()
            if days >= (today - dt.date.min).days:
                return dt.date.min.isoformat()  # older than the calendar: everything
            return (today - dt.timedelta(days=days)).isoformat()
        if len(text) > 10:
            return dt.datetime.fromisoformat(text).isoformat()
        return dt.date.fromisoformat(text).isoformat()
    except (ValueError, OverflowError):
        raise UserError(
            f"--since {value!r} is not a date", hint="use YYYY-MM-DD or an age such as 30d, 6m"
        ) from None


class Searcher:
    """Answers queries over one store; keep it alive to keep vectors and the model warm.

    Its parts: ``embedder`` (query and passage vectors), ``analyser`` (what a query is
    searched by in the full-text index), ``router`` (the libraries the map routes it to)
    and ``vectors`` (the vector matrix).
    """

    def __init__(
        self,
        cfg: Config,
        store: Store,
        vectors: VectorIndex | None = None,
        stats: TermStats | None = None,
        slots: SearchSlots | None = None,
    ) -> None:
        """``vectors``, ``stats`` and ``slots`` (how many searches run at once) may be shared
        by the searchers of several threads (one per store)."""
        from brainmap.embedders import model_id_of

        self.cfg = cfg
        self.store = store
        self.model = model_id_of(cfg.embedder)
        self.vectors = vectors or VectorIndex(self.model)
        self.embedder = QueryEmbedder(cfg)
        self.analyser = QueryAnalyser(cfg, store, stats)
        self.slots = slots or search_slots(cfg)
        self.router = Router(cfg, store, self.model)
        self._reranker: Reranker | None = None

    # the pieces

    def nearest(self, vector: np.ndarray, limit: int = 8) -> list[tuple[HitRow, float]]:
        """Chunks nearest to a passage vector by their whole text (not a window of it), with
        their cosine similarity (of the libraries the current call may see)."""
        self.vectors.refresh(self.store)
        top = self.vectors.top(
            self.store, vector, limit, Filters(library_ids=self._visible_ids()), None, whole=True
        )
        rows = self.store.entries.hits([cid for cid, _ in top])
        return [(rows[cid], similarity) for cid, similarity in top if cid in rows]

    def filters(
        self,
        libraries: list[str] | None = None,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        since: str | None = None,
        project: Project | None = None,
        not_types: list[str] | None = None,
        include_inactive: bool = False,
    ) -> Filters:
        library_ids = None
        if libraries:
            library_ids = sorted(read_library_ids(self.cfg, self.store, libraries).values())
        seen = self._visible_ids()
        if seen is not None:  # a team's user: only the libraries they may read
            library_ids = seen if library_ids is None else [i for i in library_ids if i in seen]
        return Filters(
            library_ids=library_ids,
            types=[t.lower() for t in types or []],
            tags=[t.lower().lstrip("#") for t in tags or []],
            since=parse_since(since),
            project=project.name if project else None,
            project_library_ids=sorted(self.store.entries.library_ids(project.libraries).values())
            if project
            else [],
            not_types=[t.lower() for t in not_types or []],
            include_inactive=include_inactive,
        )

    def _visible_ids(self) -> list[int] | None:
        """The ids of the libraries the current call may see (None: all)."""
        visible = self.store.db.visible
        if visible is None:
            return None
        return sorted(self.store.entries.library_ids(visible).values())

    # the search

    def search(
        self,
        query: str,
        *,
        libraries: list[str] | None = None,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        since: str | None = None,
        limit: int = 10,
        mode: Mode = "hybrid",
        route: bool = True,
        project: Project | None = None,
        not_types: list[str] | None = None,
        floor: bool = True,
        include_inactive: bool = False,
    ) -> SearchResult:
        """Search the index; any text is a valid query. With ``floor``, a query that nothing
        matches closely gets no hits (``match`` none), not the least bad ones. With ``route`` and more libraries
        than ``[map] route_above``, the library map picks the libraries to search first
        (hybrid and vector modes, when no library is named). ``project`` keeps the entries
        of a project (its libraries, or `project:` in their frontmatter). Superseded,
        retired and archived entries are left out unless ``include_inactive``."""
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r}", hint="use hybrid, bm25 or vector")
        limit = max(1, min(int(limit), 1000))
        query = query.replace("\x00", " ")
        pending_vector: Future[np.ndarray | None] | None = None
        if mode != "bm25" and query.strip():
            # embedding the query overlaps the BM25 query and the vector refresh, and the
            # wait for a slot: queries waiting together are embedded in one batch
            pending_vector = self.embedder.submit(query[:2000])
        with self.slots.held(self.store) as store, self._on(store):
            return self._search(
                query, pending_vector, libraries=libraries, types=types, tags=tags,
                since=since, limit=limit, mode=mode, route=route, project=project,
                not_types=not_types, floor=floor, include_inactive=include_inactive,
            )  # fmt: skip

    @contextmanager
    def _on(self, store: Store) -> Iterator[None]:
        """Within the block, the search runs on ``store`` (its slot's connection)."""
        own = self.store
        self.store = self.analyser.store = self.router.store = store
        try:
            yield
        finally:
            self.store = self.analyser.store = self.router.store = own

    def _search(
        self,
        query: str,
        pending_vector: Future[np.ndarray | None] | None,
        *,
        libraries: list[str] | None,
        types: list[str] | None,
        tags: list[str] | None,
        since: str | None,
        limit: int,
        mode: Mode,
        route: bool,
        project: Project | None,
        not_types: list[str] | None,
        floor: bool,
        include_inactive: bool,
    ) -> SearchResult:
        filters = self.filters(libraries, types, tags, since, project, not_types, include_inactive)
        result = SearchResult(query=query, mode=mode, hits=[])
        configured = {lib.name for lib in self.cfg.libraries}
        behind = [
            n
            for n in self.store.entries.behind_analyzer(ANALYZER_VERSION)
            if n in configured and self.store.db.sees(n)
        ]
        if behind:
            result.warnings.append(
                f"{', '.join(behind)} indexed by an older brainmap: keyword search misses "
                "them until `brainmap reindex` rebuilds them"
            )
            floor = False  # words unknown to an index not rebuilt yet say nothing
        if not query.strip():
            return result
        settings = self.cfg.search
        depth = max(settings.candidates, limit)

        # routing picks libraries by the query alone: with type, tag or date filters it could
        # pick libraries without a match, so those searches look everywhere
        filtered = bool(types or tags or since or project or not_types)
        if (
            route
            and not libraries
            and not filtered
            and pending_vector is not None
            and self.router.applies()
        ):
            # routing needs the query vector before the lists are searched
            query_vector = pending_vector.result()
            result.routed = self.router.route(query_vector) if query_vector is not None else None
            if result.routed is not None:
                filters = self.filters(
                    result.routed, types, tags, since, project, not_types, include_inactive
                )

        bm25_ids: list[int] = []
        analysis = self.analyser.analyse(query)
        if mode != "vector":
            result.terms = analysis.terms
            if analysis.terms:
                weights = (
                    settings.title_weight, settings.heading_weight, 1.0, settings.forms_weight
                )  # fmt: skip
                bm25_ids = self.bm25(analysis, filters, depth, weights)
        else:  # the terms still pick the snippet
            result.terms = [word for word, _, _ in analysis.words][:MAX_QUERY_TERMS]

        vector_hits: list[tuple[int, float]] = []
        if pending_vector is not None:
            self.vectors.refresh(self.store)
            import numpy as np

            allowed = excluded = None
            if not filters.only_libraries:
                allowed = np.array(self.store.entries.filtered_chunk_ids(filters), dtype=np.int64)
            elif not include_inactive:  # the few inactive entries' chunks, not a list of all
                excluded = np.array(
                    self.store.entries.inactive_chunk_ids(filters.library_ids), dtype=np.int64
                )
            query_vector = pending_vector.result()
            if query_vector is None:
                result.warnings.append(f"vector search unavailable: {self.embedder.error}")
            elif not len(self.vectors):
                result.warnings.append("no vectors yet: run `brainmap reindex` to embed")
            else:
                vector_hits = self.vectors.top(
                    self.store, query_vector, depth, filters, allowed, excluded
                )

        rerank = self.cfg.rerank
        hits = self._fuse(
            bm25_ids, vector_hits, max(limit, rerank.top_n) if rerank.enabled else limit,
            result.terms,
        )  # fmt: skip
        if rerank.enabled and len(hits) > 1:
            hits = self._rerank(query, hits, result.warnings)
        result.hits = hits[:limit]
        self._grade(result.hits, analysis, standout(vector_hits))
        result.match = max((h.match for h in result.hits), key=LEVELS.index, default=NONE)
        if floor and result.match == NONE and result.hits:
            result.hits = []  # nothing close: ten confident-looking hits would mislead
        return result

    def bm25(
        self, analysis: QueryAnalysis, filters: Filters, depth: int, weights: tuple[float, ...]
    ) -> list[int]:
        """The BM25 list, scored where the analysis says the best chunks are (its cuts, in
        turn, until one holds ``depth`` that pass the filters), else over every match."""
        for cut in analysis.cuts:
            found = self.store.entries.bm25(analysis.terms, filters, depth, weights, cut)
            if len(found) >= depth:
                return found
        return self.store.entries.bm25(analysis.terms, filters, depth, weights)

    def search_expanded(
        self,
        query: str,
        rewrites: list[str],
        *,
        limit: int = 10,
        floor: bool = True,
        libraries: list[str] | None = None,
        **options: Any,
    ) -> SearchResult:
        """:meth:`search` of ``query`` and of each rewrite (keyword rewrites, paraphrases, a
        HyDE passage), their hits fused by RRF, the query's own list weighing
        ``EXPAND_QUERY_WEIGHT`` and each rewrite 1. Every hit is graded against ``query``
        itself (its words, and its cosine with the query's vector), so the match level and
        the floor say what they say without expansion: rewrites reorder and add hits, they
        do not make a query that nothing matches match."""
        folded = query.strip().casefold()
        rewrites = list(dict.fromkeys(r.strip() for r in rewrites if r.strip()))
        rewrites = [r for r in rewrites if r.casefold() != folded]
        if not rewrites or not folded:
            return self.search(query, limit=limit, floor=floor, libraries=libraries, **options)
        depth = max(self.cfg.search.candidates, limit)
        base = self.search(query, limit=depth, floor=False, libraries=libraries, **options)
        # the rewrites search where the query was routed: one set of libraries
        where = libraries or base.routed
        lists = [base.hits]
        for rewrite in rewrites:
            found = self.search(rewrite, limit=depth, floor=False, libraries=where, **options)
            lists.append(found.hits)
            base.warnings += [w for w in found.warnings if w not in base.warnings]
        weights = [EXPAND_QUERY_WEIGHT] + [1.0] * len(rewrites)
        fused = rrf([[h.chunk_id for h in hits] for hits in lists], weights, self.cfg.search.rrf_k)
        own = {h.chunk_id: h for h in base.hits}
        found_by = {h.chunk_id: h for hits in reversed(lists[1:]) for h in hits}
        hits: list[Hit] = []
        for cid, score in fused[:limit]:
            hit = own.get(cid) or found_by[cid]
            hit.score = round(score, 6)
            hits.append(hit)
        self._regrade(query, [h for h in hits if h.chunk_id not in own], base, options)
        base.hits = hits
        base.expansions = rewrites
        base.match = max((h.match for h in base.hits), key=LEVELS.index, default=NONE)
        if floor and base.match == NONE and base.hits:
            base.hits = []
        return base

    def _regrade(
        self, query: str, hits: list[Hit], base: SearchResult, options: dict[str, Any]
    ) -> None:
        """Grade hits that a rewrite found as if ``query`` had: its words, its cosine with
        each hit (ranks in the query's own lists: none), and snippets by its terms."""
        similarity: dict[int, float] = {}
        if hits and options.get("mode", "hybrid") != "bm25" and len(self.vectors):
            vector = self.embedder.query(query[:2000])  # from the query cache: just embedded
            if vector is not None:
                import numpy as np

                ids = np.array([h.chunk_id for h in hits], dtype=np.int64)
                similarity = dict(self.vectors.top(self.store, vector, len(hits), Filters(), ids))
        for hit in hits:
            hit.bm25_rank = hit.vector_rank = None
            cosine = similarity.get(hit.chunk_id)
            hit.similarity = None if cosine is None else round(cosine, 4)
            hit.snippet = snippet(hit.text, base.terms)
        # the query's own hits had a level only if its nearest vectors stood out, or its
        # words are known: that is what the grade of the others needs to know too
        self._grade(hits, self.analyser.analyse(query), standout=base.match != NONE)

    def _rerank(self, query: str, hits: list[Hit], warnings: list[str]) -> list[Hit]:
        """The hits reordered by the cross-encoder, blended with their fused order; the
        fused order, with a warning, when it cannot answer."""
        from brainmap.rerank import Reranker, RerankError

        if self._reranker is None:
            self._reranker = Reranker(self.cfg.rerank)
        try:
            reranked = self._reranker.rerank(query, [f"{h.title}\n{h.text}" for h in hits])
        except RerankError as exc:
            warnings.append(f"rerank unavailable: {exc.message}")
            return hits
        return [hits[i] for i in reranked.order]

    def _grade(self, hits: list[Hit], analysis: QueryAnalysis, standout: bool) -> None:
        """Give each hit its match level: how much of the query's weight its words hold
        (as written or by stem), or how near its meaning is (cosine). ``standout``: the
        nearest vectors stand out from the rest (a query about something, not nonsense)."""
        s = self.cfg.search
        total = sum(weight for _, _, weight in analysis.words)
        runs = [word for word, _, _ in analysis.words if " " in word]  # dotted numbers
        quoted = [t for t in analysis.terms if " " in t and not number_run(t)]
        for hit in hits:
            text = "\n".join((hit.title, hit.heading, hit.text[:GRADE_CHARS]))
            held = forms_of(text, analysis.languages)
            held_runs = {word for word in runs if holds_phrase(text, word)}
            covered = sum(
                w for word, forms, w in analysis.words
                if (word in held_runs if " " in word else any(f in held for f in forms))
            )  # fmt: skip
            hit.coverage = round(covered / total, 4) if total else 0.0
            # a query none of whose words the index knows is nonsense to it: the model still
            # finds "similar" text (nonsense scores like a real query: benchmarks/floor.py)
            if total and analysis.known:
                hit.match = match_level(hit.coverage, hit.similarity, s)
            elif total and standout and (hit.similarity or -1.0) >= s.strong_similarity:
                hit.match = WEAK  # no word in common, but near in meaning: a paraphrase
            else:
                hit.match = NONE
            # a version or an address names one thing: a hit without any the query names
            # (a note about v2.3.1 for v2.3.2) is no strong match, however few its numbers weigh;
            # nor is one without any phrase the query quotes (its words apart: a vector hit)
            if hit.match == STRONG and (
                analysis.function_words_only
                or (runs and not held_runs)
                or (quoted and not _holds_any(f"{text}\n{' '.join(hit.tags)}", quoted))
            ):
                hit.match = WEAK

    def _fuse(
        self,
        bm25_ids: list[int],
        vector_hits: list[tuple[int, float]],
        limit: int,
        terms: list[str],
    ) -> list[Hit]:
        s = self.cfg.search
        bm25_rank = {cid: r for r, cid in enumerate(bm25_ids, 1)}
        vector_rank = {cid: r for r, (cid, _) in enumerate(vector_hits, 1)}
        similarity = dict(vector_hits)
        fused = dict(fuse(bm25_ids, vector_hits, s.rrf_k, s.bm25_weight, s.vector_weight))
        # the decay reads two columns of every candidate; only the best get their whole rows
        freshness = self.store.entries.freshness(list(fused))
        now = dt.datetime.now(dt.UTC)
        weighed = []
        for cid, base in fused.items():
            if (fresh := freshness.get(cid)) is None:  # deleted since the candidate query
                continue
            weight = decay(*fresh, now, s)
            weighed.append((base * weight, weight, cid))
        weighed.sort(key=lambda item: (-item[0], item[2]))
        rows = self.store.entries.hits([cid for _, _, cid in weighed[:limit]])
        scored = [
            (score, weight, rows[cid]) for score, weight, cid in weighed[:limit] if cid in rows
        ]
        return [
            Hit(
                id=row.entry_id,
                chunk_id=row.chunk_id,
                library=row.library,
                scope=scope_label(row.library, row.scope),
                path=row.path,
                title=row.title,
                heading=row.heading,
                type=row.type,
                tags=row.tags,
                line_start=row.line_start,
                line_end=row.line_end,
                score=round(score, 6),
                text=row.text,
                snippet=snippet(row.text, terms),
                bm25_rank=bm25_rank.get(row.chunk_id),
                vector_rank=vector_rank.get(row.chunk_id),
                similarity=round(similarity[row.chunk_id], 4)
                if row.chunk_id in similarity
                else None,
                decay=round(weight, 4),
                updated=row.updated,
                source_rev=row.source_rev,
                status=row.status,
                source=source_of(row.host, row.library_path, row.path),
            )
            for score, weight, row in scored
        ]


def read_library_ids(cfg: Config, store: Store, names: list[str]) -> dict[str, int]:
    """The index ids of the libraries a read names. Each must be configured here or be in
    the index (on PostgreSQL, another machine's library); any other name is a clear error."""
    found = store.entries.library_ids(names)
    for name in names:
        if name not in found:
            cfg.library(name)  # raises the error that lists the known libraries
    return found


def _holds_any(text: str, phrases: list[str]) -> bool:
    return any(holds_phrase(text, phrase) for phrase in phrases)


class SearchSlots:
    """How many searches run at once, shared by the searchers of a brain's threads; in a
    server, also the connections they run on: one per slot, whichever thread holds it.

    A change to the index (a save, by any process) makes SQLite drop the page cache of every
    connection that reads it next: a server whose searches ran on a connection per thread
    paid that reload (~4 ms at 40k chunks) on each of its ~10 request threads for every save;
    on the slots' connections, at most once per slot."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._stores: list[Store] = []  # the slots' connections not in use
        self._opener: Callable[[], Store] | None = None

    def share_connections(self, opener: Callable[[], Store]) -> None:
        """From now on, searches run on connections of the slots' own, opened by
        ``opener`` as needed (the caller closes them)."""
        self._opener = opener

    def forget_connections(self) -> None:
        """Searches run on their threads' connections again (the slots' were closed)."""
        with self._lock:
            self._opener, self._stores = None, []

    @contextmanager
    def held(self, own: Store) -> Iterator[Store]:
        """Hold a slot for one search: the connection it runs on (``own``, the calling
        thread's, unless the slots have their own), seeing what ``own`` sees."""
        with self._free:
            if self._opener is None:
                yield own
                return
            with self._lock:
                store = self._stores.pop() if self._stores else None
            if store is None:
                store = self._opener()
            store.db.visible = own.db.visible  # a team user's view goes with the call
            try:
                yield store
            finally:
                store.db.visible = None
                with self._lock:
                    self._stores.append(store)


def search_slots(cfg: Config) -> SearchSlots:
    """How many searches may run at once (``[search] concurrency``; 0: one more than the
    CPUs, so that one waiting on the disk or the model leaves none idle)."""
    return SearchSlots(cfg.search.concurrency or len(os.sched_getaffinity(0)) + 1)


def snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """The part of a chunk around the line with the most query terms, about ``width`` chars."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return ""
    # as written: a run of numbers with its dots (2.3.1), C# as it is spelt in the terms
    terms = [".".join(t.split()) if number_run(t) else t for t in terms]
    best, best_score = 0, 0
    for i, line in enumerate(lines):
        folded = fold(spell_symbols(line))
        score = sum(1 for t in terms if t in folded)
        if score > best_score:
            best, best_score = i, score
    if best_score == 0 and len(lines) > 1 and lines[0].lstrip().startswith("#"):
        best = 1  # skip the heading line that every chunk of a section repeats
    out = lines[best].strip()
    for line in lines[best + 1 :]:
        if len(out) >= width:
            break
        out += " · " + line.strip()
    return out if len(out) <= width else out[: width - 1].rstrip() + "…"
