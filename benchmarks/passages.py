"""What a save's passage embedding costs the searches' query embeddings, in one process. One
JSON line.

    python benchmarks/passages.py [--rounds 4] [--seconds 5] [--clients 4]

``--clients`` threads embed queries never seen before (so every one goes to the model, through
the process's query batcher, as a server's searches do), each pausing 10 ms between queries.
Rounds alternate: ``quiet`` (queries only), ``saving`` (one more thread embeds a save's passage,
a short note, every 0.25 s, through the passage worker a server starts: a child process at the
lowest CPU priority) and ``inline`` (the same passages embedded on the saving thread, as without
a worker). It reports the queries' p50 and p95 of each kind of round (the median over the
rounds), each saving kind's p95 over the quiet rounds', and how long a passage took.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ms, percentile
from brainmap import ops, queryvectors
from brainmap.queryvectors import QueryEmbedder

WORDS = (
    "list files size disk usage compress folder delete branch find text restart service ports "
    "network container image volume log archivo carpeta disco cartella servizio 文件 目录"
).split()
NOTE = (
    "load note {tag}\n\nSaved while searching, number {n}: restart the cache service after "
    "rotating its certificate, then check the health endpoint."
)


def round_of(
    embedder: QueryEmbedder, clients: int, seconds: float, saving: bool
) -> tuple[list[float], list[float]]:
    """The latencies of the queries, and of the passages when ``saving``."""
    stop = time.monotonic() + seconds
    queries: list[float] = []
    passages: list[float] = []

    def client(k: int) -> None:
        pick = random.Random(time.time_ns() + k)
        while time.monotonic() < stop:
            text = " ".join(pick.sample(WORDS, 4)) + f" {pick.random():.6f}"  # never cached
            started = time.perf_counter()
            embedder.query(text)
            queries.append(time.perf_counter() - started)
            time.sleep(0.01)

    def saver() -> None:
        n = 0
        while time.monotonic() < stop:
            n += 1
            started = time.perf_counter()
            embedder.passage(NOTE.format(tag=time.time_ns(), n=n))
            passages.append(time.perf_counter() - started)
            time.sleep(max(0.0, 0.25 - (time.perf_counter() - started)))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    if saving:
        threads.append(threading.Thread(target=saver))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return queries, passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    kinds = ("quiet", "saving", "inline")
    with tempfile.TemporaryDirectory() as tmp:
        brain = ops.Brain(Path(tmp) / "home")
        embedder = QueryEmbedder(brain.cfg)
        embedder.query("warm the model up")
        queryvectors.start_passage_worker(brain.cfg)
        worker = queryvectors._passage_worker
        assert worker is not None
        p50: dict[str, list[float]] = {kind: [] for kind in kinds}
        p95: dict[str, list[float]] = {kind: [] for kind in kinds}
        passage_times: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(max(1, args.rounds)):
            for kind in kinds:
                queryvectors._passage_worker = worker if kind == "saving" else None
                queries, passages = round_of(embedder, args.clients, args.seconds, kind != "quiet")
                p50[kind].append(statistics.median(queries))
                p95[kind].append(percentile(queries, 0.95))
                passage_times[kind] += passages
        worker.close()
        brain.close()
    quiet_p95 = statistics.median(p95["quiet"])
    result: dict[str, object] = {"benchmark": "passages", "clients": args.clients}
    for kind in kinds:
        result[f"{kind}_p50_ms"] = ms(statistics.median(p50[kind]))
        result[f"{kind}_p95_ms"] = ms(statistics.median(p95[kind]))
        result[f"rounds_{kind}_p95_ms"] = [ms(v) for v in p95[kind]]
        if kind != "quiet":
            result[f"{kind}_over_quiet_p95"] = round(statistics.median(p95[kind]) / quiet_p95, 3)
            result[f"{kind}_passage_p50_ms"] = ms(statistics.median(passage_times[kind]))
            result[f"{kind}_passage_max_ms"] = ms(max(passage_times[kind]))
    result["worker_fallbacks"] = worker.fallbacks
    print(json.dumps(result))


if __name__ == "__main__":
    main()
