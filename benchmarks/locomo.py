"""LoCoMo dev (3 long conversations, 592 questions): agent-memory retrieval. Prints one JSON line.

    python benchmarks/locomo.py [--chunk-tokens 300] [--rrf-k 60] [--candidates 50] ...

Each session becomes a dated diary entry, one line per turn starting with its turn id
(``[D3:1] Caroline: ...``); each conversation is a library. Questions of categories 1-4 go
through ``brainmap search --batch`` (one process per mode), and a question's recall@k is the
share of its evidence turns found in the top-k chunks. Also reported: mean characters per hit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, keep_cache, seed_cache
from brainmap import config, ops


def session_date(raw: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' -> datetime."""
    return dt.datetime.strptime(raw.replace(" on ", " "), "%I:%M %p %d %B, %Y")


def write_library(conversation: dict, folder: Path) -> int:
    """Write one diary entry per session; return the number of turns."""
    folder.mkdir(parents=True, exist_ok=True)
    a, b = conversation["speaker_a"], conversation["speaker_b"]
    turns = 0
    n = 1
    while f"session_{n}" in conversation:
        when = session_date(conversation[f"session_{n}_date_time"])
        lines = []
        for turn in conversation[f"session_{n}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            lines.append(f"[{turn['dia_id']}] {turn['speaker']}: {text}")
            turns += 1
        title = f"{a} and {b}, session {n}, {when:%d %B %Y}"
        body = "\n".join(lines)
        frontmatter = (
            f"---\ntitle: {json.dumps(title)}\ntype: diary\ncreated: {when:%Y-%m-%dT%H:%M}\n---\n"
        )
        (folder / f"session-{n:02d}.md").write_text(
            f"{frontmatter}# {title}\n\n{body}\n", encoding="utf-8"
        )
        n += 1
    return turns


def evaluate(home: Path, questions: list[dict], mode: str, limit: int) -> dict[str, float]:
    batch = home / f"questions-{mode}.jsonl"
    batch.write_text(
        "".join(
            json.dumps(
                {"query": q["question"], "library": q["library"], "limit": limit, "mode": mode}
            )
            + "\n"
            for q in questions
        )
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "brainmap", "--home", str(home), "search", "--batch", str(batch)],
        check=True, capture_output=True, text=True,
    ).stdout.strip().split("\n")  # fmt: skip
    seconds = time.perf_counter() - started
    recall = {5: 0.0, 10: 0.0}
    chars, hits_seen = 0, 0
    for q, line in zip(questions, out, strict=True):
        hits = json.loads(line)["hits"]
        for k in recall:
            found = {e for e in q["evidence"] for h in hits[:k] if f"[{e}]" in h["text"]}
            recall[k] += len(found) / len(q["evidence"])
        chars += sum(len(h["text"]) for h in hits[:10])
        hits_seen += len(hits[:10])
    n = len(questions)
    return {
        "recall@5": round(recall[5] / n, 4),
        "recall@10": round(recall[10] / n, 4),
        "chars_per_hit": round(chars / max(hits_seen, 1)),
        "ms_per_query": round(seconds / n * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunk-tokens", type=int, default=None)
    parser.add_argument("--rrf-k", type=int, default=None)
    parser.add_argument("--candidates", type=int, default=None)
    parser.add_argument("--bm25-weight", type=float, default=None)
    parser.add_argument("--vector-weight", type=float, default=None)
    parser.add_argument("--modes", default="bm25,vector,hybrid")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="bm-locomo-"))
    seed_cache(home)
    cfg, _ = config.ensure_home(home)
    for name, value in (("chunk_tokens", args.chunk_tokens),):
        if value is not None:
            setattr(cfg.index, name, value)
    for name, value in (
        ("rrf_k", args.rrf_k),
        ("candidates", args.candidates),
        ("bm25_weight", args.bm25_weight),
        ("vector_weight", args.vector_weight),
    ):
        if value is not None:
            setattr(cfg.search, name, value)
    config.save(cfg)

    questions: list[dict] = []
    turns = 0
    brain = ops.Brain(home)
    for path in sorted((DATA / "locomo" / "dev").glob("*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        name = f"conv{path.stem}"
        turns += write_library(conversation, home / "libraries" / name)
        ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(home / "libraries" / name)))
        for q in conversation["qa"]:
            if q.get("category") in (1, 2, 3, 4) and q.get("evidence"):
                questions.append({**q, "library": name})
    started = time.perf_counter()
    report = ops.reindex(brain, ops.ReindexInput())
    index_s = time.perf_counter() - started
    chunks = brain.store.counts()["chunks"]
    brain.close()
    keep_cache(home)

    result: dict[str, object] = {
        "benchmark": "locomo-dev",
        "conversations": 3,
        "turns": turns,
        "questions": len(questions),
        "chunks": chunks,
        "chunk_tokens": cfg.index.chunk_tokens,
        "rrf_k": cfg.search.rrf_k,
        "candidates": cfg.search.candidates,
        "weights": [cfg.search.bm25_weight, cfg.search.vector_weight],
        "index_s": round(index_s, 1),
        "embedded": report.embedding.embedded if report.embedding else 0,
    }
    for mode in args.modes.split(","):
        result[mode] = evaluate(home, questions, mode, limit=10)
        print(mode, result[mode], file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
