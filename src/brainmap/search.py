"""Hybrid retrieval: BM25 (FTS5) and exact vector search, fused by Reciprocal Rank Fusion.

Vector search is exact cosine over a float32 matrix held in memory and refreshed when the
index's vector generation changes. On 40k x 384 vectors numpy scores a query in ~4 ms while
sqlite-vec 0.1.9 (the PyPI build has no SIMD) needs ~45 ms, which alone would break the 50 ms
p50 budget; the vectors still live in brain.db, so the index stays one file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from brainmap.analysis import (
    ANALYZER_VERSION,
    DEFAULT_LANGUAGE,
    common_above,
    detect_language,
    fold,
    forms_of,
    fts_quote,
    is_stopword,
    query_terms,
    term_stems,
)
from brainmap.config import Config, SearchSettings, scope_label
from brainmap.embed import MAX_EMBED_CHARS
from brainmap.errors import UserError
from brainmap.graph import Hops
from brainmap.reasoner import Spent
from brainmap.store import Filters, HitRow, Store, VectorCache

if TYPE_CHECKING:
    import numpy as np

    from brainmap.embed import Embedder
    from brainmap.project import Project
    from brainmap.rerank import Reranker
    from brainmap.store.records import VectorRows

Mode = Literal["hybrid", "bm25", "vector"]
MatchLevel = Literal["strong", "weak", "none"]
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "vector")
MAX_QUERY_TERMS = 24  # a 10 kB query keeps its rarest terms only
MAX_CANDIDATE_TERMS = 400
SNIPPET_CHARS = 240
LANGUAGES_TTL_S = 60.0  # how long the index's languages are taken as known
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


@dataclass(frozen=True)
class QueryAnalysis:
    """What a query is searched by: its FTS5 expression, the terms shown and highlighted,
    and its informative words, each with the forms that match it and its weight (IDF)."""

    expression: str | None
    terms: list[str]
    words: list[tuple[str, tuple[str, ...], float]]
    languages: tuple[str, ...]
    known: bool  # some word of the query is in the index (as written or by stem)
    function_words_only: bool  # "the", "what is it": nothing to match closely


STRONG: MatchLevel = "strong"
WEAK: MatchLevel = "weak"
NONE: MatchLevel = "none"
LEVELS: tuple[MatchLevel, ...] = (NONE, WEAK, STRONG)


def match_level(coverage: float, similarity: float | None, s: SearchSettings) -> MatchLevel:
    """Strong, weak or none, by the thresholds calibrated on real negatives (the queries of
    one corpus against another: benchmarks/floor.py)."""
    sim = similarity if similarity is not None else -1.0
    if coverage >= s.strong_coverage or sim >= s.strong_similarity:
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


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency; a word found nowhere weighs the most."""
    return math.log((total - df + 0.5) / (df + 0.5) + 1.0)


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


