"""Hybrid retrieval: BM25 (FTS5) and exact vector search, fused by Reciprocal Rank Fusion.

Vector search is exact cosine over a float32 matrix held in memory and refreshed when the
index's vector generation changes. On 40k x 384 vectors numpy scores a query in ~4 ms while
sqlite-vec 0.1.9 (the PyPI build has no SIMD) needs ~45 ms, which alone would break the 50 ms
p50 budget; the vectors still live in brain.db, so the index stays one file.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from brainmap.analysis import common_above, fold, fts_quote, is_stopword, query_terms
from brainmap.config import Config, scope_label
from brainmap.embed import MAX_EMBED_CHARS
from brainmap.errors import UserError
from brainmap.graph import Hops
from brainmap.store import Filters, HitRow, Store

if TYPE_CHECKING:
    import numpy as np

    from brainmap.embed import Embedder
    from brainmap.project import Project

Mode = Literal["hybrid", "bm25", "vector"]
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "vector")
MAX_QUERY_TERMS = 24  # a 10 kB query keeps its rarest terms only
MAX_CANDIDATE_TERMS = 400
SNIPPET_CHARS = 240


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


@dataclass
class SearchResult:
    query: str
    mode: Mode
    hits: list[Hit]
    terms: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    routed: list[str] | None = None  # the libraries the map routed the search to, if it did


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


@dataclass(frozen=True)
class _Snapshot:
    generation: int
    ids: np.ndarray
    libraries: np.ndarray
    matrix: np.ndarray


class VectorIndex:
    """All vectors of one model as a matrix, reloaded when the store's vectors change.

    One instance can serve many threads: a refresh swaps in a complete new snapshot.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None  # numpy loads with the first vector search

    def refresh(self, store: Store) -> None:
        """Reload from ``store`` if any vector was added or removed since the last load."""
        import numpy as np

        generation = store.vector_generation()
        if self._snapshot is not None and generation == self._snapshot.generation:
            return
        with self._lock:
            if self._snapshot is not None and generation == self._snapshot.generation:
                return
            ids, libs, blob = store.load_vectors(self.model)
            flat = np.frombuffer(blob, dtype=np.float32)
            matrix = flat.reshape(len(ids), -1) if ids else np.empty((0, 0), dtype=np.float32)
            self._snapshot = _Snapshot(
                generation, np.array(ids, dtype=np.int64), np.array(libs, dtype=np.int64), matrix
            )

    def __len__(self) -> int:
        return 0 if self._snapshot is None else len(self._snapshot.ids)

    def top(
        self, query: np.ndarray, k: int, filters: Filters, allowed: np.ndarray | None
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar chunk ids (with cosine similarity) that pass the filters
        (call :meth:`refresh` first)."""
        import numpy as np

        snap = self._snapshot
        if snap is None or not len(snap.ids) or snap.matrix.shape[1] != query.shape[0]:
            return []
        scores = snap.matrix @ query
        mask = None
        if filters.library_ids is not None:
            mask = np.isin(snap.libraries, np.array(filters.library_ids, dtype=np.int64))
        if allowed is not None:
            in_allowed = np.isin(snap.ids, allowed)
            mask = in_allowed if mask is None else mask & in_allowed
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best])]
        return [(int(snap.ids[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]


class Searcher:
    """Answers queries over one store; keep it alive to keep vectors and the model warm."""

    def __init__(self, cfg: Config, store: Store, vectors: VectorIndex | None = None) -> None:
        """``vectors`` may be shared by the searchers of several threads (one per store)."""
        from brainmap.embed import model_id_of

        self.cfg = cfg
        self.store = store
        self.model = model_id_of(cfg.embedder)
        self.vectors = vectors or VectorIndex(self.model)
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._routes: _Routes | None = None

    # the pieces

    def embedder(self) -> Embedder | None:
        """The query embedder, or None (with :attr:`embedder_error`) when it cannot load."""
        if self._embedder is None and self._embedder_error is None:
            from brainmap.embed import EmbedderError, load_embedder

            try:
                self._embedder = load_embedder(self.cfg.embedder)
            except EmbedderError as exc:
                self._embedder_error = exc.message
        return self._embedder

    @property
    def embedder_error(self) -> str | None:
        return self._embedder_error

    def embed_query(self, text: str) -> np.ndarray | None:
        with self._lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached
        from brainmap.embed import EmbedderError

        embedder = self.embedder()
        if embedder is None:
            return None
        try:
            vector = embedder.query(text)
        except EmbedderError as exc:  # e.g. a remote endpoint went down: degrade to BM25
            self._embedder_error = exc.message
            return None
        with self._lock:
            self._query_cache[text] = vector
            if len(self._query_cache) > 512:
                self._query_cache.popitem(last=False)
        return vector

    def similar(self, text: str, limit: int = 8) -> list[tuple[HitRow, float]]:
        """Chunks nearest to ``text`` embedded as a passage, with their cosine similarity.

        Empty when the embedder is unavailable (callers then skip what needs it, e.g. dedup).
        """
        from brainmap.embed import EmbedderError

        embedder = self.embedder()
        if embedder is None:
            return []
        try:
            vector = embedder.passages([text[:MAX_EMBED_CHARS]])[0]
        except EmbedderError as exc:
            self._embedder_error = exc.message
            return []
        self.vectors.refresh(self.store)
        top = self.vectors.top(vector, limit, Filters(), None)
        rows = self.store.hits([cid for cid, _ in top])
        return [(rows[cid], similarity) for cid, similarity in top if cid in rows]

    def match_expression(self, query: str) -> tuple[str | None, list[str]]:
        """The FTS5 expression for a query: an OR of its phrases and informative terms.

        Stopwords are dropped, then terms found in more than ``df_prune`` of all chunks (or
        in none); an FTS5 OR over frequent words costs far more and ranks no better.
        """
        phrases, terms = query_terms(query)
        # the first few hundred distinct words are plenty to pick the rarest from
        candidates = ([t for t in terms if not is_stopword(t)] or terms)[:MAX_CANDIDATE_TERMS]
        freqs = self.store.doc_freqs(candidates)
        present = [t for t in candidates if freqs.get(t)]
        limit = common_above(max(self.store.chunk_count(), 1), self.cfg.search.df_prune)
        keep = [t for t in present if freqs[t] <= limit]
        if not keep and present and not phrases:
            keep = [min(present, key=lambda t: freqs[t])]
        keep = sorted(keep, key=lambda t: freqs[t])[:MAX_QUERY_TERMS]
        keep.sort(key=candidates.index)
        parts = [fts_quote(p) for p in phrases] + [fts_quote(t) for t in keep]
        return (" OR ".join(parts) if parts else None), phrases + keep

    def filters(
        self,
        libraries: list[str] | None = None,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        since: str | None = None,
        project: Project | None = None,
        not_types: list[str] | None = None,
    ) -> Filters:
        library_ids = None
        if libraries:
            self.cfg.select(libraries)  # raises a clear error for unknown names
            found = self.store.library_ids(libraries)
            library_ids = sorted(found.values())
        return Filters(
            library_ids=library_ids,
            types=[t.lower() for t in types or []],
            tags=[t.lower().lstrip("#") for t in tags or []],
            since=parse_since(since),
            project=project.name if project else None,
            project_library_ids=sorted(self.store.library_ids(project.libraries).values())
            if project
            else [],
            not_types=[t.lower() for t in not_types or []],
        )

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
    ) -> SearchResult:
        """Search the index; any text is a valid query. With ``route`` and more libraries
        than ``[map] route_above``, the library map picks the libraries to search first
        (hybrid and vector modes, when no library is named). ``project`` keeps the entries
        of a project (its libraries, or `project:` in their frontmatter)."""
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r}", hint="use hybrid, bm25 or vector")
        limit = max(1, min(int(limit), 1000))
        query = query.replace("\x00", " ")
        filters = self.filters(libraries, types, tags, since, project, not_types)
        result = SearchResult(query=query, mode=mode, hits=[])
        if not query.strip():
            return result
        settings = self.cfg.search
        depth = max(settings.candidates, limit)

        pending_vector: Future[np.ndarray | None] | None = None
        if mode != "bm25":
            # embedding the query overlaps the BM25 query and the vector refresh
            pending_vector = _embed_pool().submit(self.embed_query, query[:2000])

        # routing picks libraries by the query alone: with type, tag or date filters it could
        # pick libraries without a match, so those searches look everywhere
        filtered = bool(types or tags or since or project or not_types)
        if (
            route
            and not libraries
            and not filtered
            and pending_vector is not None
            and (self._routes_apply())
        ):
            # routing needs the query vector before the lists are searched
            query_vector = pending_vector.result()
            result.routed = self.route(query_vector) if query_vector is not None else None
            if result.routed is not None:
                filters = self.filters(result.routed, types, tags, since, project, not_types)

        bm25_ids: list[int] = []
        if mode != "vector":
            match, result.terms = self.match_expression(query)
            if match:
                weights = (settings.title_weight, settings.heading_weight, 1.0)
                bm25_ids = self.store.bm25(match, filters, depth, weights)
        else:  # the terms still pick the snippet
            words = query_terms(query)[1]
            result.terms = ([t for t in words if not is_stopword(t)] or words)[:MAX_QUERY_TERMS]

        vector_hits: list[tuple[int, float]] = []
        if pending_vector is not None:
            self.vectors.refresh(self.store)
            allowed = None
            if not filters.only_libraries:
                import numpy as np

                allowed = np.array(self.store.filtered_chunk_ids(filters), dtype=np.int64)
            query_vector = pending_vector.result()
            if query_vector is None:
                result.warnings.append(f"vector search unavailable: {self.embedder_error}")
            elif not len(self.vectors):
                result.warnings.append("no vectors yet: run `brainmap reindex` to embed")
            else:
                vector_hits = self.vectors.top(query_vector, depth, filters, allowed)

        result.hits = self._fuse(bm25_ids, vector_hits, limit, result.terms)
        return result

    def route(self, query_vector: np.ndarray) -> list[str] | None:
        """The libraries a query should search, or None when routing does not apply (too
        few libraries, or none with a routing vector): the ``route_libraries`` nearest the
        query, plus every library the map cannot place (no block or no vector yet)."""
        routes = self._route_table()
        if not routes.applies(self.cfg.map.route_above):
            return None
        count = self.cfg.map.route_libraries
        return route_libraries(query_vector, routes.names, routes.matrix, count) + routes.always

    def _routes_apply(self) -> bool:
        return self._route_table().applies(self.cfg.map.route_above)

    def _route_table(self) -> _Routes:
        """The routing vectors, as of the map's current generation and libraries. Libraries
        are placed by the centroid of their chunk vectors; only when none has one, by their
        embedded sentence (the two are not on one scale)."""
        generation: tuple[int | str, ...] = (
            *self.store.map_generation(),
            *(lib.name for lib in self.cfg.libraries),
        )
        routes = self._routes
        if routes is not None and routes.generation == generation:
            return routes
        rows = {row.library: row for row in self.store.map_blocks()}
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
        fused: dict[int, float] = {}
        for cid, rank in bm25_rank.items():
            fused[cid] = s.bm25_weight / (s.rrf_k + rank)
        for cid, rank in vector_rank.items():
            fused[cid] = fused.get(cid, 0.0) + s.vector_weight / (s.rrf_k + rank)
        rows = self.store.hits(list(fused))
        now = dt.datetime.now(dt.UTC)
        scored = []
        for cid, base in fused.items():
            row = rows.get(cid)
            if row is None:  # deleted between the candidate query and now
                continue
            decay = self._decay(row, now)
            scored.append((base * decay, decay, row))
        scored.sort(key=lambda item: (-item[0], item[2].chunk_id))
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
                decay=round(decay, 4),
                updated=row.updated,
                source_rev=row.source_rev,
            )
            for score, decay, row in scored[:limit]
        ]

    def _decay(self, row: HitRow, now: dt.datetime) -> float:
        """Staleness weight in [decay_floor, 1]: halves every half-life since last verified."""
        s = self.cfg.search
        if s.half_life_days <= 0:
            return 1.0
        if row.last_verified:
            try:
                seen = dt.datetime.fromisoformat(row.last_verified)
            except ValueError:
                return 1.0
            if seen.tzinfo is None:
                seen = seen.replace(tzinfo=dt.UTC)
        else:
            seen = dt.datetime.fromtimestamp(row.mtime_ns / 1e9, dt.UTC)
        age_days = max((now - seen).total_seconds() / 86400, 0.0)
        weight = math.pow(0.5, age_days / s.half_life_days)
        return s.decay_floor + (1.0 - s.decay_floor) * weight


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


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _embed_pool() -> ThreadPoolExecutor:
    """One worker thread per process embeds queries (the model runs one call at a time)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="brainmap-embed")
        return _pool


def snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """The part of a chunk around the line with the most query terms, about ``width`` chars."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return ""
    best, best_score = 0, 0
    for i, line in enumerate(lines):
        folded = fold(line)
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
