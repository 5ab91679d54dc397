"""SQLite against PostgreSQL + pgvector, side by side in one run, on the tldr index. One JSON line.

    python benchmarks/postgres.py [--pages N] [--queries 200] [--sample 400] [--keep DIR]

Each backend gets a home of its own, built the same way as benchmarks/serve.py's (the tldr
pages as text, the ``--sample``-command sample with vectors from the persistent cache, so
nothing is re-embedded); the PostgreSQL one keeps its index in a throwaway PostgreSQL 16 with
pgvector from the pgserver wheel (tests/pg_server.py), selected by ``$BRAINMAP_DB``. Both are
built and searched in this one process, one after the other for indexing and query by query
in turn for search, so that a noisy machine weighs on both alike.

- ``index``: text indexing of the tldr pages (``embed=False``, as benchmarks/tldr.py times
  it; the files read once before, so that neither pays for a cold disk): chunks/s, and a
  no-op reindex.
- ``latency``: ms per search over the whole index (tldr pages + sample) of ``--queries``
  tldr example descriptions (as serve.py picks them), p50/p95 in hybrid mode, p50 in bm25
  and vector mode. Every query runs once on each backend before timing (the query vectors
  are then cached: what is measured is the store and the search, not the model).
- ``quality``: bm25 and hybrid hit@5 on the sample (tldr.py's queries and scoring), and the
  share of the latency queries whose ten first hits are the same on both backends: the same
  chunk ids in the same order (``top10_same_ids``), the same chunks by library, path and
  lines (``top10_same_chunks``, which does not depend on how each database numbers rows),
  and how many of the ten they share on average (``top10_overlap``).

``--pages N`` indexes N random pages of the corpus (all by default, ~38k) for a quick run;
``--exclude GLOB`` (again for more) leaves pages out of the tldr library on both backends.
An error on one backend is reported in the line (``<backend>_error``, the traceback on
stderr) and the other's figures are still measured. ``--profile`` prints to stderr where a
hybrid search's time goes on each backend (cProfile over the latency queries).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pg_server

from _common import ms, percentile, seed_cache, unpack
from brainmap import ops
from brainmap.config import DEFAULT_EXCLUDE
from tldr import make_sample, run_queries, sample_queries

BACKENDS = ("sqlite", "postgres")
MODES = ("hybrid", "bm25", "vector")


@contextlib.contextmanager
def backend_env(url: str | None) -> Iterator[None]:
    """``$BRAINMAP_DB`` set to ``url`` (or unset for SQLite) while a backend's brain works:
    every connection it opens, from any thread, then goes where it should."""
    before = os.environ.pop("BRAINMAP_DB", None)
    if url:
        os.environ["BRAINMAP_DB"] = url
    try:
        yield
    finally:
        os.environ.pop("BRAINMAP_DB", None)
        if before is not None:
            os.environ["BRAINMAP_DB"] = before


def corpus(data: Path, pages: int | None, seed: int = 13) -> Path:
    """The whole tldr corpus, or ``pages`` random pages of it in a scratch folder."""
    if not pages:
        return data
    target = Path(tempfile.gettempdir()) / f"bm-pg-corpus-{pages}-{seed}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    every = sorted(p.relative_to(data) for p in data.glob("*/*/*.md"))
    for rel in random.Random(seed).sample(every, min(pages, len(every))):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data / rel, target / rel)
    (target / ".complete").touch()
    return target


def read_all(folder: Path) -> int:
    """Read every page once (a warm page cache for both backends); how many there are."""
    n = 0
    for path in folder.rglob("*.md"):
        path.read_bytes()
        n += 1
    return n


class Side:
    """One backend: its home, its brain, and the ``$BRAINMAP_DB`` it needs."""

    def __init__(self, name: str, home: Path, url: str | None) -> None:
        self.name, self.home, self.url = name, home, url
        self.brain: ops.Brain | None = None
        self.error: str | None = None

    def run(self, fn: Callable[[ops.Brain], Any]) -> Any:
        with backend_env(self.url):
            assert self.brain is not None
            return fn(self.brain)

    def open(self) -> None:
        with backend_env(self.url):
            seed_cache(self.home)
            self.brain = ops.Brain(self.home)

    def close(self) -> None:
        if self.brain is not None:
            with backend_env(self.url), contextlib.suppress(Exception):
                self.brain.close()
            self.brain = None


def attempt(side: Side, what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None with the side marked failed (its traceback on stderr)."""
    if side.error:
        return None
    try:
        return fn()
    except Exception as exc:  # a new backend: report what broke and go on with the other
        side.error = f"{what}: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        print(f"--- {side.name} failed in {what}", file=sys.stderr)
        traceback.print_exc()
        return None


