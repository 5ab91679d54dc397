"""Searches in one process under load, on the tldr index of benchmarks/serve.py. One JSON line.

    python benchmarks/search_load.py [--home DIR] [--seconds 6] [--queries 1500]

- ``threads``: hybrid searches/s of 1, 2, 3, 4 and 8 threads searching at once, with the
  slots of ``[search] concurrency`` (``gated``: the default, one more than the CPUs) and
  without them (``ungated``: as many slots as threads); the queries' vectors are cached first,
  so that what is measured is the search, not the model.
- ``bm25``: BM25 over the whole index (38k pages) scored only where the query's cuts say (its
  words, its rarest terms: ``rare``, the default) and on every match (``every``): hit@5 and MRR@10 of a query made
  of one example's description for that command's page, ms per BM25 query, and how many of
  the first ten hits the two share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import unpack
from brainmap import ops
from serve import build_home
from tldr import sample_queries

WEIGHTS = (4.0, 2.0, 1.0, 1.0)


def searches_per_s(brain: ops.Brain, queries: list[str], threads: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    done = [0] * threads

    def worker(n: int) -> None:
        i = n
        while time.monotonic() < stop:
            ops.search(brain, ops.SearchInput(query=queries[i % len(queries)]))
            done[n] += 1
            i += threads

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(done) / (time.monotonic() - started)


def bm25_quality(brain: ops.Brain, queries: list[tuple[str, str, str]], cut: bool) -> dict:
    """hit@5, MRR@10 and ms per BM25 query scored where the query's cuts say (``cut``) or on
    every match, the hits, and how many queries a cut answered (by their words, by rare terms)."""
    analyser, entries = brain.searcher.analyser, brain.store.entries
    filters = brain.searcher.filters()
    found, reciprocal, times, tops = 0, 0.0, [], []
    by_words = by_rare = 0
    for _, query, name in queries:
        analysis = analyser.analyse(query)
        if not analysis.terms:
            tops.append([])
            continue
        # the cut that answered (held the 50 wanted), as Searcher.bm25 tries them
        taken = next(
            (
                c
                for c in analysis.cuts
                if len(entries.bm25(analysis.terms, filters, 50, WEIGHTS, c)) >= 50
            ),
            None,
        )
        by_words += taken is not None and len(taken) > 1
        by_rare += taken is not None and len(taken) == 1
        started = time.perf_counter()
        if cut:
            ids = brain.searcher.bm25(analysis, filters, 50, WEIGHTS)
        else:
            ids = entries.bm25(analysis.terms, filters, 50, WEIGHTS)
        times.append(time.perf_counter() - started)
        rows_by_id = entries.hits(ids[:10])
        names = [Path(rows_by_id[i].path).name for i in ids[:10] if i in rows_by_id]
        rank = names.index(name) + 1 if name in names else None
        found += rank is not None and rank <= 5
        reciprocal += 1 / rank if rank else 0.0
        tops.append(ids[:10])
    return {
        "hit@5": round(found / len(queries), 4),
        "mrr@10": round(reciprocal / len(queries), 4),
        "ms": round(statistics.mean(times) * 1000, 2),
        "tops": tops,
        "cut_by_words": by_words,
        "cut_by_rare_terms": by_rare,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, help="the home benchmarks/serve.py builds and reuses")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--queries", type=int, default=1500)
    args = parser.parse_args()

    home = build_home(400, args.home)
    data = unpack("tldr-pages.tar.gz")
    queries = [q for _, q, _ in sample_queries(data, 200, seed=5)]
    result: dict[str, object] = {"benchmark": "search_load", "cpus": os.cpu_count()}
    rates: dict[str, dict[int, float]] = {}
    for kind, concurrency in (("gated", 0), ("ungated", 64)):
        brain = ops.Brain(home)
        brain.cfg.search.concurrency = concurrency  # read when the first searcher is made
        for q in queries:  # every query's vector cached: the model is not what is measured
            ops.search(brain, ops.SearchInput(query=q))
        rates[kind] = {
            threads: round(searches_per_s(brain, queries, threads, args.seconds), 1)
            for threads in (1, 2, 3, 4, 8)
        }
        brain.close()
    result["searches_per_s"] = rates

    brain = ops.Brain(home)
    tldr_queries = sample_queries(data, args.queries, seed=11)
    rare = bm25_quality(brain, tldr_queries, cut=True)
    every = bm25_quality(brain, tldr_queries, cut=False)
    shared = [
        len(set(a) & set(b)) / len(b) for a, b in zip(rare["tops"], every["tops"], strict=True) if b
    ]
    result["bm25"] = {
        "queries": len(tldr_queries),
        "rare": {k: v for k, v in rare.items() if k != "tops"},
        "every": {k: v for k, v in every.items() if k != "tops"},
        "top10_shared": round(statistics.mean(shared), 4),
    }
    brain.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
