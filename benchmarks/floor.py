"""Calibrating the match level on real negatives: the queries of one corpus against the other.
Prints one JSON line.

    python benchmarks/floor.py [--queries 300]

One home holds the tldr sample (400 commands in en/es/it/zh, with vectors) and the LoCoMo dev
conversations. Positives: a tldr description against the sample (its page is the relevant
hit), a LoCoMo question against its conversation (a hit holding an evidence turn). Negatives:
each against the other corpus, a LoCoMo question against the other conversations (the same
kind of text, about other people: ``dialogue``), and strings of random letters against both. Every query's top
10 hybrid hits are taken once, without the floor, with their coverage and similarity; the
thresholds of ``[search]`` are then applied offline. Reported, for the configured thresholds
and for the grid's best: the false-strong rate (negatives with a strong hit), the strong rate
of positives' relevant hits, and how many positives the floor would empty (no hit above none).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import string
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, keep_cache, seed_cache, unpack
from brainmap import config, ops
from brainmap.search import LEVELS, NONE, STRONG, Hit, match_level
from locomo import TURN_ID, add_conversation, conversations
from tldr import make_sample, sample_queries


@dataclass
class Probe:
    kind: str  # tldr, locomo, nonsense
    positive: bool
    hits: list[tuple[float, float | None, bool]]  # coverage, similarity, relevant
    known: bool = True  # some word of the query is in the index


def probe(brain: ops.Brain, kind: str, positive: bool, query: str, libraries: list[str],
          relevant: Callable[[Hit], bool]) -> Probe:  # fmt: skip
    result = brain.searcher.search(query, libraries=libraries, limit=10, floor=False)
    hits = [(h.coverage, h.similarity, relevant(h)) for h in result.hits]
    return Probe(kind, positive, hits, brain.searcher.analyser.analyse(query).known)


def rates(probes: list[Probe], s: config.SearchSettings) -> dict[str, float]:
    def levels(p: Probe) -> list[str]:
        return [match_level(h[0], h[1], s) if p.known else NONE for h in p.hits]

    neg = [p for p in probes if not p.positive]
    pos = [p for p in probes if p.positive and any(h[2] for h in p.hits)]
    false_strong = sum(STRONG in levels(p) for p in neg) / len(neg)
    negatives_none = sum(set(levels(p)) <= {NONE} for p in neg) / len(neg)
    strong = sum(
        any(h[2] and level == STRONG for h, level in zip(p.hits, levels(p), strict=True))
        for p in pos
    ) / len(pos)
    emptied = sum(set(levels(p)) <= {NONE} for p in pos) / len(pos)
    by_kind = {
        kind: round(
            sum(STRONG in levels(p) for p in neg if p.kind == kind)
            / max(sum(p.kind == kind for p in neg), 1),
            4,
        )
        for kind in ("tldr", "locomo", "dialogue", "nonsense")
    }
    return {
        "false_strong": round(false_strong, 4),
        "false_strong_by_kind": by_kind,  # type: ignore[dict-item]
        "negatives_none": round(negatives_none, 4),
        "positives_strong": round(strong, 4),
        "positives_emptied": round(emptied, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--dump", type=Path, help="write every probe's hits here (JSON)")
    args = parser.parse_args()

    sample = make_sample(unpack("tldr-pages.tar.gz"), 400)
    home = Path(tempfile.mkdtemp(prefix="bm-floor-"))
    seed_cache(home)
    config.ensure_home(home)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="sample", path=str(sample)))
    questions: list[tuple[str, str, set[str]]] = []
    for name, conversation in conversations(DATA / "locomo" / "dev"):
        questions += [
            (name, q["question"], {e.strip() for e in q["evidence"]})
            for q in add_conversation(brain, home, name, conversation)
        ]
    ops.reindex(brain, ops.ReindexInput())
    keep_cache(home)
    dialogue_libraries = sorted({name for name, _, _ in questions})
    rng = random.Random(5)
    questions = rng.sample(questions, min(args.queries, len(questions)))
    tldr = sample_queries(sample, args.queries)

    probes: list[Probe] = []
    for _, query, page in tldr:
        probes.append(probe(brain, "tldr", True, query, ["sample"],
                            lambda h, page=page: Path(h.path).name == page))  # fmt: skip
        probes.append(probe(brain, "tldr", False, query, dialogue_libraries, lambda h: False))
    for name, query, evidence in questions:
        probes.append(probe(brain, "locomo", True, query, [name],
                            lambda h, ev=evidence: bool(set(TURN_ID.findall(h.text)) & ev)))  # fmt: skip
        probes.append(probe(brain, "locomo", False, query, ["sample"], lambda h: False))
        # the same kind of text about other people: a negative in the question's own domain
        others = [other for other in dialogue_libraries if other != name]
        probes.append(probe(brain, "dialogue", False, query, others, lambda h: False))
    for _ in range(100):
        words = [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
            for _ in range(rng.randint(1, 4))
        ]
        libraries = rng.choice([["sample"], dialogue_libraries])
        probes.append(probe(brain, "nonsense", False, " ".join(words), libraries, lambda h: False))
    brain.close()
    if args.dump:
        args.dump.write_text(json.dumps([p.__dict__ for p in probes]))

    configured = config.load(home).search
    result: dict[str, object] = {
        "benchmark": "floor",
        "positives": sum(p.positive for p in probes),
        "negatives": sum(not p.positive for p in probes),
        "levels": list(LEVELS),
        "configured": {
            "strong_coverage": configured.strong_coverage,
            "weak_coverage": configured.weak_coverage,
            "strong_similarity": configured.strong_similarity,
            "weak_similarity": configured.weak_similarity,
            **rates(probes, configured),
        },
    }
    # the grid, on one random half of the queries: the most positives strong with at most 5%
    # of negatives strong, then the fewest positives emptied with at least half the negatives
    # none; reported on the other half
    rng.shuffle(probes)
    probes, held_out = probes[: len(probes) // 2], probes[len(probes) // 2 :]
    best_strong = None
    for sc, ss in itertools.product([0.5, 0.6, 0.7, 0.8, 0.9, 1.01],
                                    [0.82, 0.84, 0.85, 0.86, 0.87, 0.88, 0.9, 1.01]):  # fmt: skip
        s = config.SearchSettings(strong_coverage=sc, strong_similarity=ss,
                                  weak_coverage=0.0, weak_similarity=-1)  # fmt: skip
        r = rates(probes, s)
        if r["false_strong"] <= 0.05 and (
            best_strong is None or r["positives_strong"] > best_strong[0]["positives_strong"]
        ):
            best_strong = (r, sc, ss)
    best_weak = None
    if best_strong is not None:
        _, sc, ss = best_strong
        for wc, ws in itertools.product([0.1, 0.2, 0.3, 0.4, 0.5],
                                        [0.76, 0.78, 0.8, 0.82, 0.84]):  # fmt: skip
            s = config.SearchSettings(strong_coverage=sc, strong_similarity=ss,
                                      weak_coverage=min(wc, sc), weak_similarity=min(ws, ss))  # fmt: skip
            r = rates(probes, s)
            if r["negatives_none"] >= 0.5 and (
                best_weak is None or r["positives_emptied"] < best_weak[0]["positives_emptied"]
            ):
                best_weak = (r, wc, ws)
    chosen = config.SearchSettings(
        strong_coverage=best_strong[1] if best_strong else 1.01,
        strong_similarity=best_strong[2] if best_strong else 1.01,
        weak_coverage=best_weak[1] if best_weak else 0.0,
        weak_similarity=best_weak[2] if best_weak else -1.0,
    )
    result["grid_best_held_out"] = rates(held_out, chosen)
    result["grid_best"] = {
        "strong_coverage": best_strong[1] if best_strong else None,
        "strong_similarity": best_strong[2] if best_strong else None,
        "weak_coverage": best_weak[1] if best_weak else None,
        "weak_similarity": best_weak[2] if best_weak else None,
        **(best_weak[0] if best_weak else best_strong[0] if best_strong else {}),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
