"""LoCoMo (long conversations, questions with evidence turns): agent-memory retrieval, with the
fusion tuned by leave-one-conversation-out. Prints one JSON line.

    python benchmarks/locomo.py [--data DIR] [--turn-tokens 120] [--cv]

Each session becomes a dated diary entry, one line per turn starting with its turn id
(``[D3:1] Caroline: ...``); each conversation is a library. A question's recall@k is the share
of its evidence turns found in the top-k hits (categories 1-4). Also reported: characters per
hit (mean and max).

The bm25 and vector lists of every question are taken once (100 deep) and fused offline, as
``fusion.fuse`` does, for every setting of the grid. With ``--cv`` each conversation is held out
in turn: the setting that scores best on the others is scored on it, and the figure reported is
the mean over held-out conversations, weighted by their questions. Several ``--turn-tokens``
values (comma-separated) build one index each and join the grid. ``hybrid`` is the search as
configured (the defaults unless told), run end to end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, keep_cache, seed_cache
from brainmap import config, ops
from brainmap.fusion import fuse

TURN_ID = re.compile(r"\[(D\d+:\d+)\]")
DEPTH = 100
GRID = {
    "rrf_k": [1, 2, 5, 10, 20, 60],
    "vector_weight": [0.5, 0.75, 1.0, 1.5, 2.0],
    "candidates": [10, 20, 30, 50, 100],
    "forms_weight": [0.5, 1.0],
}


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


def conversations(folder: Path) -> list[tuple[str, dict]]:
    """The conversations of a LoCoMo split, named ``conv<file stem>``."""
    return [
        (f"conv{path.stem}", json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(folder.glob("*.json"))
    ]


def add_conversation(brain: ops.Brain, home: Path, name: str, conversation: dict) -> list[dict]:
    """Write ``conversation`` as library ``name`` under ``home/libraries`` and add it; return
    its questions that can be scored (categories 1-4, with evidence)."""
    write_library(conversation, home / "libraries" / name)
    ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(home / "libraries" / name)))
    return [
        q for q in conversation["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")
    ]


@dataclass
class Question:
    library: str
    text: str
    evidence: set[str]
    bm25: list[int]
    vector: list[int]
    bm25_by_forms: dict[float, list[int]]  # the bm25 list at each weight of the stems column


@dataclass
class Run:
    """One index (one unit size): every question's two lists and every chunk's turns."""

    turn_tokens: int
    questions: list[Question]
    turns_of: dict[int, set[str]]
    chars_of: dict[int, int]
    chunks: int
    index_s: float
    home: Path


def recall(ranked: list[int], q: Question, run: Run, k: int) -> float:
    found = set().union(*(run.turns_of.get(c, set()) for c in ranked[:k])) & q.evidence
    return len(found) / len(q.evidence)


def fused(q: Question, setting: dict[str, float]) -> list[int]:
    depth = int(setting["candidates"])
    vector = [(cid, 0.0) for cid in q.vector[:depth]]
    bm25 = q.bm25_by_forms[setting["forms_weight"]][:depth]
    scores = fuse(bm25, vector, setting["rrf_k"], 1.0, setting["vector_weight"])
    return [cid for cid, _ in scores]


def score(run: Run, questions: list[Question], setting: dict[str, float] | None) -> dict:
    r5 = r10 = 0.0
    for q in questions:
        ranked = fused(q, setting) if setting else q.bm25
        r5 += recall(ranked, q, run, 5)
        r10 += recall(ranked, q, run, 10)
    n = max(len(questions), 1)
    return {"recall@5": round(r5 / n, 4), "recall@10": round(r10 / n, 4)}


def leg(run: Run, questions: list[Question], name: str) -> dict:
    r5 = r10 = 0.0
    for q in questions:
        ranked = getattr(q, name)
        r5 += recall(ranked, q, run, 5)
        r10 += recall(ranked, q, run, 10)
    n = max(len(questions), 1)
    return {"recall@5": round(r5 / n, 4), "recall@10": round(r10 / n, 4)}


def objective(figures: dict) -> float:
    return float(figures["recall@5"] + figures["recall@10"])


def build(
    dialogues: list[tuple[str, dict]], turn_tokens: int | None, args: argparse.Namespace
) -> Run:
    home = Path(tempfile.mkdtemp(prefix="bm-locomo-"))
    seed_cache(home)
    cfg, _ = config.ensure_home(home)
    if turn_tokens is not None:
        cfg.index.turn_tokens = turn_tokens
    for name in ("rrf_k", "candidates", "vector_weight", "forms_weight"):
        if getattr(args, name) is not None:
            setattr(cfg.search, name, getattr(args, name))
    config.save(cfg)
    brain = ops.Brain(home)
    raw: list[tuple[str, dict]] = []
    for name, conversation in dialogues:
        raw += [(name, q) for q in add_conversation(brain, home, name, conversation)]
    started = time.perf_counter()
    ops.reindex(brain, ops.ReindexInput())
    index_s = time.perf_counter() - started
    keep_cache(home)
    turns_of: dict[int, set[str]] = {}
    chars_of: dict[int, int] = {}
    questions = []
    for name, q in raw:
        lists = {}
        for mode in ("bm25", "vector"):
            hits = brain.searcher.search(
                q["question"], libraries=[name], limit=DEPTH, mode=mode, floor=False
            ).hits
            for h in hits:
                turns_of[h.chunk_id] = set(TURN_ID.findall(h.text))
                chars_of[h.chunk_id] = len(h.text)
            lists[mode] = [h.chunk_id for h in hits]
        by_forms = {}
        configured = brain.cfg.search.forms_weight
        for weight in GRID["forms_weight"]:
            brain.cfg.search.forms_weight = weight
            by_forms[weight] = [
                h.chunk_id
                for h in brain.searcher.search(
                    q["question"], libraries=[name], limit=DEPTH, mode="bm25", floor=False
                ).hits
            ]
        brain.cfg.search.forms_weight = configured
        evidence = {e.strip() for e in q["evidence"] if e.strip()}
        questions.append(
            Question(name, q["question"], evidence, lists["bm25"], lists["vector"], by_forms)
        )
    chunks = brain.store.counts()["chunks"]
    brain.close()
    return Run(turn_tokens or cfg.index.turn_tokens, questions, turns_of, chars_of, chunks,
               index_s, home)  # fmt: skip


def end_to_end(run: Run, questions: list[Question]) -> dict:
    """The hybrid search as configured, through the op, with its characters per hit."""
    brain = ops.Brain(run.home)
    r5 = r10 = 0.0
    chars: list[int] = []
    started = time.perf_counter()
    for q in questions:
        hits = ops.search(brain, ops.SearchInput(query=q.text, library=[q.library], limit=10)).hits
        turns = [set(TURN_ID.findall(h.text)) for h in hits]
        r5 += len(set().union(*turns[:5]) & q.evidence) / len(q.evidence)
        r10 += len(set().union(*turns[:10]) & q.evidence) / len(q.evidence)
        chars += [len(h.text) for h in hits]
    seconds = time.perf_counter() - started
    brain.close()
    n = max(len(questions), 1)
    return {
        "recall@5": round(r5 / n, 4),
        "recall@10": round(r10 / n, 4),
        "chars_per_hit": round(sum(chars) / max(len(chars), 1)),
        "max_chars_per_hit": max(chars, default=0),
        "ms_per_query": round(seconds / n * 1000, 1),
    }


def cross_validate(runs: list[Run]) -> dict:
    """Leave one conversation out over the grid (unit size x rrf_k x weight x depth)."""
    settings = [
        dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())
    ]
    libraries = sorted({q.library for q in runs[0].questions})
    folds = []
    totals = {"hybrid": [0.0, 0.0], "bm25": [0.0, 0.0], "vector": [0.0, 0.0]}
    n_all = 0
    for held in libraries:
        best: tuple[float, Run, dict[str, float]] | None = None
        for run in runs:
            train = [q for q in run.questions if q.library != held]
            for setting in settings:
                value = objective(score(run, train, setting))
                if best is None or value > best[0]:
                    best = (value, run, setting)
        assert best is not None
        _, run, setting = best
        test = [q for q in run.questions if q.library == held]
        figures = {"hybrid": score(run, test, setting)}
        # the legs at the unit size the fold chose, so that hybrid is compared like for like
        figures["bm25"] = leg(run, test, "bm25")
        figures["vector"] = leg(run, test, "vector")
        for mode, f in figures.items():
            totals[mode][0] += f["recall@5"] * len(test)
            totals[mode][1] += f["recall@10"] * len(test)
        n_all += len(test)
        folds.append({"held_out": held, "questions": len(test), "turn_tokens": run.turn_tokens,
                      **setting, **dict(figures.items())})  # fmt: skip
    cv = {
        mode: {"recall@5": round(t[0] / n_all, 4), "recall@10": round(t[1] / n_all, 4)}
        for mode, t in totals.items()
    }
    in_sample = max(
        ((objective(score(run, run.questions, s)), run.turn_tokens, s) for run in runs
         for s in settings),
        key=lambda item: item[0],
    )  # fmt: skip
    return {"cv": cv, "folds": folds,
            "in_sample_best": {"objective": round(in_sample[0], 4), "turn_tokens": in_sample[1],
                               **in_sample[2]}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA / "locomo" / "dev")
    parser.add_argument("--turn-tokens", default=None, help="comma-separated unit sizes")
    parser.add_argument("--rrf-k", dest="rrf_k", type=int, default=None)
    parser.add_argument("--candidates", type=int, default=None)
    parser.add_argument("--vector-weight", dest="vector_weight", type=float, default=None)
    parser.add_argument("--forms-weight", dest="forms_weight", type=float, default=None)
    parser.add_argument("--cv", action="store_true", help="leave-one-conversation-out tuning")
    args = parser.parse_args()

    dialogues = conversations(args.data)
    if not dialogues:
        parser.error(f"no LoCoMo conversations (*.json) in {args.data}: pass --data DIR")
    sizes = [int(v) for v in args.turn_tokens.split(",")] if args.turn_tokens else [None]
    runs = [build(dialogues, size, args) for size in sizes]
    first = runs[0]
    result: dict[str, object] = {
        "benchmark": f"locomo-{args.data.name}",
        "conversations": len(dialogues),
        "questions": len(first.questions),
        "turn_tokens": first.turn_tokens,
        "chunks": first.chunks,
        "index_s": round(first.index_s, 1),
        "bm25": leg(first, first.questions, "bm25"),
        "vector": leg(first, first.questions, "vector"),
        "hybrid": end_to_end(first, first.questions),
    }
    if args.cv:
        result["cross_validated"] = cross_validate(runs)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
