"""What a full garbage collection costs a server, before and after ``settle_heap`` (gc.freeze
of what start-up made). Prints one JSON line.

    python benchmarks/heap.py [--requests 60]

In one process, as ``brainmap serve`` has it: the whole HTTP app (REST, MCP, GUI) over a copy
of the example library, the model loaded, ``settle_heap``, then ``--requests`` searches and
saves through the app (FastAPI's test client, in process). A full collection holds the GIL
throughout: no request of the server runs meanwhile. It is timed (the median of five) on that
heap, then on the same heap unfrozen (every object walked, as without ``settle_heap``).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import example_brain, ms
from brainmap.longlived import settle_heap
from brainmap.server import create_app
from usage import QUERIES


def full_collection_seconds() -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        brain = example_brain(Path(tmp))
        app = create_app(brain)
        brain.searcher.embedder.load()  # as `brainmap serve` does, before it settles
        settle_heap()
        with TestClient(app, base_url="http://127.0.0.1") as client:

            def requests(n: int) -> None:
                for i in range(n):
                    if i % 10 == 9:
                        note = {"title": f"heap note {n} {i}", "body": "kept for the benchmark",
                                "force": True}  # fmt: skip
                        client.post("/save", json=note).raise_for_status()
                    else:
                        query = {"query": QUERIES[i % len(QUERIES)]}
                        client.get("/search", params=query).raise_for_status()

            requests(args.requests)
            settled = full_collection_seconds()
            frozen = gc.get_freeze_count()
            gc.unfreeze()  # the same heap, every object walked again: as before the freeze
            result = {
                "benchmark": "heap",
                "tracked_objects": len(gc.get_objects()),
                "frozen_objects": frozen,
                "full_collection_ms": ms(full_collection_seconds()),
                "settled_full_collection_ms": ms(settled),
            }
        brain.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
