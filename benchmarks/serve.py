"""HTTP and MCP latency on the tldr index, and requests/s with 8 concurrent clients. One JSON line.

    python benchmarks/serve.py [--queries 200] [--seconds 15]

The home is the one benchmarks/tldr.py builds (38k pages as text, the 400-command sample with
vectors from the persistent cache). `brainmap serve` and `brainmap mcp` run as real processes;
queries are tldr example descriptions in en/es/it/zh, hybrid mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ms, percentile, seed_cache, unpack
from brainmap import ops
from tldr import make_sample, sample_queries


def build_home(sample_commands: int) -> Path:
    data = unpack("tldr-pages.tar.gz")
    sample = make_sample(data, sample_commands)
    home = Path(tempfile.mkdtemp(prefix="bm-serve-"))
    seed_cache(home)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="tldr", path=str(data)))
    ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
    ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False))
    ops.reindex(brain, ops.ReindexInput(libraries=["sample"]))
    brain.close()
    return home


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "BRAINMAP_HOME": str(home)}


def http_latency(url: str, queries: list[str]) -> list[float]:
    times = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for q in queries[:10]:
            client.get("/search", params={"query": q})
        for q in queries:
            started = time.perf_counter()
            response = client.get("/search", params={"query": q, "limit": 10})
            times.append(time.perf_counter() - started)
            response.raise_for_status()
    return times


def mcp_latency(home: Path, queries: list[str]) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    times: list[float] = []

    async def run() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "brainmap", "mcp"], env=_env(home)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for q in queries[:10]:
                await session.call_tool("search", {"query": q})
            for q in queries:
                started = time.perf_counter()
                result = await session.call_tool("search", {"query": q, "limit": 10})
                times.append(time.perf_counter() - started)
                assert not result.is_error

    anyio.run(run)
    return times


def throughput(
    url: str, queries: list[str], clients: int, seconds: float
) -> tuple[float, list[float]]:
    done: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            i = n
            while time.monotonic() < stop:
                started = time.perf_counter()
                http.get("/search", params={"query": queries[i % len(queries)]}).raise_for_status()
                with lock:
                    done.append(time.perf_counter() - started)
                i += clients

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(done) / (time.monotonic() - started), done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--sample", type=int, default=400)
    args = parser.parse_args()

    home = build_home(args.sample)
    queries = [q for _, q, _ in sample_queries(unpack("tldr-pages.tar.gz"), args.queries, seed=5)]
    port = 8700 + os.getpid() % 200
    server = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "serve", "--port", str(port)],
        env=_env(home), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        http = http_latency(url, queries)
        rps, loaded = throughput(url, queries, clients=8, seconds=args.seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    mcp = mcp_latency(home, queries)
    print(
        json.dumps(
            {
                "benchmark": "serve",
                "index": "tldr 38,405 pages (BM25) + 827-chunk sample with vectors",
                "queries": len(queries),
                "http_search_p50_ms": ms(percentile(http, 0.5)),
                "http_search_p95_ms": ms(percentile(http, 0.95)),
                "mcp_stdio_search_p50_ms": ms(percentile(mcp, 0.5)),
                "mcp_stdio_search_p95_ms": ms(percentile(mcp, 0.95)),
                "clients": 8,
                "requests_per_s": round(rps, 1),
                "loaded_p50_ms": ms(statistics.median(loaded)),
                "loaded_p95_ms": ms(percentile(loaded, 0.95)),
            }
        )
    )


if __name__ == "__main__":
    main()
