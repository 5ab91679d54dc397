"""The reasoner with a real local model (SmolLM2-135M-Instruct on llama.cpp, tests/model_server.py):
search --expand against plain hybrid, the calls a save makes, the daily budget under threads.
Prints one JSON line.

    python benchmarks/reasoner.py [--questions 30] [--tldr 50] [--budget 4000]

- LoCoMo dev: recall@5/@10 of the evidence turns, plain hybrid and --expand, on the first
  ``--questions`` questions (categories 1-4) of each conversation (the model takes about two
  seconds a call on two cores, so not all 383);
- tldr: hit@5 (a query made of one example's description finds that command's page, any
  language) on ``--tldr`` queries over the 400-command sample of benchmarks/tldr.py;
- the expansion call: p50/p95 latency, tokens per expanded query, repairs and skips;
- save with [reasoner] tags on: model calls per save (its Spent and the ledger's count);
- the daily budget: ``--budget`` tokens, calls from 3 threads until refused; the ledger's total
  and the sum of the server-reported tokens must both stay within it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import model_server
from _common import DATA, keep_cache, percentile, seed_cache, unpack
from brainmap import config, ops
from brainmap.ops.lookup import rewrite
from brainmap.reasoner import Reasoner, ReasonerUnavailable
from locomo import TURN_ID, add_conversation, conversations
from tldr import make_sample, sample_queries

HERE = Path(__file__).resolve().parent
LIMIT = 10
SAVES = [  # distinct notes: near-duplicates would be refused before any call
    ("Nightly backup fails when the disk is full", "pg_dump stops with ENOSPC; rotate old dumps."),
    ("Nginx returns 413 on large uploads", "Raise client_max_body_size in the server block."),
    (
        "Python wheels need a newer pip on Debian 11",
        "Upgrade pip before installing manylinux_2_28.",
    ),
    ("Redis evicts keys under maxmemory", "Set maxmemory-policy allkeys-lru for a cache."),
    ("Terraform state lock stays after a crash", "Run terraform force-unlock with the lock id."),
]


def _home(prefix: str, url: str, **reasoner: Any) -> tuple[Path, ops.Brain]:
    home = Path(tempfile.mkdtemp(prefix=prefix))
    seed_cache(home)
    config.ensure_home(home)
    model_server.reasoner_home(home, url, **reasoner)
    return home, ops.Brain(home)


class Expansions:
    """Every expanded query's call: latency, tokens, repairs, skips."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.tokens: list[int] = []
        self.rewrites: list[int] = []
        self.repairs = 0
        self.skipped = 0

    def search(self, brain: ops.Brain, query: str, library: str, limit: int) -> list[Any]:
        """The expanded search as the op runs it, the reasoner's call timed on its own."""
        started = time.perf_counter()
        rewrites, spent = rewrite(brain.cfg, query)
        self.latencies.append(time.perf_counter() - started)
        self.tokens.append(spent.tokens)
        self.rewrites.append(len(rewrites))
        self.repairs += spent.repairs
        self.skipped += bool(spent.skipped)
        result = brain.searcher.search_expanded(query, rewrites, libraries=[library], limit=limit)
        return result.hits

    def figures(self) -> dict[str, Any]:
        n = max(len(self.tokens), 1)
        return {
            "calls_p50_ms": round(percentile(self.latencies, 0.5) * 1000),
            "calls_p95_ms": round(percentile(self.latencies, 0.95) * 1000),
            "tokens_per_query": round(sum(self.tokens) / n, 1),
            "rewrites_per_query": round(sum(self.rewrites) / n, 2),
            "repairs": self.repairs,
            "skipped": self.skipped,
        }


def _plain(brain: ops.Brain, query: str, library: str, limit: int) -> list[Any]:
    return ops.search(
        brain, ops.SearchInput(query=query, library=[library], limit=limit, expand=False)
    ).hits


def locomo(url: str, per_conversation: int, calls: Expansions) -> dict[str, Any]:
    home, brain = _home("bm-reasoner-locomo-", url)
    questions: list[tuple[str, str, set[str]]] = []
    for name, conversation in conversations(DATA / "locomo" / "dev"):
        asked = add_conversation(brain, home, name, conversation)
        for q in asked[:per_conversation]:
            questions.append((name, q["question"], {e.strip() for e in q["evidence"] if e.strip()}))
    ops.reindex(brain, ops.ReindexInput())
    keep_cache(home)
    totals = {"plain": [0.0, 0.0], "expand": [0.0, 0.0]}
    for name, question, evidence in questions:
        for leg, hits in (
            ("plain", _plain(brain, question, name, LIMIT)),
            ("expand", calls.search(brain, question, name, LIMIT)),
        ):
            turns = [set(TURN_ID.findall(h.text)) for h in hits]
            totals[leg][0] += len(set().union(*turns[:5]) & evidence) / len(evidence)
            totals[leg][1] += len(set().union(*turns[:10]) & evidence) / len(evidence)
    brain.close()
    n = max(len(questions), 1)
    out: dict[str, Any] = {"questions": len(questions)}
    for leg, (r5, r10) in totals.items():
        out[leg] = {"recall@5": round(r5 / n, 4), "recall@10": round(r10 / n, 4)}
    return out


