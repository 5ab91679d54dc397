"""What a save costs the next search of another connection, in one process. One JSON line.

    python benchmarks/after_save.py [--home DIR] [--saves 40]

On the serve benchmark's home (tldr as text, the sample with vectors; ``--home`` reuses one),
a reader brain searches the benchmark's queries until warm, then, ``--saves`` times: one search
with nothing changed (``quiet``), a save of a new note by a second brain (as the server's
writer process does), the first search after it (``first_after_save``: its connection sees the
change, SQLite drops its page cache, the index's figures and the vector matrix catch up), one
more (``second``), and the first after a one-row commit that changes nothing a search reads
(``first_after_commit``: the dropped page cache alone). Medians in ms. A server pays the difference once per connection that
searches, for every save.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import apsw

from _common import unpack
from brainmap import ops
from serve import build_home
from tldr import sample_queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, help="build the home here once and reuse it")
    parser.add_argument("--saves", type=int, default=40)
    parser.add_argument("--sample", type=int, default=400)
    args = parser.parse_args()
    home = build_home(args.sample, args.home)
    queries = [q for _, q, _ in sample_queries(unpack("tldr-pages.tar.gz"), 60, seed=5)]
    reader, writer = ops.Brain(home), ops.Brain(home)

    def search(query: str) -> float:
        started = time.perf_counter()
        ops.search(reader, ops.SearchInput(query=query))
        return (time.perf_counter() - started) * 1000

    for query in queries * 2:  # warm: model, vectors, the index's figures, query vectors
        search(query)
    commit = apsw.Connection(str(home / "brain.db"))
    commit.execute("PRAGMA busy_timeout=10000")
    quiet, first, second, after_commit = [], [], [], []
    for n in range(args.saves):
        quiet.append(search(queries[n % len(queries)]))
        body = f"Saved by the after-save benchmark, number {n}: restart the cache service."
        ops.save(writer, ops.SaveInput(title=f"after-save {time.time_ns()}", body=body,
                                       force=True))  # fmt: skip
        first.append(search(queries[(n + 7) % len(queries)]))
        second.append(search(queries[(n + 13) % len(queries)]))
        # a one-row commit that changes nothing a search reads: what SQLite's dropped page
        # cache costs alone
        commit.execute("BEGIN IMMEDIATE")
        commit.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('bench_commit', ?)", (n,))
        commit.execute("COMMIT")
        after_commit.append(search(queries[(n + 7) % len(queries)]))
    commit.close()
    reader.close()
    writer.close()
    print(json.dumps({
        "benchmark": "after_save",
        "saves": args.saves,
        "quiet_ms": round(statistics.median(quiet), 2),
        "first_after_save_ms": round(statistics.median(first), 2),
        "second_ms": round(statistics.median(second), 2),
        "first_after_commit_ms": round(statistics.median(after_commit), 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