def build(side: Side, tldr: Path, sample: Path, exclude: list[str]) -> dict[str, Any]:
    side.open()

    def text(brain: ops.Brain) -> dict[str, Any]:
        left_out = [*DEFAULT_EXCLUDE, *exclude]
        ops.library_add(brain, ops.LibraryAddInput(name="tldr", path=str(tldr), exclude=left_out))
        ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
        started = time.perf_counter()
        lib = ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False)).libraries[0]
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False))
        noop = time.perf_counter() - started
        return {
            "files": lib.files,
            "chunks": lib.chunks,
            "text_index_s": round(seconds, 2),
            "text_chunks_per_s": round(lib.chunks / seconds),
            "noop_reindex_s": round(noop, 3),
        }

    def vectors(brain: ops.Brain) -> dict[str, Any]:
        started = time.perf_counter()
        emb = ops.reindex(brain, ops.ReindexInput(libraries=["sample"])).embedding
        assert emb is not None and not emb.error, emb
        return {
            "sample_index_s": round(time.perf_counter() - started, 2),
            "sample_embedded": emb.embedded,  # 0 when the cache held every vector
            "sample_vectors": brain.store.counts()["vectors"],
        }

    figures = attempt(side, "text index", lambda: side.run(text)) or {}
    figures |= attempt(side, "sample index", lambda: side.run(vectors)) or {}
    print(f"{side.name}: {figures}", file=sys.stderr)
    return figures


def search(brain: ops.Brain, query: str, mode: str, limit: int, libraries: list[str] | None):
    return ops.search(
        brain, ops.SearchInput(query=query, mode=mode, limit=limit, library=libraries)
    ).hits


def latency(sides: list[Side], queries: list[str], mode: str) -> dict[str, Any]:
    """Each query on each live backend in turn (the order swapped every query): the
    latencies and the ten first hits."""
    live = [s for s in sides if not s.error]
    for side in live:  # warm up: every query once (its vector cached), the databases' caches
        attempt(side, f"{mode} warm-up", lambda s=side: s.run(
            lambda b: [search(b, q, mode, 10, None) for q in queries]))  # fmt: skip
    live = [s for s in live if not s.error]
    times: dict[str, list[float]] = {s.name: [] for s in live}
    hits: dict[str, list[list[Any]]] = {s.name: [] for s in live}
    for i, query in enumerate(queries):
        for side in live if i % 2 == 0 else live[::-1]:
            if side.error:
                continue

            def one(brain: ops.Brain, query: str = query) -> tuple[float, list[Any]]:
                started = time.perf_counter()
                found = search(brain, query, mode, 10, None)
                return time.perf_counter() - started, found

            done = attempt(side, f"{mode} search", lambda s=side: s.run(one))
            if done:
                times[side.name].append(done[0])
                hits[side.name].append(done[1])
    out: dict[str, Any] = {}
    for side in live:
        if side.error or not times[side.name]:
            continue
        out[f"{side.name}_{mode}_p50_ms"] = ms(percentile(times[side.name], 0.5))
        if mode == "hybrid":
            out[f"{side.name}_{mode}_p95_ms"] = ms(percentile(times[side.name], 0.95))
    if all(not s.error for s in sides) and len(hits) == 2:
        a, b = (hits[name] for name in BACKENDS)
        ids = [
            ([h.chunk_id for h in x], [h.chunk_id for h in y]) for x, y in zip(a, b, strict=True)
        ]
        key = lambda h: (h.library, h.path, h.line_start, h.line_end)  # noqa: E731
        chunks = [([key(h) for h in x], [key(h) for h in y]) for x, y in zip(a, b, strict=True)]
        n = len(ids)
        for query, (x, y) in zip(queries, chunks, strict=True):
            if x != y:  # what differs, for a look
                print(f"{mode} differs: {query!r}\n  sqlite   {x}\n  postgres {y}", file=sys.stderr)
        out[f"{mode}_top10_same_ids"] = round(sum(x == y for x, y in ids) / n, 3)
        out[f"{mode}_top10_same_chunks"] = round(sum(x == y for x, y in chunks) / n, 3)
        out[f"{mode}_top1_same_chunk"] = round(sum(x[:1] == y[:1] for x, y in chunks) / n, 3)
        shared = [  # two empty lists agree
            (Counter(x) & Counter(y)).total() / max(len(x), len(y)) if x or y else 1.0
            for x, y in chunks
        ]
        out[f"{mode}_top10_overlap"] = round(sum(shared) / n, 3)
        out[f"{mode}_queries_without_hits"] = {k: sum(not h for h in v) for k, v in hits.items()}
    return out


