"""Retrieval evaluation: recall@5, recall@10, MRR and nDCG@10 per search mode, from a golden file.

Golden file (YAML)::

    library: example          # optional: search only these libraries (string or list)
    queries:
      - query: how do I undo the last commit
        expect: [git/undo.md]   # relevant entries: 'path' or 'library:path'
      - query: ...
        expect: [...]
        library: other        # optional per-query filter

Metrics are computed on the entries of the top 10 chunks (the first chunk of an entry counts,
later ones are ignored), i.e. on what ``brainmap search`` shows by default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainmap.errors import UserError
from brainmap.search import MODES, Hit, Mode, Searcher

METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10")
DEPTH = 10


@dataclass
class GoldenQuery:
    query: str
    expect: list[str]
    libraries: list[str] | None = None


@dataclass
class QueryResult:
    query: str
    mode: str
    found: list[str]
    first_relevant_rank: int | None
    metrics: dict[str, float]


@dataclass
class EvalReport:
    golden: str
    queries: int
    modes: dict[str, dict[str, float]]
    per_query: list[QueryResult] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(f"expected a string or a list of strings, got {value!r}")


def load_golden(path: Path) -> list[GoldenQuery]:
    """Read and validate a golden file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        raise UserError(f"{path}: expected a mapping with a 'queries' list")
    default_libs = _as_list(data.get("library"))
    out = []
    for i, item in enumerate(data["queries"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            raise UserError(f"{path}: query #{i} needs a 'query' string")
        expect = _as_list(item.get("expect"))
        if not expect:
            raise UserError(f"{path}: query #{i} needs an 'expect' list of paths")
        libs = _as_list(item.get("library")) or default_libs
        out.append(GoldenQuery(item["query"], expect, libs))
    if not out:
        raise UserError(f"{path}: no queries")
    return out


def _entries(hits: list[Hit]) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    ranked = []
    for hit in hits:
        key = (hit.library, hit.path)
        if key not in seen:
            seen.add(key)
            ranked.append(key)
    return ranked


def _relevant(entry: tuple[str, str], expect: list[str]) -> str | None:
    library, path = entry
    for e in expect:
        if e in (path, f"{library}:{path}"):
            return e
    return None


def score(ranked: list[tuple[str, str]], expect: list[str]) -> tuple[dict[str, float], int | None]:
    """Metrics of one ranked entry list against its relevant set."""
    matched = [_relevant(entry, expect) for entry in ranked[:DEPTH]]
    wanted = len(set(expect))
    first = next((i for i, m in enumerate(matched, 1) if m), None)

    def recall(k: int) -> float:
        return len({m for m in matched[:k] if m}) / wanted

    seen: set[str] = set()
    dcg = 0.0
    for i, m in enumerate(matched, 1):
        if m and m not in seen:
            seen.add(m)
            dcg += 1 / math.log2(i + 1)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(wanted, DEPTH) + 1))
    metrics = {
        "recall@5": recall(5),
        "recall@10": recall(10),
        "mrr": 1 / first if first else 0.0,
        "ndcg@10": dcg / ideal if ideal else 0.0,
    }
    return metrics, first


def run(searcher: Searcher, golden: Path, modes: list[Mode] | None = None) -> EvalReport:
    """Run every golden query in every mode and average the metrics."""
    queries = load_golden(golden)
    modes = modes or list(MODES)
    report = EvalReport(str(golden), len(queries), {})
    for mode in modes:
        sums = dict.fromkeys(METRICS, 0.0)
        for q in queries:
            # the top 10 chunks, as `brainmap search` shows them (several chunks of one entry
            # count once, so fewer than 10 entries may come back)
            hits = searcher.search(q.query, libraries=q.libraries, limit=DEPTH, mode=mode).hits
            ranked = _entries(hits)
            metrics, first = score(ranked, q.expect)
            for k, v in metrics.items():
                sums[k] += v
            found = [f"{lib}:{path}" for lib, path in ranked[:DEPTH]]
            report.per_query.append(QueryResult(q.query, mode, found, first, metrics))
        report.modes[mode] = {k: round(v / len(queries), 4) for k, v in sums.items()}
    return report


def read_report(path: Path) -> dict[str, dict[str, float]]:
    """The metrics per mode of an earlier ``--json`` report (read before a run, not after)."""
    hint = "give a file written by `brainmap eval GOLDEN --json`"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UserError(f"no such file: {path}", hint=hint) from exc
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UserError(f"cannot read {path}: {reason}", hint=hint) from exc
    try:
        modes: dict[str, dict[str, float]] = json.loads(text)["modes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path} is not a report written by `brainmap eval --json`") from exc
    return modes


def compare(new: EvalReport, old_modes: dict[str, dict[str, float]], tolerance: float) -> list[str]:
    """Metrics that fell by more than ``tolerance`` since an earlier report's ``old_modes``."""
    drops = []
    for mode, metrics in new.modes.items():
        for name, value in metrics.items():
            before = old_modes.get(mode, {}).get(name)
            if isinstance(before, int | float) and value < before - tolerance:
                drops.append(f"{mode} {name}: {before:.4f} -> {value:.4f}")
    return drops
