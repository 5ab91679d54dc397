"""What usage telemetry costs a search: in-process ``ops.search`` latency with telemetry on
and off, interleaved in one warm process (each query is timed once in each arm, in
alternating order), on a copy of the example library. Prints one JSON line.

    python benchmarks/usage.py [--rounds 300]

With telemetry on, every search appends its hits to the in-process buffer and the
background thread writes usage.db about once a second while the searches run, as in a
server; the events written are counted at the end. Also timed: one flush of a search's
hits on an open connection (a one-shot CLI process pays it once, at its exit, plus about a
millisecond to open usage.db).

``--log-searches N`` then logs N searches of ten hits each (a 59-character query, entries of
a 5,000-entry library) into a fresh usage.db and reports its size per hit once vacuumed
(``log_bytes_per_hit``): what a server's log grows by.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import example_brain, ms, percentile
from brainmap import ops, usage
from brainmap.store import UsageEvent, UsageStore

QUERIES = [
    "database is locked", "undo the last commit", "compose ports", "retry 429 backoff",
    "cron timezone", "unicode normalization", "python virtualenv", "nginx reverse proxy",
    "redis cache", "backup postgres", "ssh keys", "sqlite single file",
    "why did the nightly job run late", "how do I free disk space", "port order in compose",
]  # fmt: skip


def log_size(searches: int, folder: Path) -> dict[str, float]:
    """usage.db's bytes per logged hit after ``searches`` searches of ten hits."""
    rng = random.Random(1)
    entries = [(f"{rng.getrandbits(64):016x}", f"pages/common/cmd{n}.md") for n in range(5000)]
    query = "list the files of a folder sorted by size in a long format"
    store = UsageStore(folder / "usage.db")
    started, t0 = time.perf_counter(), time.time()
    for first in range(0, searches, 200):  # a server's flush: a second of 200 searches
        store.add([
            UsageEvent(usage.stamp(t0 + s / 200), "hit", entry, "tldr", path, "http", query, rank)
            for s in range(first, min(first + 200, searches))
            for rank, (entry, path) in enumerate(rng.sample(entries, 10), 1)
        ])  # fmt: skip
    written_s = time.perf_counter() - started
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.conn.execute("VACUUM")
    store.close()
    hits = searches * 10
    return {
        "log_hits": hits,
        "log_bytes_per_hit": round((folder / "usage.db").stat().st_size / hits, 1),
        "log_write_us_per_hit": round(written_s / hits * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--log-searches", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        brain = example_brain(Path(tmp))
        inputs = [ops.SearchInput(query=q) for q in QUERIES]
        for inp in inputs:  # warm: the model, the vectors, the query cache, the thread
            ops.search(brain, inp)
        usage.flush()
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.rounds):
            inp = inputs[i % len(inputs)]
            for on in (True, False) if i % 2 else (False, True):
                brain.cfg.usage.enabled = on
                start = time.perf_counter()
                ops.search(brain, inp)
                times[on].append(time.perf_counter() - start)
        brain.cfg.usage.enabled = True
        usage.flush()
        time.sleep(usage.FLUSH_EVERY_S * 1.5)  # the background thread idle again
        hits = ops.search(brain, inputs[0]).hits
        start = time.perf_counter()
        usage.flush()
        flush_s = time.perf_counter() - start
        store = UsageStore(brain.cfg.usage_path)
        events = store.event_count()
        store.close()
        brain.close()
    out = {
        "benchmark": "usage",
        "library": "examples/library",
        "rounds": args.rounds,
        "on_p50_ms": ms(percentile(times[True], 0.5)),
        "on_p95_ms": ms(percentile(times[True], 0.95)),
        "off_p50_ms": ms(percentile(times[False], 0.5)),
        "off_p95_ms": ms(percentile(times[False], 0.95)),
        "p50_delta_ms": ms(percentile(times[True], 0.5) - percentile(times[False], 0.5)),
        "events_recorded": events,
        "flush_one_search_ms": ms(flush_s),
        "hits_per_search": len(hits),
    }
    if args.log_searches:
        with tempfile.TemporaryDirectory() as tmp:
            out |= log_size(args.log_searches, Path(tmp))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