def tldr(url: str, count: int, calls: Expansions) -> dict[str, Any]:
    sample = make_sample(unpack("tldr-pages.tar.gz"), 400)
    home, brain = _home("bm-reasoner-tldr-", url)
    ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
    ops.reindex(brain, ops.ReindexInput())
    keep_cache(home)
    queries = sample_queries(sample, 300)
    queries = random.Random(5).sample(queries, min(count, len(queries)))
    found = {"plain": 0, "expand": 0}
    for _, query, page in queries:
        for leg, hits in (
            ("plain", _plain(brain, query, "sample", 5)),
            ("expand", calls.search(brain, query, "sample", 5)),
        ):
            found[leg] += any(Path(h.path).name == page for h in hits)
    brain.close()
    n = max(len(queries), 1)
    return {
        "queries": len(queries),
        **{f"{leg}_hit@5": round(v / n, 3) for leg, v in found.items()},
    }


def saves(url: str, count: int) -> dict[str, Any]:
    """Saves with the tags use on: calls per save, by its Spent and by the ledger."""
    home, brain = _home("bm-reasoner-save-", url)
    example = HERE.parent / "examples" / "library"
    import shutil

    shutil.copytree(example, home / "libraries" / "example")
    ops.library_add(
        brain, ops.LibraryAddInput(name="example", path=str(home / "libraries" / "example"))
    )
    ops.reindex(brain, ops.ReindexInput())
    ledger = Reasoner.of(brain.cfg).ledger
    per_save: list[int] = []
    ledger_calls: list[int] = []
    for title, body in SAVES[:count]:
        before = ledger.today()["calls"]
        result = ops.save(brain, ops.SaveInput(library="example", title=title, body=body))
        spent = getattr(result, "reasoner", None)
        per_save.append(spent.calls if spent is not None else 0)
        ledger_calls.append(ledger.today()["calls"] - before)
    brain.close()
    return {"saves": count, "max_calls_per_save": max(per_save), "max_ledger_calls_per_save":
            max(ledger_calls), "calls": sum(per_save)}  # fmt: skip


def budget(url: str, tokens: int, threads: int = 3, per_thread: int = 12) -> dict[str, Any]:
    """Calls from ``threads`` threads against a small daily budget, until it refuses them."""
    _, brain = _home("bm-reasoner-budget-", url, daily_token_budget=tokens, max_tokens=64)
    cfg = brain.cfg
    brain.close()
    reported: list[int] = []
    refused = [0]
    lock = threading.Lock()

    def work(t: int) -> None:
        for i in range(per_thread):
            with Reasoner.of(cfg) as reasoner:
                try:
                    reasoner.text("Answer in one sentence.", f"Name a use of thread {t}, call {i}.")
                except ReasonerUnavailable:
                    with lock:
                        refused[0] += 1
                    continue
                with lock:
                    reported.append(reasoner.spent.tokens)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    used = Reasoner.of(cfg).ledger.today()["tokens"]
    return {"budget": tokens, "threads": threads, "calls_made": len(reported),
            "calls_refused": refused[0], "ledger_tokens": used,
            "server_reported_tokens": sum(reported),
            "within_budget": used <= tokens and sum(reported) <= tokens}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--questions", type=int, default=30, help="LoCoMo questions per conversation"
    )
    parser.add_argument("--tldr", type=int, default=50, help="tldr queries")
    parser.add_argument("--saves", type=int, default=len(SAVES))
    parser.add_argument("--budget", type=int, default=1500, help="daily tokens for the budget test")
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp(prefix="bm-reasoner-llm-")) / "server.log"
    started = time.perf_counter()
    with model_server.start(log) as url:
        calls = Expansions()
        result: dict[str, Any] = {"benchmark": "reasoner", "model": "SmolLM2-135M-Instruct Q4_1"}
        result["locomo_dev"] = locomo(url, args.questions, calls)
        print(f"locomo: {result['locomo_dev']}", file=sys.stderr)
        result["tldr"] = tldr(url, args.tldr, calls)
        print(f"tldr: {result['tldr']}", file=sys.stderr)
        result["expansion"] = calls.figures()
        result["save"] = saves(url, args.saves)
        result["budget"] = budget(url, args.budget)
    result["seconds"] = round(time.perf_counter() - started)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
