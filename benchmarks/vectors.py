"""Refreshing the vector matrix after a save, at 40k x 384: read the changes vs read everything.

    python benchmarks/vectors.py [--chunks 40000] [--saves 20]

A real store gets ``--chunks`` chunks with random unit vectors (ids are hashes, as the
indexer makes them, so a new chunk lands anywhere in the matrix). Then, ``--saves`` times, an
entry is replaced (its two chunks get new vectors) and one is deleted, and the shared
VectorIndex refreshes: the time of that incremental refresh against a full reload of the
same state (what every refresh did before the change log), and a check that both give the
same matrix. One JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ms, percentile
from brainmap.store import ChunkRecord, EntryRecord, Filters, Store
from brainmap.vectorindex import VectorIndex, _Snapshot

MODEL = "bench-model"
DIM = 384
PER_ENTRY = 2


def _id(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def entry(library_id: int, n: int, version: int = 0) -> tuple[EntryRecord, list[ChunkRecord]]:
    eid = f"e{n}"
    record = EntryRecord(
        eid, library_id, f"notes/{n}.md", f"note {n}", "note", None, [], [], None, None,
        "2025-01-01", f"hash{n}-{version}", 0, 1, 0, "2025-01-01", None, {}, [],
    )  # fmt: skip
    chunks = [
        ChunkRecord(
            _id(f"{eid}#{i}"),
            i,
            "",
            1,
            2,
            f"text {n} {i} {version}",
            f"eh{n}-{i}-{version}",
            f"note {n}",
            "",
            f"text {n} {i} {version}",
        )
        for i in range(PER_ENTRY)
    ]
    return record, chunks


def vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def put(store: Store, rng: np.random.Generator, library_id: int, first: int, count: int) -> None:
    with store.db.write():
        rows = []
        for n in range(first, first + count):
            record, chunks = entry(library_id, n)
            store.entries.put_entry(record, chunks, new=True)
            rows += [c.id for c in chunks]
        vecs = vectors(rng, len(rows))
        store.vectors.put(
            MODEL, [(cid, library_id, v.tobytes()) for cid, v in zip(rows, vecs, strict=False)]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=40_000)
    parser.add_argument("--saves", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bm-vectors-") as tmp:
        store = Store(Path(tmp) / "brain.db")
        library_id = store.entries.ensure_library("bench", tmp, "global")
        entries = args.chunks // PER_ENTRY
        for first in range(0, entries, 2000):
            put(store, rng, library_id, first, min(2000, entries - first))
        index = VectorIndex(MODEL)
        started = time.perf_counter()
        index.refresh(store)
        first_load = time.perf_counter() - started
        incremental, full, same = [], [], True
        for i in range(args.saves):
            record, chunks = entry(library_id, i, version=i + 1)  # a save replaces an entry
            store.entries.put_entry(record, chunks)
            vecs = vectors(rng, len(chunks))
            store.vectors.put(
                MODEL, [(c.id, library_id, v.tobytes()) for c, v in zip(chunks, vecs, strict=False)]
            )
            store.entries.delete([f"e{entries - 1 - i}"])  # and one is deleted
            started = time.perf_counter()
            index.refresh(store)
            incremental.append(time.perf_counter() - started)
            started = time.perf_counter()
            reloaded = _Snapshot.of(store.vectors.load(MODEL))
            full.append(time.perf_counter() - started)
            ids, matrix = index.snapshot()
            same &= bool(
                np.array_equal(ids, reloaded.ids) and np.array_equal(matrix, reloaded.parts[0])
            )
        # the cost of a search over the base plus the added rows, against one matrix
        full_index = VectorIndex(MODEL)
        full_index.refresh(store)
        query = vectors(rng, 1)[0]
        top_parts, top_full = [], []
        for _ in range(50):
            started = time.perf_counter()
            index.top(store, query, 20, Filters(), None)
            top_parts.append(time.perf_counter() - started)
            started = time.perf_counter()
            full_index.top(store, query, 20, Filters(), None)
            top_full.append(time.perf_counter() - started)
        store.close()
    print(json.dumps({
        "benchmark": "vectors",
        "chunks": args.chunks,
        "dim": DIM,
        "first_load_ms": ms(first_load),
        "refresh_after_save_p50_ms": ms(statistics.median(incremental)),
        "refresh_after_save_p95_ms": ms(percentile(incremental, 0.95)),
        "full_reload_p50_ms": ms(statistics.median(full)),
        "full_reload_p95_ms": ms(percentile(full, 0.95)),
        "incremental_refreshes": index.change_loads,
        "full_refreshes": index.full_loads,
        "same_matrix_as_full_reload": same,
        "top20_after_saves_ms": ms(statistics.median(top_parts)),
        "top20_one_matrix_ms": ms(statistics.median(top_full)),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
