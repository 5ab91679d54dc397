"""The read models of the facts root: an assertion with its confidence and evidence, the
conflicts between sources, and the confidence levels and source authority they speak in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from brainmap.collectors import CONFIG, NARRATIVE, RUNTIME
from brainmap.facts.text import views
from brainmap.store import FactRow

CONFIRMED, PARTIAL, HYPOTHESIS, CONTRADICTED = "confirmed", "partial", "hypothesis", "contradicted"
AUTHORITY = {RUNTIME: 3, CONFIG: 2, NARRATIVE: 1}


@dataclass
class Evidence:
    """One source of an assertion: where (library, path, line), how (kind, method), when."""

    library: str
    path: str
    line: int | None
    kind: str
    method: str
    observed_at: str | None
    source_rev: str | None
    host: str | None = None
    url: str | None = None
    container: str | None = None
    process: str | None = None
    named: str | None = None  # the name the source used, when it named a container


@dataclass
class Fact:
    """An assertion of the facts root with its confidence and evidence."""

    subject: str
    predicate: str
    object: str
    confidence: str  # confirmed | partial | hypothesis | contradicted
    library: str
    what: str
    evidence: list[Evidence]
    against: list[Evidence] = field(default_factory=list)
    resolved_by: str | None = None  # authority | freshness, when a conflict was resolved
    partial: str | None = None  # what another source agreed on: subject | port
    container: str | None = None
    protocol: str | None = None
    observed_at: str | None = None
    published: str | None = None  # "random": on a host port docker picks at start
    # holds only in these views of its compose files: "override" (docker compose up: the base
    # and override files), a variant's name (prod: the base file and compose.prod.yaml)
    layers: list[str] = field(default_factory=list)
    # started only with one of these compose profiles (docker compose up starts it not)
    profiles: list[str] = field(default_factory=list)
    views: str | None = None  # the same in words (None: wherever docker compose up runs)


def _evidence(items: list[dict[str, Any]]) -> list[Evidence]:
    names = {f.name for f in Evidence.__dataclass_fields__.values()}
    return [Evidence(**{k: v for k, v in e.items() if k in names}) for e in items]


def fact_of(row: FactRow) -> Fact:
    p = row.props
    return Fact(
        row.subject, row.predicate, row.object, row.confidence, row.library,
        str(p.get("what", "")), _evidence(p.get("evidence", [])), _evidence(p.get("against", [])),
        p.get("resolved_by"), p.get("partial"), p.get("container"), p.get("protocol"),
        row.observed_at, p.get("published"), list(p.get("layers", [])),
        list(p.get("profiles", [])), views(list(p.get("layers", [])), list(p.get("profiles", []))),
    )  # fmt: skip


@dataclass
class ConflictSide:
    subject: str
    object: str
    what: str
    confidence: str
    evidence: list[Evidence]
    against: list[Evidence]  # the sources that state otherwise


@dataclass
class Conflict:
    """Sources that disagree on one slot, and how (or whether) it was resolved."""

    library: str
    slot: str
    subject: str
    predicate: str
    resolved_by: str | None  # authority | freshness; None: unresolved, both sides hypothesis
    winner: str | None
    sides: list[ConflictSide]


def contradictions(facts: list[FactRow]) -> list[Conflict]:
    """Each conflict slot with its sides: the value each side states, its confidence, its
    evidence, and the rule that resolved it (None while unresolved)."""
    slots: dict[tuple[str, str], list[FactRow]] = defaultdict(list)
    for row in facts:
        for slot in row.props.get("conflict", []):
            slots[(row.library, slot)].append(row)
    out = []
    for (library, slot), rows in sorted(slots.items()):
        disputed = [r for r in rows if r.props.get("against")]
        rules = {r.props.get("resolved_by") for r in disputed}
        rule = None if None in rules or not rules else min(str(r) for r in rules)
        winners = [r for r in rows if r.confidence != CONTRADICTED] if rule else []
        sides = [
            ConflictSide(
                r.subject,
                r.object,
                str(r.props.get("what", "")),
                r.confidence,
                _evidence(r.props.get("evidence", [])),
                _evidence(r.props.get("against", [])),
            )
            for r in rows
        ]
        out.append(
            Conflict(
                library,
                slot,
                rows[0].subject,
                rows[0].predicate,
                rule,
                "; ".join(str(r.props.get("what")) for r in winners) or None,
                sides,
            )
        )
    return out