def quality(side: Side, queries: list[tuple[str, str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("bm25", "hybrid"):
        done = attempt(side, f"{mode} quality", lambda m=mode: side.run(
            lambda b: run_queries(b, queries, m, ["sample"])))  # fmt: skip
        if done:
            found = done[1]
            out[f"{side.name}_{mode}_hit@5"] = round(
                sum(v[0] for v in found.values()) / len(queries), 3
            )
    return out


def profile(side: Side, queries: list[str], top: int = 25) -> None:
    """Where the time of hybrid searches goes on this backend (cProfile, to stderr)."""

    def run(brain: ops.Brain) -> None:
        prof = cProfile.Profile()
        prof.enable()
        for q in queries:
            search(brain, q, "hybrid", 10, None)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
        text.write("\n--- by own time\n")
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
        print(
            f"=== {side.name}: {len(queries)} hybrid searches\n{text.getvalue()}", file=sys.stderr
        )

    attempt(side, "profile", lambda: side.run(run))


def server_facts(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = vector.fetchone()
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return {"postgres_version": version, "pgvector": row[0] if row else None, "db_bytes": size}


def revision() -> str:
    """The commit measured (``+dirty`` when src/ has changes not committed), or ``?``."""
    try:
        git = ["git", "-C", str(Path(__file__).resolve().parent.parent)]
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "src"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def sqlite_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("brain.db*"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=0, help="random pages of the corpus (0: all)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sample", type=int, default=400, help="commands whose pages get vectors")
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB",
        help="leave these pages (relative to the corpus) out, on both backends",
    )  # fmt: skip
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the homes (and a pg_dump) in DIR"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile hybrid search, stderr")
    args = parser.parse_args()

    from pg_server import Postgres

    started_run = time.perf_counter()
    data = unpack("tldr-pages.tar.gz")
    sample = make_sample(data, args.sample)
    tldr = corpus(data, args.pages)
    read_all(tldr)
    read_all(sample)
    if args.keep:
        if any((args.keep / name).exists() for name in BACKENDS):
            parser.error(f"{args.keep} already holds a sqlite/ or postgres/ home")
        root = args.keep
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="bm-pgbench-"))

    pg = Postgres()
    sides: list[Side] = []
    result: dict[str, Any] = {
        "benchmark": "postgres",
        "commit": revision(),
        "corpus_pages": args.pages or "all",
    }
    if args.exclude:
        result["excluded_globs"] = len(args.exclude)
    try:
        sides = [Side("sqlite", root / "sqlite", None), Side("postgres", root / "postgres", None)]
        sql, post = sides
        post.url = attempt(post, "server start", lambda: pg.start().database())
        url = post.url or ""
        for side in sides:
            if not side.error:
                figures = build(side, tldr, sample, args.exclude)
                result |= {f"{side.name}_{k}": v for k, v in figures.items()}
        if not sql.error and not post.error:
            result["pg_index_slowdown"] = round(
                result["postgres_text_index_s"] / result["sqlite_text_index_s"], 2
            )
        result["sqlite_db_bytes"] = sqlite_bytes(sql.home)
        facts = attempt(post, "server facts", lambda: server_facts(url)) or {}
        result |= {
            k if k.startswith(("postgres_", "pgvector")) else f"postgres_{k}": v
            for k, v in facts.items()
        }

        queries = [q for _, q, _ in sample_queries(tldr, args.queries, seed=5)]
        result["latency_queries"] = len(queries)
        for mode in MODES:
            result |= latency(sides, queries, mode)
            print(
                f"{mode}: { ({k: v for k, v in result.items() if f'{mode}_' in k}) }",
                file=sys.stderr,
            )
        if not sql.error and not post.error:
            result["pg_hybrid_slowdown"] = round(
                result["postgres_hybrid_p50_ms"] / result["sqlite_hybrid_p50_ms"], 2
            )

        graded = sample_queries(sample, args.queries)
        result["quality_queries"] = len(graded)
        for side in sides:
            result |= quality(side, graded)
        if args.profile:
            for side in sides:
                profile(side, queries)
        if args.keep:  # the PostgreSQL index goes with the server
            attempt(post, "pg_dump", lambda: subprocess.run(
                [str(pg.bin / "pg_dump"), "-Fc", "-f", str(root / "postgres.dump"), url],
                check=True, capture_output=True, cwd=pg.root,
            ))  # fmt: skip
        for side in sides:
            if side.error:
                result[f"{side.name}_error"] = side.error
    finally:
        for side in sides:
            side.close()
        pg.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    result["wall_s"] = round(time.perf_counter() - started_run, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
