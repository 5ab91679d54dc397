"""PostgreSQL + pgvector at a million chunks: hybrid search through an HNSW index, beside the
exact in-memory vector search that brain.db does. One JSON line.

    python benchmarks/postgres_scale.py [--chunks 1000000] [--queries 200] [--sigma 0.017]
        [--pages N]   # N random tldr pages as the base, for a quick run

1. **Base.** A home on a throwaway PostgreSQL 16 with pgvector (tests/pg_server.py) indexes
   every tldr page with brainmap's own indexer (~42k chunks, text only), then gives the chunks
   the vectors the persistent benchmark cache holds (any benchmark's run fills it; nothing is
   embedded here: the 42k chunks take about two hours at ~7 chunks/s on this machine). The
   pages with a chunk the cache has no vector for are left out of the base.
2. **Grown** to ``--chunks`` by copies of the tldr library (libraries ``tldr~1``, ``tldr~2``,
   ...), made in SQL on the server: 1M chunks through the indexer would take about 50 minutes
   at PostgreSQL's 331 chunks/s (benchmarks/postgres.py), and their vectors hours. Each copy
   of a chunk varies: its full text lacks one of its words, picked at random, and its vector
   is the original's plus gaussian noise (``--sigma`` per dimension: cosine ~0.85 with the
   original, ~0.72 between two copies), normalised. Less noise makes each page's copies a
   tight cluster that HNSW's graph cannot leave (sigma 0.017, cosine 0.95: recall@10 0.04):
   real chunks are not 70 near-copies of each other. The HNSW index's recall on real vectors
   is measured on the base, before the copies (``base_hnsw_recall_at_10``). Entries, chunks and vectors are the rows the indexer writes; the
   copies have no graph edges or tags (search does not read them).
3. **HNSW.** ``store.vectors.ensure_ann`` builds the index as a reindex does once a model has
   ``[store] hnsw_from`` vectors: the build is timed.
4. **Latency.** ``--queries`` tldr example descriptions (as serve.py and postgres.py pick them),
   each run once before timing (its vector then cached): hybrid p50/p95, bm25 and vector p50,
   through ``ops.search`` as every interface calls it.
5. **Exact, as brain.db does it.** The same vectors as one float32 matrix in memory
   (brainmap.vectorindex, what every brain.db searcher holds, and a PostgreSQL one below
   ``hnsw_from``): its size, the time to take the vectors from the database into it, and p50 of
   a search's vector step over it; the HNSW index's recall@10 against it on the same queries.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pg_server

from _common import ms, percentile, seed_cache, unpack
from brainmap import ops
from brainmap.config import DEFAULT_EXCLUDE
from brainmap.store.postgres.repos import ann_index_name
from postgres import backend_env, corpus, revision, server_facts
from tldr import sample_queries

MODES = ("hybrid", "bm25", "vector")


def vectors_from_cache(brain: ops.Brain, home: Path, model: str) -> dict[str, Any]:
    """The chunks' vectors that the persistent cache holds (nothing is embedded)."""
    from brainmap.embedding import text_hash, vector_texts
    from brainmap.store import VectorCache

    cache = VectorCache(home / "vectors.db")
    after, found, missing = None, 0, 0
    while page := brain.store.vectors.pending_chunks(model, None, 2000, after=after):
        after = page[-1].id
        keys = {  # a chunk's texts: its whole text's, then its windows' (a run of turns)
            p.id: [text_hash(t) for t in vector_texts(p.title, p.aliases, p.heading, p.text)]
            for p in page
        }
        vectors = cache.get_many(model, [h for hashes in keys.values() for h in hashes])
        ready = [p for p in page if all(h in vectors for h in keys[p.id])]
        rows = [(p.id, p.library_id, vectors[keys[p.id][0]]) for p in ready]
        parts = {p.id: b"".join(vectors[h] for h in keys[p.id][1:]) for p in ready
                 if len(keys[p.id]) > 1}  # fmt: skip
        brain.store.vectors.put(model, rows, parts)
        found, missing = found + len(rows), missing + len(page) - len(rows)
    cache.close()
    return {"tldr_vectors_cached": found, "tldr_vectors_missing": missing}