@dataclass(frozen=True)
class _Snapshot:
    """The vectors of one model as of one generation. Never changed once made: a refresh
    builds a new one, so a search goes on reading the one it took.

    The rows are a base matrix plus the rows added since it was made (``parts``), with the
    rows removed since masked out (``alive``). Taking in a save copies only the small arrays
    and the added rows; the base, shared with older snapshots, is rebuilt (compacted) once
    the additions or removals grow past ``COMPACT_ROWS`` or an eighth of it.
    """

    generation: int
    ids: np.ndarray  # chunk id of each row of the parts, in order
    libraries: np.ndarray
    parts: tuple[np.ndarray, ...]  # read-only matrices: the base, then the rows added since
    alive: np.ndarray | None = None  # rows not removed since the base; None: all of them

    COMPACT_ROWS = 4096

    @classmethod
    def of(cls, rows: VectorRows) -> _Snapshot:
        import numpy as np

        ids = np.array(rows.ids, dtype=np.int64)
        flat = np.frombuffer(rows.vectors, dtype=np.float32)  # read-only: it views bytes
        matrix = flat.reshape(len(ids), -1) if len(ids) else np.empty((0, 0), dtype=np.float32)
        return cls(rows.generation, ids, np.array(rows.library_ids, dtype=np.int64), (matrix,))

    @property
    def dim(self) -> int:
        return int(self.parts[0].shape[1])

    def __len__(self) -> int:
        return len(self.ids) if self.alive is None else int(self.alive.sum())

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of every row with ``query`` (removed rows included)."""
        import numpy as np

        if len(self.parts) == 1:
            scores: np.ndarray = self.parts[0] @ query
            return scores
        return np.concatenate([part @ query for part in self.parts])

    def changed(self, changes: VectorRows) -> _Snapshot | None:
        """A new snapshot: this one without the chunks ``changes`` touched, plus the vectors
        they have now; None when they cannot be merged (no rows yet, another dimension)."""
        import numpy as np

        add = np.frombuffer(changes.vectors, dtype=np.float32)
        if not len(self.ids) or add.size != len(changes.ids) * self.dim:
            return None
        gone = np.isin(self.ids, np.array(changes.touched, dtype=np.int64))
        alive = ~gone if self.alive is None else self.alive & ~gone
        parts = self.parts
        if changes.ids:
            add = add.reshape(len(changes.ids), self.dim)
            if len(parts) > 1:  # one matrix of the rows added since the base
                add = np.concatenate([parts[1], add])
            add.setflags(write=False)
            parts = (parts[0], add)
        ids = np.concatenate([self.ids, np.array(changes.ids, dtype=np.int64)])
        libraries = np.concatenate([self.libraries, np.array(changes.library_ids, dtype=np.int64)])
        alive = np.concatenate([alive, np.ones(len(changes.ids), dtype=bool)])
        new = _Snapshot(changes.generation, ids, libraries, parts, alive)
        dead, added = len(ids) - int(alive.sum()), len(ids) - len(self.parts[0])
        if max(dead, added) > max(self.COMPACT_ROWS, len(self.parts[0]) // 8):
            return new.compacted()
        return new

    def compacted(self) -> _Snapshot:
        """The same rows as one matrix, in chunk-id order (as a full load has them)."""
        import numpy as np

        alive = np.ones(len(self.ids), dtype=bool) if self.alive is None else self.alive
        order = np.flatnonzero(alive)
        order = order[np.argsort(self.ids[order], kind="stable")]
        matrix = np.concatenate(self.parts) if len(self.parts) > 1 else self.parts[0]
        matrix = matrix[order]
        matrix.setflags(write=False)
        return _Snapshot(self.generation, self.ids[order], self.libraries[order], (matrix,))


class VectorIndex:
    """All vectors of one model as a matrix, kept up to date with the store.

    A refresh reads only the vectors added or removed since its snapshot (the store logs each
    change); it reads them all when there is no snapshot yet, when the log no longer reaches
    back that far, or when much changed. One instance can serve many threads: a refresh swaps
    in a complete new snapshot and never changes one that a search may be reading.
    """

    MIN_CHANGES = 4096  # read changes rather than everything up to this many (or a quarter)

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None  # numpy loads with the first vector search
        self.full_loads = 0  # how each refresh went (tests and benchmarks read them)
        self.change_loads = 0

    def refresh(self, store: Store) -> None:
        """Bring the matrix up to date with ``store`` if any vector was added or removed."""
        generation = store.vector_generation()
        if self._snapshot is not None and generation == self._snapshot.generation:
            return
        with self._lock:
            snap = self._snapshot
            if snap is not None and generation == snap.generation:
                return  # another thread refreshed meanwhile
            new = None
            if snap is not None:
                limit = max(self.MIN_CHANGES, len(snap.ids) // 4)
                changes = store.vector_changes(self.model, snap.generation, limit)
                if changes is not None and changes.generation == snap.generation:
                    return
                new = snap.changed(changes) if changes is not None else None
                self.change_loads += new is not None
            if new is None:
                new = _Snapshot.of(store.load_vectors(self.model))
                self.full_loads += 1
            self._snapshot = new

    def __len__(self) -> int:
        return 0 if self._snapshot is None else len(self._snapshot)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """The chunk ids (ascending) and their vectors as of the last refresh (a copy)."""
        import numpy as np

        snap = self._snapshot
        if snap is None:
            return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
        whole = snap.compacted()
        return whole.ids, whole.parts[0]

    def top(
        self,
        query: np.ndarray,
        k: int,
        filters: Filters,
        allowed: np.ndarray | None,
        excluded: np.ndarray | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar chunk ids (with cosine similarity) that pass the filters,
        are ``allowed`` (when given) and not ``excluded``, equal scores by chunk id (call
        :meth:`refresh` first)."""
        import numpy as np

        snap = self._snapshot
        if snap is None or not len(snap.ids) or snap.dim != query.shape[0]:
            return []
        scores = snap.scores(query)
        mask = snap.alive
        if filters.library_ids is not None:
            in_library = np.isin(snap.libraries, np.array(filters.library_ids, dtype=np.int64))
            mask = in_library if mask is None else mask & in_library
        if allowed is not None:
            in_allowed = np.isin(snap.ids, allowed)
            mask = in_allowed if mask is None else mask & in_allowed
        if excluded is not None and len(excluded):
            kept = np.isin(snap.ids, excluded, invert=True)
            mask = kept if mask is None else mask & kept
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(k, len(scores))
        if k <= 0:
            return []
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
        # every row scoring at least the k-th, so that ties at the cut go by chunk id too,
        # whatever the order of the rows
        best = np.flatnonzero(scores >= kth if np.isfinite(kth) else np.isfinite(scores))
        best = best[np.lexsort((snap.ids[best], -scores[best]))][:k]
        return [(int(snap.ids[i]), float(scores[i])) for i in best]


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
        self._routes: _Routes | None = None
        self._languages: tuple[float, tuple[str, ...], frozenset[str]] | None = None
        self._reranker: Reranker | None = None

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
        """The query's vector (read-only), or None when the embedder is unavailable.

        Recent queries come from the process-wide cache; the others are embedded together
        with those of concurrent searches, in one model call (:class:`QueryBatcher`).
        """
        from brainmap.embed import EmbedderError, query_batcher

        embedder = self.embedder()
        if embedder is None:
            return None
        try:
            return query_batcher(embedder).embed(text)
        except EmbedderError as exc:  # e.g. a remote endpoint went down: degrade to BM25
            self._embedder_error = exc.message
            return None

    def forget_queries(self) -> None:
        """Empty the query cache (the next search of any query embeds it again)."""
        from brainmap.embed import query_batcher

        embedder = self.embedder()
        if embedder is not None:
            query_batcher(embedder).clear()

    def similar(
        self, text: str, limit: int = 8, *, remember: bool = False
    ) -> list[tuple[HitRow, float]]:
        """Chunks nearest to ``text`` embedded as a passage, with their cosine similarity.

        With ``remember``, the vector goes into the vector cache under the text's hash, so
        that indexing a chunk of exactly that text (a note about to be saved) does not embed
        it again. Empty when the embedder is unavailable (callers then skip what needs it,
        e.g. dedup).
        """
        vector = self.passage_vector(text, remember=remember)
        return [] if vector is None else self.nearest(vector, limit)

    def passage_vector(self, text: str, *, remember: bool = False) -> np.ndarray | None:
        """``text`` embedded as a passage (see :meth:`similar`), or None without an embedder."""
        from brainmap.embed import EmbedderError, model_id_of

        embedder = self.embedder()
        if embedder is None:
            return None
        text = text[:MAX_EMBED_CHARS]
        try:
            vector: np.ndarray = embedder.passages([text])[0]
        except EmbedderError as exc:
            self._embedder_error = exc.message
            return None
        if remember:
            cache = VectorCache(self.cfg.cache_path)
            try:
                digest = hashlib.sha256(text.encode()).hexdigest()
                cache.put_many(
                    model_id_of(self.cfg.embedder), [(digest, vector.astype("float32").tobytes())]
                )
            finally:
                cache.close()
        return vector

    def nearest(self, vector: np.ndarray, limit: int = 8) -> list[tuple[HitRow, float]]:
        """Chunks nearest to a passage vector, with their cosine similarity."""
        self.vectors.refresh(self.store)
        top = self.vectors.top(vector, limit, Filters(), None)
        rows = self.store.hits([cid for cid, _ in top])
        return [(rows[cid], similarity) for cid, similarity in top if cid in rows]

    def match_expression(self, query: str) -> tuple[str | None, list[str]]:
        """The FTS5 expression for a query and the terms it holds (see :meth:`analyse`)."""
        analysis = self.analyse(query)
        return analysis.expression, analysis.terms

    def analyse(self, query: str) -> QueryAnalysis:
        """A query's FTS5 expression (an OR of its phrases, informative terms and their
        stems) and the weight of each of its words for the match level.

        Stopwords are dropped, then terms found in more than ``df_prune`` of all chunks (or
        in none); an FTS5 OR over frequent words costs far more and ranks no better.
        """
        phrases, terms = query_terms(query)
        languages = self.query_languages(query)
        # the first few hundred distinct words are plenty to pick the rarest from
        words = ([t for t in terms if not is_stopword(t)] or terms)[:MAX_CANDIDATE_TERMS]
        # a phrase's words weigh in the match level as the other words do
        phrase_words = [w for p in phrases for w in p.split() if not is_stopword(w)]
        weighed_words = list(dict.fromkeys(phrase_words + words))[:MAX_CANDIDATE_TERMS]
        # each word's stems follow it: an exact match then scores above a stem-only one
        variants = term_stems(" ".join(weighed_words), languages)
        forms_of_word = {w: (w, *variants.get(w, ())) for w in weighed_words}
        candidates = list(dict.fromkeys(f for w in words for f in forms_of_word.get(w, (w,))))
        candidates = candidates[:MAX_CANDIDATE_TERMS]
        freqs = self.store.doc_freqs(
            list(dict.fromkeys([*candidates, *(f for fs in forms_of_word.values() for f in fs)]))
        )
        total = max(self.store.chunk_count(), 1)
        present = [t for t in candidates if freqs.get(t)]
        limit = common_above(total, self.cfg.search.df_prune)
        keep = [t for t in present if freqs[t] <= limit]
        if not keep and present and not phrases:
            keep = [min(present, key=lambda t: freqs[t])]
        keep = sorted(keep, key=lambda t: freqs[t])[:MAX_QUERY_TERMS]
        keep.sort(key=candidates.index)
        parts = [fts_quote(p) for p in phrases] + [fts_quote(t) for t in keep]
        weighed = [
            (word, forms, idf(max(freqs.get(f, 0) for f in forms), total))
            for word, forms in forms_of_word.items()
        ]
        return QueryAnalysis(
            expression=" OR ".join(parts) if parts else None,
            terms=phrases + keep,
            words=weighed,
            languages=languages,
            known=any(freqs.get(f) for _, forms, _ in weighed for f in forms),
            function_words_only=all(is_stopword(w) for w in weighed_words),
        )

    def query_languages(self, query: str) -> tuple[str, ...]:
        """The languages a query's words are stemmed in: the index's main ones (those of at
        least a tenth of its entries), and the one its function words tell if the index
        holds it."""
        now = time.monotonic()
        if self._languages is None or now - self._languages[0] > LANGUAGES_TTL_S:
            counts = self.store.languages()
            total = sum(counts.values())
            main = [lang for lang, n in sorted(counts.items(), key=lambda kv: -kv[1])
                    if n >= total / 10][:3]  # fmt: skip
            self._languages = (now, tuple(main) or (DEFAULT_LANGUAGE,), frozenset(counts))
        _, main_languages, present = self._languages
        # two function words at least, of a language the index holds: "vi" or "die" alone
        # would stem an English query in Italian or German
        told = detect_language(query, at_least=2)
        if told in present and told not in main_languages:
            return (told, *main_languages)
        return main_languages

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
            include_inactive=include_inactive,
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
        filters = self.filters(libraries, types, tags, since, project, not_types, include_inactive)
        result = SearchResult(query=query, mode=mode, hits=[])
        configured = {lib.name for lib in self.cfg.libraries}
        behind = [n for n in self.store.behind_analyzer(ANALYZER_VERSION) if n in configured]
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
                filters = self.filters(
                    result.routed, types, tags, since, project, not_types, include_inactive
                )

        bm25_ids: list[int] = []
        analysis = self.analyse(query)
        if mode != "vector":
            result.terms = analysis.terms
            if analysis.expression:
                weights = (
                    settings.title_weight, settings.heading_weight, 1.0, settings.forms_weight
                )  # fmt: skip
                bm25_ids = self.store.bm25(analysis.expression, filters, depth, weights)
        else:  # the terms still pick the snippet
            result.terms = [word for word, _, _ in analysis.words][:MAX_QUERY_TERMS]

        vector_hits: list[tuple[int, float]] = []
        if pending_vector is not None:
            self.vectors.refresh(self.store)
            import numpy as np

            allowed = excluded = None
            if not filters.only_libraries:
                allowed = np.array(self.store.filtered_chunk_ids(filters), dtype=np.int64)
            elif not include_inactive:  # the few inactive entries' chunks, not a list of all
                excluded = np.array(
                    self.store.inactive_chunk_ids(filters.library_ids), dtype=np.int64
                )
            query_vector = pending_vector.result()
            if query_vector is None:
                result.warnings.append(f"vector search unavailable: {self.embedder_error}")
            elif not len(self.vectors):
                result.warnings.append("no vectors yet: run `brainmap reindex` to embed")
            else:
                vector_hits = self.vectors.top(query_vector, depth, filters, allowed, excluded)

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
            vector = self.embed_query(query[:2000])  # from the query cache: just embedded
            if vector is not None:
                import numpy as np

                ids = np.array([h.chunk_id for h in hits], dtype=np.int64)
                similarity = dict(self.vectors.top(vector, len(hits), Filters(), ids))
        for hit in hits:
            hit.bm25_rank = hit.vector_rank = None
            cosine = similarity.get(hit.chunk_id)
            hit.similarity = None if cosine is None else round(cosine, 4)
            hit.snippet = snippet(hit.text, base.terms)
        # the query's own hits had a level only if its nearest vectors stood out, or its
        # words are known: that is what the grade of the others needs to know too
        self._grade(hits, self.analyse(query), standout=base.match != NONE)

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
        for hit in hits:
            text = "\n".join((hit.title, hit.heading, hit.text[:GRADE_CHARS]))
            held = forms_of(text, analysis.languages)
            covered = sum(w for _, forms, w in analysis.words if any(f in held for f in forms))
            hit.coverage = round(covered / total, 4) if total else 0.0
            # a query none of whose words the index knows is nonsense to it: the model still
            # finds "similar" text (nonsense scores like a real query: benchmarks/floor.py)
            if total and analysis.known:
                hit.match = match_level(hit.coverage, hit.similarity, s)
            elif total and standout and (hit.similarity or -1.0) >= s.strong_similarity:
                hit.match = WEAK  # no word in common, but near in meaning: a paraphrase
            else:
                hit.match = NONE
            if analysis.function_words_only and hit.match == STRONG:
                hit.match = WEAK

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
        fused = dict(fuse(bm25_ids, vector_hits, s.rrf_k, s.bm25_weight, s.vector_weight))
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
                status=row.status,
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


