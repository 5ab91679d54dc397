"""Fusing ranked lists and weighing staleness: pure functions of their inputs and settings."""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brainmap.config import SearchSettings


def fuse(
    bm25_ids: list[int],
    vector_hits: list[tuple[int, float]],
    rrf_k: float,
    bm25_weight: float,
    vector_weight: float,
) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion of the two ranked lists: ``(chunk id, score)``, best
    first (ties by chunk id, so that the order is stable)."""
    vector_ids = [cid for cid, _ in vector_hits]
    return rrf([bm25_ids, vector_ids], [bm25_weight, vector_weight], rrf_k)


def rrf(lists: list[list[int]], weights: list[float], k: float) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion of ranked lists of ids: each id scores the sum of
    ``weight / (k + rank)`` over the lists holding it; ``(id, score)``, best first (ties by
    id, so that the order is stable)."""
    scores: dict[int, float] = {}
    for ids, weight in zip(lists, weights, strict=True):
        for rank, cid in enumerate(ids, 1):
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def decay(last_verified: str | None, mtime_ns: int, now: dt.datetime, s: SearchSettings) -> float:
    """Staleness weight in [decay_floor, 1]: halves every half-life since last verified (since
    the file last changed when it never was)."""
    if s.half_life_days <= 0:
        return 1.0
    if last_verified:
        try:
            seen = dt.datetime.fromisoformat(last_verified)
        except ValueError:
            return 1.0
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=dt.UTC)
    else:
        seen = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC)
    age_days = max((now - seen).total_seconds() / 86400, 0.0)
    weight = math.pow(0.5, age_days / s.half_life_days)
    return s.decay_floor + (1.0 - s.decay_floor) * weight