def keep_embedded(url: str, model: str) -> int:
    """Leave out of the base the pages with a chunk that has no vector; its chunks left."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM entry e WHERE EXISTS (SELECT 1 FROM chunk c LEFT JOIN chunk_vec v "
            "ON v.chunk_id = c.id AND v.model = %s WHERE c.entry_id = e.id AND v.chunk_id "
            "IS NULL)",
            (model,),
        )
        return int(conn.execute("SELECT count(*) FROM chunk").fetchone()[0])


def columns(conn: Any, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [r[0] for r in rows]


def grow(url: str, model: str, copies: int, sigma: float) -> dict[str, Any]:
    """Add ``copies`` varied copies of the tldr library: entries and chunks in SQL, vectors
    by binary COPY. Triggers are off meanwhile (``session_replication_role``), so the
    generations are moved once at the end, as many single writes would have moved them."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    started = time.perf_counter()
    rng = np.random.default_rng(1)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        base = conn.execute("SELECT id FROM library WHERE name = 'tldr'").fetchone()[0]
        rows = conn.execute(
            "SELECT chunk_id, vec FROM chunk_vec WHERE model = %s AND library_id = %s "
            "ORDER BY chunk_id",
            (model, base),
        ).fetchall()
        base_ids = np.array([r[0] for r in rows], dtype=np.int64)
        matrix = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)
        position = {int(cid): i for i, cid in enumerate(base_ids)}
        entry_cols, chunk_cols = columns(conn, "entry"), columns(conn, "chunk")
        library_cols = [c for c in columns(conn, "library") if c != "id"]
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '1GB'")
        for v in range(1, copies + 1):
            with conn.transaction():
                suffix = f"~{v}"
                picks = ", ".join(
                    {"name": "name || %(s)s", "path": "path || %(s)s"}.get(c, c)
                    for c in library_cols
                )
                library = conn.execute(
                    f"INSERT INTO library({', '.join(library_cols)}) SELECT {picks} "
                    "FROM library WHERE id = %(b)s RETURNING id",
                    {"s": suffix, "b": base},
                ).fetchone()[0]
                picks = ", ".join(
                    {"id": "id || %(s)s", "library_id": "%(l)s"}.get(c, c) for c in entry_cols
                )
                conn.execute(
                    f"INSERT INTO entry({', '.join(entry_cols)}) SELECT {picks} FROM entry "
                    "WHERE library_id = %(b)s",
                    {"s": suffix, "l": library, "b": base},
                )
                varied_tsv = (
                    "CASE WHEN length(c.tsv) > 1 THEN ts_delete(c.tsv, (tsvector_to_array(c.tsv))"
                    "[1 + floor(random() * length(c.tsv))::int]) ELSE c.tsv END"
                )
                picks = ", ".join(
                    {
                        "id": "hashtextextended(c.id::text || %(s)s, 0)",
                        "entry_id": "c.entry_id || %(s)s",
                        "tsv": varied_tsv,
                    }.get(c, f"c.{c}")
                    for c in chunk_cols
                )
                pairs = conn.execute(
                    f"INSERT INTO chunk({', '.join(chunk_cols)}) SELECT {picks} FROM chunk c "
                    "JOIN entry e ON e.id = c.entry_id WHERE e.library_id = %(b)s "
                    "RETURNING id, (SELECT o.id FROM chunk o WHERE o.entry_id = "
                    "left(chunk.entry_id, -length(%(s)s)) AND o.ord = chunk.ord)",
                    {"s": suffix, "b": base},
                ).fetchall()
                kept = [(new, position[old]) for new, old in pairs if old in position]
                noisy = matrix[[i for _, i in kept]] + rng.normal(
                    0, sigma, (len(kept), matrix.shape[1])
                ).astype(np.float32)
                noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
                with conn.cursor().copy(
                    "COPY chunk_vec(chunk_id, library_id, model, vec) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["int8", "int4", "text", "vector"])
                    for (new, _), vector in zip(kept, noisy, strict=True):
                        copy.write_row((new, library, model, vector))
            print(f"copy {v}/{copies}: {len(pairs)} chunks", file=sys.stderr, flush=True)
        conn.execute("SET session_replication_role = DEFAULT")
        # the vector log cannot tell what changed: searchers read everything again
        conn.execute(
            "UPDATE meta SET value = value + 1 WHERE key IN ('vec_gen', 'text_gen', 'map_gen')"
        )
        conn.execute(
            "UPDATE meta SET value = (SELECT value FROM meta WHERE key = 'vec_gen') "
            "WHERE key = 'vec_pruned'"
        )
        conn.execute("VACUUM ANALYZE")
        chunks = conn.execute("SELECT count(*) FROM chunk").fetchone()[0]
        vectors = conn.execute("SELECT count(*) FROM chunk_vec").fetchone()[0]
    return {
        "chunks": int(chunks),
        "vectors": int(vectors),
        "copies": copies,
        "sigma": sigma,
        "grow_s": round(time.perf_counter() - started, 1),
    }


def latency(brain: ops.Brain, queries: list[str], mode: str) -> dict[str, Any]:
    for query in queries:  # every query once: its vector cached, the server's caches warm
        ops.search(brain, ops.SearchInput(query=query, mode=mode))
    times = []
    for query in queries:
        started = time.perf_counter()
        ops.search(brain, ops.SearchInput(query=query, mode=mode))
        times.append(time.perf_counter() - started)
    out = {f"{mode}_p50_ms": ms(percentile(times, 0.5))}
    if mode == "hybrid":
        out[f"{mode}_p95_ms"] = ms(percentile(times, 0.95))
    return out


def exact_beside(brain: ops.Brain, queries: list[str], depth: int) -> dict[str, Any]:
    """The in-memory exact search over the same vectors, and HNSW's recall@10 against it."""
    from brainmap.store import Filters
    from brainmap.vectorindex import VectorIndex, _Snapshot

    model = brain.searcher.model
    store = brain.store
    started = time.perf_counter()
    rows = store.vectors.load(model)  # what a searcher below hnsw_from reads at start
    load_s = time.perf_counter() - started
    exact = VectorIndex(model)
    exact._snapshot = _Snapshot.of(rows)  # the matrix brain.db's searchers hold
    dim = store.vectors.ann_dim(model)
    assert dim is not None
    vectors = [brain.searcher.embedder.query(q) for q in queries]
    times, recall = [], []
    for vector in vectors:
        started = time.perf_counter()
        best = exact.top(store, vector, depth, Filters(), None)
        times.append(time.perf_counter() - started)
        ann = store.vectors.ann_nearest(model, dim, vector, 10, None, None, None)
        truth = {cid for cid, _ in best[:10]}
        recall.append(len(truth & {cid for cid, _ in ann}) / max(len(truth), 1))
    return {
        "exact_matrix_mb": round(len(rows.vectors) / 2**20),
        "exact_load_s": round(load_s, 1),
        "exact_vector_p50_ms": ms(percentile(times, 0.5)),
        "hnsw_recall_at_10": round(sum(recall) / len(recall), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sigma", type=float, default=0.032, help="noise per dimension")
    parser.add_argument("--pages", type=int, default=0, help="random tldr pages (0: all)")
    args = parser.parse_args()

    from pg_server import Postgres

    started_run = time.perf_counter()
    data = corpus(unpack("tldr-pages.tar.gz"), args.pages)
    root = Path(tempfile.mkdtemp(prefix="bm-pgscale-"))
    pg = Postgres()
    result: dict[str, Any] = {"benchmark": "postgres_scale", "commit": revision()}
    brain: ops.Brain | None = None
    try:
        url = pg.start().database()
        with backend_env(url):
            home = root / "home"
            seed_cache(home)
            # the index builds no HNSW index before it has grown
            home.joinpath("config.toml").write_text(f"[store]\nhnsw_from = {10**12}\n")
            brain = ops.Brain(home)
            ops.library_add(
                brain,
                ops.LibraryAddInput(name="tldr", path=str(data), exclude=list(DEFAULT_EXCLUDE)),
            )
            started = time.perf_counter()
            report = ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False))
            model = brain.searcher.model
            result |= {
                "tldr_chunks": report.libraries[0].chunks,
                "text_index_s": round(time.perf_counter() - started, 1),
            }
            result |= vectors_from_cache(brain, home, model)
            brain.close()
            result["base_chunks"] = keep_embedded(url, model)
            print(f"base: {result}", file=sys.stderr, flush=True)

            # HNSW on real vectors only (the base), before the copies
            brain = ops.Brain(home)
            queries = [q for _, q, _ in sample_queries(data, args.queries, seed=5)]
            result["latency_queries"] = len(queries)
            assert brain.store.vectors.ensure_ann(model, 1) is None
            result["base_hnsw_recall_at_10"] = exact_beside(brain, queries, 10)["hnsw_recall_at_10"]
            brain.store.db.execute(f"DROP INDEX {ann_index_name(model)}")
            brain.close()

            copies = max(0, math.ceil(args.chunks / result["base_chunks"]) - 1)
            result |= grow(url, model, copies, args.sigma)
            print(f"grown: {result}", file=sys.stderr, flush=True)

            brain = ops.Brain(home)
            started = time.perf_counter()
            problem = brain.store.vectors.ensure_ann(model, 1)
            result["hnsw_build_s"] = round(time.perf_counter() - started, 1)
            assert problem is None and brain.store.vectors.ann_dim(model), problem
            result |= server_facts(url)

            for mode in MODES:
                result |= latency(brain, queries, mode)
                print(f"{mode}: {result}", file=sys.stderr, flush=True)
            assert brain.searcher.vectors.in_store
            result |= exact_beside(brain, queries, brain.cfg.search.candidates)
    finally:
        if brain is not None:
            brain.close()
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["wall_s"] = round(time.perf_counter() - started_run, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