def fuse(
    bm25_ids: list[int],
    vector_hits: list[tuple[int, float]],
    rrf_k: float,
    bm25_weight: float,
    vector_weight: float,
) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion of the two ranked lists: ``(chunk id, score)``, best
    first (ties by chunk id, so that the order is stable)."""
    vector_ids = [cid for cid, _ in vector_hits]
    return rrf([bm25_ids, vector_ids], [bm25_weight, vector_weight], rrf_k)


def rrf(lists: list[list[int]], weights: list[float], k: float) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion of ranked lists of ids: each id scores the sum of
    ``weight / (k + rank)`` over the lists holding it; ``(id, score)``, best first (ties by
    id, so that the order is stable)."""
    scores: dict[int, float] = {}
    for ids, weight in zip(lists, weights, strict=True):
        for rank, cid in enumerate(ids, 1):
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


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
    """The threads on which searches wait for their query vectors, while they query BM25.

    They only wait: the query batcher's one worker runs the model, on every query queued
    meanwhile at once, so there are as many as a batch holds.
    """
    global _pool
    with _pool_lock:
        if _pool is None:
            from brainmap.embed import MAX_QUERY_BATCH

            _pool = ThreadPoolExecutor(
                max_workers=MAX_QUERY_BATCH * 2, thread_name_prefix="brainmap-embed"
            )
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
