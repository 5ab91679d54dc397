"""What usage telemetry costs a search: in-process ``ops.search`` latency with telemetry on
and off, interleaved in one warm process (each query is timed once in each arm, in
alternating order), on a copy of the example library. Prints one JSON line.

    python benchmarks/usage.py [--rounds 300]

With telemetry on, every search appends its hits to the in-process buffer and the
background thread writes usage.db about once a second while the searches run, as in a
server; the events written are counted at the end. Also timed: one flush of a search's
hits on an open connection (a one-shot CLI process pays it once, at its exit, plus about a
millisecond to open usage.db).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import example_brain, ms, percentile
from brainmap import ops, usage
from brainmap.store import UsageStore

QUERIES = [
    "database is locked", "undo the last commit", "compose ports", "retry 429 backoff",
    "cron timezone", "unicode normalization", "python virtualenv", "nginx reverse proxy",
    "redis cache", "backup postgres", "ssh keys", "sqlite single file",
    "why did the nightly job run late", "how do I free disk space", "port order in compose",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
