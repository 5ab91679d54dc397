"""Routing by the library map: recall and latency with and without it. Prints one JSON line.

    python benchmarks/routing.py [--sample 400] [--queries 300] [--full]

The tldr pages of ``--sample`` random commands in en, es, it and zh (the sample of
benchmarks/tldr.py, whose vectors are cached) become one library per language and platform
(pages.es/linux -> es-linux, ...). A query is one example's description; it is found when
that command's page (any language) is in the top 5 / top 10. Each query runs without routing
(every library) and with routing to the ``route_libraries`` libraries nearest it on the map
(by the centroid of each library's chunk vectors), for several values of that setting;
``target_routed`` is how often the library holding the query's own page was among those
picked. ``router_compare`` measures that for the two vectors a map block keeps: its embedded
sentence and its centroid. ``--full`` adds the latency on all 38k tldr pages split the same
way (~250 libraries, text only: they are routed by their sentences, as no chunk has a vector).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from _common import keep_cache, ms, percentile, seed_cache, unpack
from brainmap import ops
from brainmap.libmap import route_libraries
from tldr import LANGS, make_sample, sample_queries


def library_name(lang: str, platform: str) -> str:
    return f"{lang.removeprefix('pages').removeprefix('.') or 'en'}-{platform}"


def compare_routers(
    brain: ops.Brain, queries: list[tuple[str, str, str]], owner: dict[tuple[str, str], str]
) -> dict[str, float]:
    """How often the query's own library is among the k picked, routing by the embedded block
    sentence vs by the centroid of the library's chunk vectors."""
    rows = [r for r in brain.store.maps.blocks() if r.vec is not None and r.centroid is not None]
    names = [r.library for r in rows]
    matrices = {
        "sentence": np.stack([np.frombuffer(r.vec or b"", dtype=np.float32) for r in rows]),
        "centroid": np.stack([np.frombuffer(r.centroid or b"", dtype=np.float32) for r in rows]),
    }
    out: dict[str, float] = {}
    for lang, query, name in queries:
        vector = brain.searcher.embedder.query(query)
        assert vector is not None
        for router, matrix in matrices.items():
            for k in (1, 3, 5):
                picked = route_libraries(vector, names, matrix, k)
                key = f"{router}@{k}"
                out[key] = out.get(key, 0) + (owner.get((lang, name)) in picked) / len(queries)
    return {k: round(v, 3) for k, v in sorted(out.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--full", action="store_true", help="also the latency on all pages")
    args = parser.parse_args()

    sample = make_sample(unpack("tldr-pages.tar.gz"), args.sample)
    home = Path(tempfile.mkdtemp(prefix="bm-route-"))
    seed_cache(home)
    brain = ops.Brain(home)
    owner: dict[tuple[str, str], str] = {}  # (lang dir, file name) -> library
    for lang in LANGS:
        for folder in sorted(p for p in (sample / lang).iterdir() if p.is_dir()):
            name = library_name(lang, folder.name)
            ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(folder), code=[]))
            for page in folder.glob("*.md"):
                owner[(lang, page.name)] = name
    started = time.perf_counter()
    report = ops.reindex(brain, ops.ReindexInput())
    index_s = time.perf_counter() - started
    keep_cache(home)
    libraries = len(brain.cfg.libraries)
    result: dict[str, object] = {
        "benchmark": "routing",
        "libraries": libraries,
        "chunks": brain.store.counts()["chunks"],
        "index_s": round(index_s, 1),
        "map_blocks": len(report.map),
    }
    started = time.perf_counter()
    ops.map_recompute(brain, ops.MapRecomputeInput())
    result["map_recompute_all_unchanged_s"] = round(time.perf_counter() - started, 3)

    queries = sample_queries(sample, args.queries)
    result["queries"] = len(queries)
    brain.cfg.map.route_above = 1  # route whenever asked to (the default waits for 8)
    for label, route, count in (("all", False, 0), ("route3", True, 3), ("route5", True, 5),
                                ("route8", True, 8)):  # fmt: skip
        brain.cfg.map.route_libraries = max(count, 1)
        for _, query, _ in queries[:5]:  # warm up: model, matrix, page cache
            ops.search(brain, ops.SearchInput(query=query, route=route))
        latencies, at5, at10, routed_ok = [], 0, 0, 0
        for lang, query, name in queries:
            brain.searcher.embedder.forget_queries()  # every run embeds its query, as a new one would
            started = time.perf_counter()
            found = ops.search(brain, ops.SearchInput(query=query, limit=10, route=route))
            latencies.append(time.perf_counter() - started)
            names = [Path(hit.path).name for hit in found.hits]
            at5 += name in names[:5]
            at10 += name in names
            if found.routed is not None:
                routed_ok += owner.get((lang, name)) in found.routed
        n = len(queries)
        result[label] = {
            "hit@5": round(at5 / n, 3),
            "hit@10": round(at10 / n, 3),
            "p50_ms": ms(percentile(latencies, 0.5)),
            "p95_ms": ms(percentile(latencies, 0.95)),
        }
        if route:
            result[label]["target_routed"] = round(routed_ok / n, 3)  # type: ignore[index]
        print(f"{label}: {result[label]}", file=sys.stderr)
    result["router_compare"] = compare_routers(brain, queries, owner)
    brain.close()
    shutil.rmtree(home, ignore_errors=True)
    if args.full:
        result["full"] = full_latency(args.queries)
    print(json.dumps(result))


def full_latency(count: int) -> dict[str, object]:
    """Search latency with and without routing over every tldr page, one library per language
    and platform (BM25 over 42k chunks; no chunk vectors, so blocks route by sentence)."""
    data = unpack("tldr-pages.tar.gz")
    home = Path(tempfile.mkdtemp(prefix="bm-route-full-"))
    seed_cache(home)
    brain = ops.Brain(home)
    for lang in sorted(p for p in data.iterdir() if p.is_dir() and p.name.startswith("pages")):
        for folder in sorted(p for p in lang.iterdir() if p.is_dir()):
            name = f"{lang.name}-{folder.name}"  # pages.en exists beside pages
            ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(folder), code=[]))
    started = time.perf_counter()
    ops.reindex(brain, ops.ReindexInput(embed=False))
    out: dict[str, object] = {"libraries": len(brain.cfg.libraries),
                              "index_s": round(time.perf_counter() - started, 1)}  # fmt: skip
    started = time.perf_counter()
    ops.map_recompute(brain, ops.MapRecomputeInput())  # embeds the sentences
    out["embed_sentences_s"] = round(time.perf_counter() - started, 1)
    keep_cache(home)
    queries = sample_queries(data, count, seed=3)
    for route in (False, True):
        for _, query, _ in queries[:5]:
            ops.search(brain, ops.SearchInput(query=query, route=route))
        latencies = []
        for _, query, _ in queries:
            brain.searcher.embedder.forget_queries()
            started = time.perf_counter()
            ops.search(brain, ops.SearchInput(query=query, route=route))
            latencies.append(time.perf_counter() - started)
        out["route" if route else "all"] = {
            "p50_ms": ms(percentile(latencies, 0.5)),
            "p95_ms": ms(percentile(latencies, 0.95)),
        }
    brain.close()
    shutil.rmtree(home, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
