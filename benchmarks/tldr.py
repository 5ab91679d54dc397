"""tldr pages (38k markdown files, ~40 languages): indexing speed, no-op reindex, query latency
and quality, cold start. Prints one JSON line.

    python benchmarks/tldr.py [--sample 400] [--queries 300]

The full corpus is indexed as text (BM25). Embedding all 42k chunks takes hours on two cores
(the 4-bit model does ~4 chunks/s), so vectors cover a sample: the pages of ``--sample``
random commands in en, es, it and zh, indexed as a second library. Quality (a query made of
one example's description should find that command's page, any language, in the top 5) is
measured on that sample in all three modes. Latency is measured on the whole index (BM25 over
38k pages plus the sample's vectors); the cost of scoring a full-size vector matrix is measured
separately on a random matrix of the same shape and reported as such.
Vectors come from a persistent cache (``$BRAINMAP_BENCH_CACHE``): only the first run embeds.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    CACHE,
    cold_process_seconds,
    keep_cache,
    ms,
    percentile,
    python_startup_seconds,
    seed_cache,
    unpack,
)
from brainmap import libmap, ops
from brainmap.search import MODES

LANGS = ("pages", "pages.es", "pages.it", "pages.zh")


def make_sample(root: Path, commands: int, seed: int = 11) -> Path:
    """Copy the en/es/it/zh pages of random commands into a folder of their own."""
    target = CACHE / "data" / f"tldr-sample-{commands}-{seed}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    english = sorted(p.relative_to(root / "pages") for p in (root / "pages").glob("*/*.md"))
    for rel in random.Random(seed).sample(english, commands):
        for lang in LANGS:
            source = root / lang / rel
            if source.exists():
                (target / lang / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target / lang / rel)
    (target / ".complete").touch()
    return target


def _examples(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        re.sub(r"[\[\]{}]", "", line[2:].rstrip(":：").strip())
        for line in lines
        if line.startswith("- ")
    ]


def sample_queries(root: Path, count: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """(language dir, description query, command file name) from random example lines.

    Only descriptions that occur in one page of ``root`` are used: alias pages share
    "View documentation for the original command", which no search can resolve.
    """
    rng = random.Random(seed)
    pages = sorted(p for lang in LANGS for p in (root / lang).glob("*/*.md"))
    seen = Counter(text for page in pages for text in set(_examples(page)))
    out = []
    for path in rng.sample(pages, min(count, len(pages))):
        unique = [text for text in _examples(path) if seen[text] == 1]
        if unique:
            out.append((path.relative_to(root).parts[0], rng.choice(unique), path.name))
    return out


def run_queries(
    brain: ops.Brain, queries: list[tuple[str, str, str]], mode: str, libraries: list[str] | None
) -> tuple[list[float], dict[str, list[int]]]:
    for _, query, _ in queries[:5]:  # warm up: model, vector matrix, page cache
        ops.search(brain, ops.SearchInput(query=query, mode=mode, library=libraries))
    latencies, found = [], {lang: [0, 0] for lang in LANGS}
    for lang, query, name in queries:
        started = time.perf_counter()
        hits = ops.search(
            brain, ops.SearchInput(query=query, mode=mode, limit=5, library=libraries)
        ).hits
        latencies.append(time.perf_counter() - started)
        found[lang][0] += any(Path(hit.path).name == name for hit in hits)
        found[lang][1] += 1
    return latencies, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", type=int, default=400, help="commands whose pages get vectors")
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()

    data = unpack("tldr-pages.tar.gz")
    sample = make_sample(data, args.sample)
    home = Path(tempfile.mkdtemp(prefix="bm-tldr-"))
    seed_cache(home)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="tldr", path=str(data)))
    ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
    result: dict[str, object] = {"benchmark": "tldr"}

    started = time.perf_counter()
    text = ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False)).libraries[0]
    text_s = time.perf_counter() - started
    result |= {
        "files": text.files,
        "chunks": text.chunks,
        "text_index_s": round(text_s, 2),
        "text_chunks_per_s": round(text.chunks / text_s),
    }
    started = time.perf_counter()
    ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False))
    result["noop_reindex_s"] = round(time.perf_counter() - started, 3)
    result["noop_reindex_cli_s"] = round(
        cold_process_seconds(home, ["reindex", "tldr", "--no-embed"], runs=3), 3
    )
    print(f"text: {text.files} files, {text.chunks} chunks, {text_s:.1f}s", file=sys.stderr)
    lib = brain.cfg.library("tldr")
    library_id = brain.store.entries.library_ids(["tldr"])["tldr"]
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        libmap.compute(brain.cfg, brain.store, lib, library_id, None)  # not a git repo
        timings.append(time.perf_counter() - started)
    result["map_compute_s"] = round(min(timings), 3)  # the block of the 38k-page library
    started = time.perf_counter()
    libmap.refresh(brain.cfg, brain.store, embed=False)
    result["map_refresh_noop_ms"] = ms(time.perf_counter() - started)

    started = time.perf_counter()
    emb = ops.reindex(brain, ops.ReindexInput(libraries=["sample"])).embedding
    assert emb is not None and not emb.error
    keep_cache(home)
    result |= {
        "vectors": f"sample library: {brain.store.counts()['vectors']} chunks of {args.sample} commands (en/es/it/zh)",
        "sample_embed_s": round(time.perf_counter() - started, 1),
        "sample_embedded": emb.embedded,
        "sample_from_cache": emb.cached,
    }

    # quality, on the sample (every chunk has a vector)
    queries = sample_queries(sample, args.queries)
    result["quality_queries"] = len(queries)
    for mode in MODES:
        latencies, found = run_queries(brain, queries, mode, ["sample"])
        result[f"{mode}_hit@5"] = round(sum(v[0] for v in found.values()) / len(queries), 3)
        result[f"{mode}_hit@5_by_lang"] = {
            k: round(v[0] / v[1], 3) for k, v in found.items() if v[1]
        }
        print(f"{mode}: hit@5 {result[f'{mode}_hit@5']}", file=sys.stderr)

    # latency, on the whole index
    full_queries = sample_queries(data, args.queries, seed=3)
    for mode in ("bm25", "hybrid"):
        latencies, _ = run_queries(brain, full_queries, mode, None)
        result[f"{mode}_p50_ms"] = ms(percentile(latencies, 0.5))
        result[f"{mode}_p95_ms"] = ms(percentile(latencies, 0.95))
        print(f"{mode}: p50 {result[f'{mode}_p50_ms']} ms", file=sys.stderr)
    matrix = np.random.default_rng(0).standard_normal((text.chunks, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = matrix[0].copy()
    timings = []
    for _ in range(50):
        started = time.perf_counter()
        scores = matrix @ query
        np.argpartition(-scores, 49)[:50]
        timings.append(time.perf_counter() - started)
    result["vector_scoring_full_size_ms"] = ms(percentile(timings, 0.5))

    result["python_startup_s"] = round(python_startup_seconds(), 3)
    cold_query = full_queries[0][1]
    result["cold_search_s"] = round(cold_process_seconds(home, ["search", cold_query]), 3)
    result["cold_search_bm25_s"] = round(
        cold_process_seconds(home, ["search", cold_query, "--mode", "bm25"]), 3
    )
    brain.close()
    shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
