"""What PostgreSQL does otherwise than SQLite in the repositories: full-text scoring over
``tsvector`` (BM25 as FTS5 computes it) and vectors in pgvector's type. Every other method is
the SQLite repository's own, over :class:`~brainmap.store.postgres.database.PgDatabase`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from brainmap.errors import LibraryHeldElsewhere
from brainmap.store.entries import EntryRepo
from brainmap.store.postgres.database import clip
from brainmap.store.records import Filters, this_machine
from brainmap.store.schema import marks as placeholders
from brainmap.store.vectors import VectorRepo

if TYPE_CHECKING:
    import numpy as np

    from brainmap.progress import ProgressFn

# FTS5's bm25() constants (fts5_aux.c)
K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
WEIGHT_INDEX = {"A": 0, "B": 1, "C": 2, "D": 3}
MAX_CACHED_TERMS = 100_000  # document frequencies kept per connection


def lexeme(word: str) -> str:
    """A folded word as a tsquery operand (quoted: nothing inside is an operator)."""
    return "'" + clip(word).replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery(terms: Sequence[str]) -> str:
    """The tsquery matching any of ``terms``: a word, or a phrase of words in a row."""
    return " | ".join(
        "(" + " <-> ".join(lexeme(w) for w in term.split()) + ")" for term in terms if term.split()
    )


class PgEntryRepo(EntryRepo):
    """The entry repository over PostgreSQL: BM25 over the chunks' ``tsv``, computed as
    FTS5's bm25() does, so that both backends rank alike; a library belongs to the machine
    whose folder it is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._generation = -1
        self._sizes = (0, 0)
        self._term_hits: dict[str, int] = {}

    def ensure_library(self, name: str, path: str, scope: str, language: str = "auto") -> int:
        """As on SQLite, but a library another machine holds is refused
        (:class:`LibraryHeldElsewhere`): indexing this machine's folder under its name would
        delete every entry of that machine's folder which this one lacks."""
        here = this_machine()
        with self.db.write():
            held = self.db.fetch("SELECT host, path FROM library WHERE name = ?", (name,))
            if held and held[0][0] and held[0][0] != here:
                raise LibraryHeldElsewhere(
                    f"library {name!r} of the shared index is the folder {held[0][1]} on "
                    f"{held[0][0]}; this machine ({here}) indexes nothing into it",
                    hint=f"give this machine's library another name in config.toml "
                    f"([[library]] name; for the global library also [save] library), or "
                    f"set $BRAINMAP_MACHINE to {held[0][0]!r} if this is that machine",
                )
            library_id = super().ensure_library(name, path, scope, language)
            self.db.execute("UPDATE library SET host = ? WHERE id = ?", (here, library_id))
        return library_id

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (terms already folded; those in none left out)."""
        return {term: n for term, n in self._match_counts(terms).items() if n}

    def _match_counts(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks match each term: a word, or a phrase of words in a row."""
        if not terms:
            return {}
        rows = self.db.fetch(
            "SELECT (SELECT count(*) FROM chunk WHERE tsv @@ t::tsquery) "
            "FROM unnest(?::text[]) WITH ORDINALITY AS q(t, n) ORDER BY n",
            ([tsquery([t]) for t in terms],),
        )
        return {t: int(r[0]) for t, r in zip(terms, rows, strict=True)}

    def held_by(self, terms: Sequence[str], library_ids: Sequence[int]) -> set[str]:
        if not library_ids:
            return set()
        found = set()
        for term in terms:
            if self.db.fetch(
                "SELECT 1 FROM chunk c JOIN entry e ON e.id = c.entry_id "
                f"WHERE c.tsv @@ ?::tsquery AND e.library_id IN ({placeholders(len(library_ids))}) "
                "LIMIT 1",
                (tsquery([term]), *library_ids),
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
        terms = list(
            dict.fromkeys(" ".join(clip(w) for w in t.split()) for t in terms if t.split())
        )
        if not terms:
            return []
        weights = (*weights, 1.0, 1.0, 1.0, 1.0)[:4]
        chunks, total_words, hits = self._figures(terms)
        average = max(total_words / max(chunks, 1), 1e-9)
        idf = {t: max(math.log((chunks - hits[t] + 0.5) / (hits[t] + 0.5)), MIN_IDF) for t in terms}  # fmt: skip
        where, params = filters.sql()
        within = [group for group in within or () if group] or None
        rare = "" if not within else " AND c.tsv @@ ?::tsquery"
        cut = " & ".join(f"({tsquery(group)})" for group in within or ())
        matching = [tsquery(terms), *([cut] if within else []), *params]
        if all(" " not in t for t in terms):
            # words only: PostgreSQL scores, and only the best come back
            rows = self.db.fetch(
                "WITH q(term, idf) AS (SELECT * FROM unnest(?::text[], ?::float8[])) "
                "SELECT c.id FROM chunk c JOIN entry e ON e.id = c.entry_id "
                "CROSS JOIN LATERAL (SELECT u.lexeme, sum(CASE w WHEN 'A' THEN ?::float8 "
                "WHEN 'B' THEN ?::float8 WHEN 'C' THEN ?::float8 ELSE ?::float8 END) AS freq "
                "FROM unnest(c.tsv) u, unnest(u.weights) w WHERE u.lexeme = ANY(?::text[]) "
                "GROUP BY u.lexeme) f JOIN q ON q.term = f.lexeme "
                f"WHERE c.tsv @@ ?::tsquery{rare} AND {where} GROUP BY c.id "
                # rounded: chunks of the same text tie (whatever order the sum took) and
                # then come in id order, as from FTS5
                "ORDER BY round(sum(q.idf * f.freq * ?::float8 / (f.freq + ?::float8 * "
                "(1 - ?::float8 + ?::float8 * c.words / ?::float8)))::numeric, 9) DESC, c.id "
                "LIMIT ?",
                [terms, [idf[t] for t in terms], *weights, terms, *matching,
                 K1 + 1, K1, B, B, average, limit],
            )  # fmt: skip
            return [int(r[0]) for r in rows]
        words = sorted({w for t in terms for w in t.split()})
        rows = self.db.fetch(
            "SELECT c.id, c.words, u.lexeme, u.positions, u.weights "
            "FROM chunk c JOIN entry e ON e.id = c.entry_id CROSS JOIN LATERAL unnest(c.tsv) u "
            f"WHERE c.tsv @@ ?::tsquery{rare} AND {where} AND u.lexeme = ANY(?::text[])",
            [*matching, words],
        )
        found: dict[int, tuple[int, dict[str, list[tuple[int, str]]]]] = {}
        for chunk_id, length, word, positions, marks in rows:
            entry = found.setdefault(int(chunk_id), (int(length), {}))
            entry[1][word] = list(zip(positions, marks, strict=True))
        scored: list[tuple[float, int]] = []
        for chunk_id, (length, occurrences) in found.items():  # phrases: scored here
            norm = K1 * (1 - B + B * length / average)
            score = 0.0
            for term in terms:
                freq = _frequency(term.split(), occurrences, weights)
                if freq:
                    score += idf[term] * freq * (K1 + 1) / (freq + norm)
            scored.append((-round(score, 9), chunk_id))
        scored.sort()
        return [chunk_id for _, chunk_id in scored[:limit]]

    def _figures(self, terms: Sequence[str]) -> tuple[int, int, dict[str, int]]:
        """BM25's figures of the index as a whole: the chunks with full text, their words in
        all, and how many chunks hold each term; kept until the text generation moves (any
        machine's write moves it)."""
        generation = self.text_generation()
        if self._generation != generation:
            row = self.db.fetch(
                "SELECT count(*), coalesce(sum(words), 0) FROM chunk WHERE tsv IS NOT NULL"
            )
            self._generation, self._sizes = generation, (int(row[0][0]), int(row[0][1]))
            self._term_hits.clear()
        missing = [t for t in terms if t not in self._term_hits]
        if missing:
            found = self._match_counts(missing)
            if len(self._term_hits) > MAX_CACHED_TERMS:
                self._term_hits.clear()
            self._term_hits.update(found)
        return self._sizes[0], self._sizes[1], {t: self._term_hits[t] for t in terms}

    def compact_text(self) -> None:
        """Nothing to merge: a GIN index has no segments (VACUUM tidies its pending list)."""


def _frequency(
    words: list[str], occurrences: dict[str, list[tuple[int, str]]], weights: Sequence[float]
) -> float:
    """A term's weighted frequency in one chunk, as FTS5 counts a phrase: every place its
    words stand in a row, weighted by the column of the first."""
    first = occurrences.get(words[0])
    if not first:
        return 0.0
    if len(words) == 1:
        return sum(weights[WEIGHT_INDEX[mark]] for _, mark in first)
    rest = [{p for p, _ in occurrences.get(w, ())} for w in words[1:]]
    return sum(
        weights[WEIGHT_INDEX[mark]]
        for position, mark in first
        if all(position + i + 1 in at for i, at in enumerate(rest))
    )


#: how many candidates an HNSW search looks at, at least (pgvector's ``hnsw.ef_search``;
#: its default is 40): more finds more of the exact nearest and costs more
EF_SEARCH = 100
#: with fewer allowed chunks than this, a filtered search scores them all exactly
EXACT_ALLOWED = 20_000
ANN_BUILD_LOCK = 0x626D_616E6E  # "bmann": one process builds an ANN index at a time
ANN_PREFIX = "chunk_vec_hnsw_"
MAX_BUILD_KB = 4 * 2**20  # the most maintenance_work_mem a build asks for: 4 GB


def ann_index_name(model: str) -> str:
    """The name of ``model``'s HNSW index (model ids may hold any character)."""
    return ANN_PREFIX + hashlib.sha1(model.encode()).hexdigest()[:12]


def sql_text(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


class PgVectorRepo(VectorRepo):
    """Chunk vectors in pgvector's ``vector`` type; they go in and come out as the float32
    bytes the SQLite repository stores. A large index gets an HNSW index per model
    (:meth:`ensure_ann`): a partial index over the vectors cast to their dimension, so that
    one model's vectors are indexed whatever other models the table holds."""

    def ann_dim(self, model: str) -> int | None:
        rows = self.db.fetch(
            "SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x "
            "WHERE x.indexrelid = to_regclass(?) AND x.indisvalid",
            (ann_index_name(model),),
        )
        found = re.search(r"::vector\((\d+)\)", rows[0][0]) if rows else None
        return int(found.group(1)) if found else None

    def ensure_ann(
        self, model: str, at_least: int, progress: ProgressFn | None = None
    ) -> str | None:
        """Build ``model``'s HNSW index once it has ``at_least`` vectors (CONCURRENTLY:
        other machines go on writing meanwhile). One process builds it: while another does,
        this one goes on without waiting; a build that was cut short is dropped and redone.
        None when the index is there, not needed yet or being built; else why it is not."""
        if self.ann_dim(model) is not None:
            return None
        count = self.count(model)
        if count < at_least:
            return None
        owner = self.db.fetch(
            "SELECT r.rolname, pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c "
            "JOIN pg_roles r ON r.oid = c.relowner WHERE c.oid = to_regclass('chunk_vec')"
        )
        if not owner or not owner[0][1]:
            return (
                f"{count:,} vectors are searched without an HNSW index: building it needs the "
                f"role that owns the tables ({owner[0][0] if owner else '?'}); run "
                "`brainmap reindex` as that role"
            )
        # no statement may wait for the lock: CREATE INDEX CONCURRENTLY waits for every
        # open snapshot, and a waiting pg_advisory_lock() holds one (a deadlock)
        if not self.db.one("SELECT pg_try_advisory_lock(?)", (ANN_BUILD_LOCK,)):
            return None  # another process builds it
        try:
            if self.ann_dim(model) is not None:  # another process built it meanwhile
                return None
            dims = [r[0] for r in self.db.fetch(
                "SELECT DISTINCT vector_dims(vec) FROM chunk_vec WHERE model = ?", (model,)
            )]  # fmt: skip
            if len(dims) != 1:
                return f"vectors of {model} come in sizes {dims}: searched without an index"
            if progress:
                progress(f"HNSW index over {count:,} vectors", 0, None)
            self._build(model, count, int(dims[0]))
        except self.db.Error as exc:
            return f"the HNSW index over {count:,} vectors could not be built: {exc}"
        finally:
            with suppress(self.db.Error):
                self.db.fetch("SELECT pg_advisory_unlock(?)", (ANN_BUILD_LOCK,))
        return None

    def _build(self, model: str, count: int, dim: int) -> None:
        name = ann_index_name(model)
        self.db.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # a build cut short
        # a graph that fits in maintenance_work_mem is built many times faster than one that
        # spills to disk: the vectors and about 16 neighbours each (pgvector's m = 16)
        needed_kb = count * (dim * 4 + 400) * 12 // 10 // 1024
        setting_kb = int(self.db.one(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'"
        ))  # fmt: skip
        raised = setting_kb < needed_kb
        if raised:
            self.db.execute(f"SET maintenance_work_mem = '{min(needed_kb, MAX_BUILD_KB)}kB'")
        try:
            self.db.execute(
                f"CREATE INDEX CONCURRENTLY {name} ON chunk_vec USING hnsw "
                f"((vec::vector({dim})) vector_cosine_ops) WHERE model = {sql_text(model)}"
            )
        finally:
            if raised:
                with suppress(self.db.Error):
                    self.db.execute("RESET maintenance_work_mem")

    def ann_nearest(
        self,
        model: str,
        dim: int,
        query: np.ndarray,
        k: int,
        library_ids: Sequence[int] | None,
        allowed: np.ndarray | None,
        excluded: np.ndarray | None,
    ) -> list[tuple[int, float]]:
        """The nearest by the HNSW index, filtered afterwards; when the filters leave fewer
        than ``k`` of the candidates it found (or allow only a few chunks), the exact
        nearest of the chunks they allow."""
        import numpy as np

        vector = self._stored(np.asarray(query, dtype=np.float32).tobytes())
        if allowed is None or len(allowed) > EXACT_ALLOWED:
            ef = min(1000, max(EF_SEARCH, 2 * k))
            cast = f"::vector({int(dim)})"
            # the model inline: a partial index is used only when the planner sees that its
            # condition holds, which a parameter (in a prepared plan) does not show it
            with self.db.reading():  # SET LOCAL: nothing outlives the search
                self.db.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                rows = self.db.fetch(
                    f"SELECT chunk_id, library_id, 1 - (vec{cast} <=> ?{cast}) "
                    f"FROM chunk_vec WHERE model = {sql_text(model)} "
                    f"ORDER BY vec{cast} <=> ?{cast} LIMIT ?",
                    (vector, vector, ef),
                )
            libraries = None if library_ids is None else set(library_ids)
            keep = set() if allowed is None else set(allowed.tolist())
            drop = set() if excluded is None else set(excluded.tolist())
            found = [
                (int(cid), float(sim))
                for cid, lib, sim in rows
                if (libraries is None or lib in libraries)
                and (allowed is None or cid in keep)
                and cid not in drop
            ]
            if len(found) >= k:
                return found[:k]
        where, params = "", []
        if library_ids is not None:
            where += " AND library_id = ANY(?)"
            params.append(list(library_ids))
        if allowed is not None:
            where += " AND chunk_id = ANY(?)"
            params.append(allowed.tolist())
        if excluded is not None and len(excluded):
            where += " AND NOT chunk_id = ANY(?)"
            params.append(excluded.tolist())
        # ``vec`` as it is, not cast: the HNSW index stays out of an exact search
        rows = self.db.fetch(
            f"SELECT chunk_id, 1 - (vec <=> ?) FROM chunk_vec WHERE model = ?{where} "
            "ORDER BY vec <=> ?, chunk_id LIMIT ?",
            (vector, model, *params, vector, k),
        )
        return [(int(cid), float(sim)) for cid, sim in rows]

    def delete_except(self, model: str) -> int:
        """As on SQLite, and the other models' HNSW indexes go too."""
        removed = super().delete_except(model)
        keep = ann_index_name(model)
        for (name,) in self.db.fetch(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'chunk_vec' AND indexname LIKE ? AND indexname <> ?",
            (ANN_PREFIX + "%", keep),
        ):
            with suppress(self.db.Error):  # a role that does not own it leaves it
                self.db.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        return removed

    def _stored(self, vector: bytes) -> Any:
        import numpy as np
        from pgvector import Vector

        return Vector(np.frombuffer(vector, dtype=np.float32))

    # vectors are read in pgvector's binary form (``vector_send``: a 4-byte header, then
    # big-endian float32s) and converted all at once: 100,000 vectors of 384 dimensions were
    # read at ~5,500 a second when each was parsed from its text, at 28,000 to 51,000 so
    VEC = "vector_send(vec)"
    PARTS = "?::bytea"  # typed: a NULL in a SELECT list would be text

    def _read(self, value: Any) -> bytes:
        return self._joined([(None, None, value)])

    def _joined(self, rows: Sequence[tuple[Any, ...]]) -> bytes:
        import numpy as np

        if not rows:
            return b""
        raw = np.frombuffer(b"".join(r[2] for r in rows), dtype=">f4")
        return raw.reshape(len(rows), -1)[:, 1:].astype(np.float32).tobytes()
