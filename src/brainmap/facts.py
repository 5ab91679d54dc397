"""Assertions from observations: pairing, confidence, conflicts (DESIGN.md, Facts).

A *claim* is one (subject, predicate, object) as some source states it. Its confidence:

- **confirmed**: sources of two different kinds (runtime, config, narrative) state it;
- **partial**: one kind states it, and another kind agrees on part of it: it names the same
  subject (the service, not the port), or the same port without saying which service;
- **hypothesis**: one kind states it, nothing else touches it, or a conflict about it is
  unresolved;
- **contradicted**: it lost a conflict.

A *conflict* is a slot (a service's mapping for one container port or one host port; a host's
single-valued setting) where one source states a value that another source contradicts by
stating a different one. It is resolved by **authority** (runtime over config over narrative)
when the two sides' best sources differ in kind, else by **freshness** (the newer observation);
the resolution names the rule. Sides of equal kind and age stay unresolved: both hypothesis.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from brainmap.collectors import (
    CONFIG,
    CONTAINER_NAME,
    HOSTNAME,
    IDENTITY_FILE,
    IMAGE,
    LISTENS_ON,
    NARRATIVE,
    PART_OF,
    PORT,
    PUBLISHES,
    RUNTIME,
    SERVES,
    USER,
    Observation,
)
from brainmap.store import EdgeRecord, FactRow, NodeRecord, ObservationRecord, Store

CONFIRMED, PARTIAL, HYPOTHESIS, CONTRADICTED = "confirmed", "partial", "hypothesis", "contradicted"
CONFIDENCES = (CONFIRMED, PARTIAL, HYPOTHESIS, CONTRADICTED)
AUTHORITY = {RUNTIME: 3, CONFIG: 2, NARRATIVE: 1}
# Predicates with one value per subject: two different values are a conflict.
SINGLE_VALUED = {IMAGE, CONTAINER_NAME, HOSTNAME, USER, PORT}
_PORT_PREDICATES = (PUBLISHES, LISTENS_ON)

Claim = tuple[str, str, str, str]  # subject, predicate, object, detail (container/protocol)


@dataclass
class _State:
    support: list[ObservationRecord] = field(default_factory=list)
    against: list[ObservationRecord] = field(default_factory=list)
    port_only: list[ObservationRecord] = field(default_factory=list)  # the port, not the service
    lost: str | None = None  # the rule that overruled it
    won: str | None = None
    unresolved: bool = False
    slots: list[str] = field(default_factory=list)


def _detail(obs: ObservationRecord) -> str:
    if obs.predicate == PUBLISHES:
        return f"{obs.props.get('container', '')}/{obs.props.get('protocol', 'tcp')}"
    return ""


def _source(obs: ObservationRecord) -> str:
    return f"{obs.method}:{obs.path}"


def _time(obs: ObservationRecord) -> str:
    return obs.observed_at or ""


def pair(observations: list[ObservationRecord]) -> tuple[list[NodeRecord], list[EdgeRecord]]:
    """The assertions (nodes and facts-root edges) that a library's observations support."""
    observations = _resolve_container_names(observations)
    claims: dict[Claim, _State] = defaultdict(_State)
    endpoints: list[ObservationRecord] = []  # "open localhost:8000" and listening sockets
    for obs in observations:
        if (obs.predicate == SERVES and obs.subject.startswith("project:")) or (
            obs.method == "sockets"
        ):
            endpoints.append(obs)
        if obs.predicate != SERVES or not obs.subject.startswith("project:"):
            claims[(obs.subject, obs.predicate, obs.object, _detail(obs))].support.append(obs)
    unclaimed = _attribute(endpoints, claims)
    subject_kinds: dict[str, set[str]] = defaultdict(set)  # who mentions each subject at all
    for (subject, *_), state in claims.items():
        subject_kinds[subject].update(o.kind for o in state.support)
    _conflicts(claims, unclaimed)
    nodes: dict[str, NodeRecord] = {}
    edges = []
    for (subject, predicate, obj, detail), state in sorted(claims.items()):
        if not state.support:
            continue
        kinds = {o.kind for o in state.support}
        partial = None
        if state.lost:
            confidence = CONTRADICTED
        elif state.unresolved:
            confidence = HYPOTHESIS
        elif len(kinds) >= 2:
            confidence = CONFIRMED
        elif subject_kinds[subject] - kinds and not subject.startswith("project:"):
            confidence, partial = PARTIAL, "subject"
        elif {o.kind for o in state.port_only} - kinds:
            confidence, partial = PARTIAL, "port"
        else:
            confidence = HYPOTHESIS
        edges.append(_edge(subject, predicate, obj, detail, state, confidence, partial))
        for key in (subject, obj):
            kind, _, label = key.partition(":")
            nodes.setdefault(key, NodeRecord(key, kind, label))
    return list(nodes.values()), edges


def _resolve_container_names(observations: list[ObservationRecord]) -> list[ObservationRecord]:
    """A table or a runtime row may name a service by its ``container_name``: use the service
    the config declares under that name."""
    names: dict[tuple[str, str], str] = {}
    for obs in observations:
        if obs.predicate == CONTAINER_NAME and obs.kind == CONFIG:
            project = obs.subject.removeprefix("service:").partition("/")[0]
            names[(project, obs.object.removeprefix("container:"))] = obs.subject
    if not names:
        return observations
    out = []
    for obs in observations:
        project, _, name = obs.subject.removeprefix("service:").partition("/")
        target = names.get((project, name)) if obs.subject.startswith("service:") else None
        if target and target != obs.subject and obs.kind != CONFIG:
            out.append(ObservationRecord(
                target, obs.predicate, obs.object, obs.kind, obs.method, obs.path, obs.line,
                obs.observed_at, obs.source_rev, {**obs.props, "named": name}, obs.library,
            ))  # fmt: skip
        else:
            out.append(obs)
    return out


def _attribute(endpoints: list[ObservationRecord], claims: dict[Claim, _State]) -> set[Claim]:
    """Give "open localhost:8000" (in a project's docs) and a socket listening on 8000 (on
    this machine) to the one service that publishes host port 8000; when several could own
    it, they support only the port (partial). Return the project ports no service claims."""
    unclaimed: set[Claim] = set()
    by_port: dict[str, list[Claim]] = defaultdict(list)
    for claim in claims:
        if claim[1] in _PORT_PREDICATES and claim[0].startswith("service:"):
            by_port[claim[2]].append(claim)
    for obs in endpoints:
        candidates = by_port.get(obs.object, [])
        if obs.subject.startswith("project:"):
            prefix = "service:" + obs.subject.removeprefix("project:") + "/"
            candidates = [c for c in candidates if c[0].startswith(prefix)]
        services = {c[0] for c in candidates}
        if not services and obs.subject.startswith("project:"):
            claims[(obs.subject, obs.predicate, obs.object, "")].support.append(obs)
            unclaimed.add((obs.subject, obs.predicate, obs.object, ""))
        for claim in candidates:
            if len(services) == 1:
                claims[claim].support.append(obs)
            else:
                claims[claim].port_only.append(obs)
    return unclaimed


def _host_ip(claim: Claim, state: _State) -> str:
    ips = {str(o.props.get("host_ip", "")) for o in state.support}
    specific = sorted(ip for ip in ips if ip not in ("", "0.0.0.0", "::"))
    return specific[0] if specific else "*"


def _conflicts(claims: dict[Claim, _State], unclaimed: set[Claim]) -> None:
    """Find the slots where sources disagree and resolve each side by authority or freshness.

    Slots: a service's mapping of one container port; one host port of a project (two
    services cannot both publish it); a single-valued setting (image, ssh HostName, ...).
    A source is *against* a claim when it states another value for the slot and not this one.
    A port the docs of a project tell you to open, which no declared service publishes, is
    against the declared ports of that project.
    """
    slots: dict[str, list[Claim]] = defaultdict(list)
    declared: dict[str, list[ObservationRecord]] = defaultdict(list)
    for claim, state in claims.items():
        subject, predicate, obj, detail = claim
        if predicate == PUBLISHES:
            slots[f"{subject} {predicate} container {detail}"].append(claim)
            if subject.startswith("service:"):
                project = subject.removeprefix("service:").partition("/")[0]
                proto = detail.rpartition("/")[2]
                ip = _host_ip(claim, state)
                slots[f"project:{project} host port {label(obj)}/{proto} on {ip}"].append(claim)
                declared[project] += [o for o in state.support if o.kind != NARRATIVE]
        elif predicate in SINGLE_VALUED:
            slots[f"{subject} {predicate}"].append(claim)
    for slot, members in slots.items():
        if len(members) < 2:
            continue
        by_source: dict[str, set[Claim]] = defaultdict(set)
        for claim in members:
            for obs in claims[claim].support:
                by_source[_source(obs)].add(claim)
        for claim in members:
            state = claims[claim]
            mine = {_source(o) for o in state.support}
            against = [
                obs
                for other in members
                if other != claim
                for obs in claims[other].support
                if claim not in by_source[_source(obs)] and _source(obs) not in mine
            ]
            _dispute(state, slot, against)
    for claim in sorted(unclaimed):
        project = claim[0].removeprefix("project:")
        _dispute(claims[claim], f"project:{project} published ports", declared.get(project, []))


def _dispute(state: _State, slot: str, against: list[ObservationRecord]) -> None:
    if not against or not state.support:
        return
    state.against += against
    state.slots.append(slot)
    rule, wins = _resolve(state.support, against)
    if rule is None:
        state.unresolved = True
    elif wins:
        state.won = state.won or rule
    else:
        state.lost = state.lost or rule


def _resolve(
    support: list[ObservationRecord], against: list[ObservationRecord]
) -> tuple[str | None, bool]:
    """(rule that fired, whether the supported side wins); (None, False) when unresolved."""
    mine = max(AUTHORITY[o.kind] for o in support)
    theirs = max(AUTHORITY[o.kind] for o in against)
    if mine != theirs:
        return "authority", mine > theirs
    newest_mine = max(_time(o) for o in support)
    newest_theirs = max(_time(o) for o in against)
    if newest_mine != newest_theirs:
        return "freshness", newest_mine > newest_theirs
    return None, False


def evidence(obs: ObservationRecord) -> dict[str, Any]:
    """How one observation is cited: where (path and line), how, when."""
    out: dict[str, Any] = {
        "library": obs.library,
        "path": obs.props.get("file") or obs.path,
        "line": obs.line,
        "kind": obs.kind,
        "method": obs.method,
        "observed_at": obs.observed_at,
        "source_rev": obs.source_rev,
    }
    for key in ("host", "url", "container", "process", "named"):
        if key in obs.props and obs.method in ("sockets", "docker-ps", "url", "compose-ps"):
            out[key] = obs.props[key]
    return out


def _cite(observations: Iterable[ObservationRecord]) -> list[dict[str, Any]]:
    unique = {(_source(o), o.line, o.subject): o for o in observations}
    ordered = sorted(
        unique.values(),
        key=lambda o: (-AUTHORITY[o.kind], o.path, o.line if o.line is not None else -1),
    )
    return [evidence(o) for o in ordered]


def _edge(
    subject: str,
    predicate: str,
    obj: str,
    detail: str,
    state: _State,
    confidence: str,
    partial: str | None,
) -> EdgeRecord:
    support = state.support
    newest = max(support, key=_time)
    cited = _cite(support)
    props: dict[str, Any] = {
        "who": sorted({_observer(o) for o in support}),
        "what": describe(subject, predicate, obj, detail),
        "how": sorted({o.method for o in support}),
        "where": {
            "library": newest.library,
            "paths": sorted({str(e["path"]) for e in cited}),
            "hosts": sorted({str(o.props["host"]) for o in support if o.method == "sockets"}),
        },
        "when": {"observed_at": newest.observed_at, "source_rev": newest.source_rev},
        "evidence": cited,
        "kinds": sorted({o.kind for o in support}, key=lambda k: -AUTHORITY[k]),
    }
    if detail:
        container, _, protocol = detail.partition("/")
        props["container"], props["protocol"] = container, protocol
    if partial:
        props["partial"] = partial
        if partial == "port":
            props["port_only"] = _cite(state.port_only)
    if state.against:
        props["against"] = _cite(state.against)
        props["conflict"] = sorted(set(state.slots))
        props["resolved_by"] = state.lost or state.won  # None: unresolved
    first = cited[0]
    return EdgeRecord(
        subject, predicate, obj, source_uri=str(first["path"]), line=first["line"],
        observed_at=newest.observed_at, source_rev=newest.source_rev, props=props,
        confidence=confidence,
    )  # fmt: skip


def _observer(obs: ObservationRecord) -> str:
    if obs.kind == RUNTIME:
        return f"{obs.method} on {obs.props.get('host') or obs.path}"
    return f"{obs.method} collector"


def label(key: str) -> str:
    return key.partition(":")[2] or key


_PHRASES = {
    PUBLISHES: "publishes port", LISTENS_ON: "listens on port", SERVES: "serves port",
    "exposes": "exposes port", IMAGE: "runs image", "depends_on": "depends on",
    PART_OF: "is part of", "volume": "mounts", "env_var": "reads environment variable",
    HOSTNAME: "has hostname", USER: "logs in as", PORT: "takes ssh on port",
    IDENTITY_FILE: "uses identity file", "network": "joins network",
    CONTAINER_NAME: "runs as container", "connects_to": "connects to port",
    "proxy_jump": "is reached through",
}  # fmt: skip


def describe(subject: str, predicate: str, obj: str, detail: str = "") -> str:
    """A sentence for one assertion: ``service web of flask-redis publishes port 8000``."""
    kind, _, name = subject.partition(":")
    if kind == "service" and "/" in name:
        project, _, service = name.partition("/")
        who = f"service {service} of {project}"
    else:
        who = f"{kind} {name}"
    phrase = _PHRASES.get(predicate, predicate.replace("_", " "))
    obj_kind, _, obj_name = obj.partition(":")
    what = obj_name if obj_kind in ("port", "image", "env", "volume", "container", "keyfile",
                                    "user") else describe_key(obj)  # fmt: skip
    text = f"{who} {phrase} {what}"
    if predicate == PUBLISHES and detail:
        text += f" (container {detail})"
    return text


def describe_key(key: str) -> str:
    kind, sep, name = key.partition(":")
    if kind == "service" and "/" in name:
        project, _, service = name.partition("/")
        return f"service {service} of {project}"
    return f"{kind} {name}" if sep else key


def records(
    observations: Iterable[Observation], path: str, observed_at: str, source_rev: str | None
) -> list[ObservationRecord]:
    """Observations of one source as the store keeps them."""
    return [
        ObservationRecord(
            o.subject,
            o.predicate,
            o.object,
            o.kind,
            o.method,
            path,
            o.line,
            observed_at,
            source_rev,
            o.props,
        )
        for o in observations
    ]


def pair_library(store: Store, library_id: int, *, force: bool = False) -> bool:
    """Re-pair a library when its observations changed since the last pairing (or ``force``);
    return whether it did."""
    digest = store.observation_digest(library_id)
    if not force and store.pairing_digest(library_id) == digest:
        return False
    nodes, edges = pair(store.observations(library_id))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.put_assertions(library_id, digest, nodes, edges, now)
    return True


# --- reading -------------------------------------------------------------------------------


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


def _evidence(items: list[dict[str, Any]]) -> list[Evidence]:
    names = {f.name for f in Evidence.__dataclass_fields__.values()}
    return [Evidence(**{k: v for k, v in e.items() if k in names}) for e in items]


def fact_of(row: FactRow) -> Fact:
    p = row.props
    return Fact(
        row.subject, row.predicate, row.object, row.confidence, row.library,
        str(p.get("what", "")), _evidence(p.get("evidence", [])), _evidence(p.get("against", [])),
        p.get("resolved_by"), p.get("partial"), p.get("container"), p.get("protocol"),
        row.observed_at,
    )  # fmt: skip


@dataclass
class ConflictSide:
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
        rules = {r.props.get("resolved_by") for r in rows}
        winner = next((r for r in rows if r.confidence != CONTRADICTED and
                       r.props.get("resolved_by")), None)  # fmt: skip
        sides = [
            ConflictSide(
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
                None if None in rules else min(r for r in rules if r),
                str(winner.props.get("what")) if winner else None,
                sides,
            )
        )
    return out


_WORD = re.compile(r"[0-9a-z]+")
_STOP = frozenset(
    "a an the of on in at to for from by with which what who whom whose where when how does do "
    "did is are was were be it its this that these those there and or i we you my our your "
    "run runs".split()
)  # fmt: skip
# Question words that point at predicates.
PREDICATE_WORDS: dict[str, set[str]] = {
    PUBLISHES: {
        "port",
        "ports",
        "publish",
        "publishes",
        "published",
        "expose",
        "exposed",
        "listen",
        "listens",
        "open",
        "reach",
        "url",
        "address",
        "bind",
        "bound",
    },
    LISTENS_ON: {"port", "ports", "listen", "listens", "listening", "bind", "bound", "open"},
    SERVES: {"port", "ports", "url", "open", "serve", "serves", "address"},
    "exposes": {"port", "ports", "expose", "exposes", "exposed"},
    IMAGE: {"image", "images", "docker"},
    "depends_on": {"depend", "depends", "dependency", "dependencies", "needs", "requires"},
    HOSTNAME: {"hostname", "host", "address", "ip", "server", "name"},
    USER: {"user", "login", "username", "account"},
    PORT: {"port", "ssh"},
    IDENTITY_FILE: {"key", "identity", "identityfile"},
    "network": {"network", "networks"},
    "volume": {"volume", "volumes", "mount", "mounts", "data", "stored", "storage"},
    "env_var": {"env", "environment", "variable", "variables", "setting", "settings"},
    PART_OF: {"services", "containers", "project", "part"},
    CONTAINER_NAME: {"container"},
}
_RANK = {CONFIRMED: 0, PARTIAL: 1, HYPOTHESIS: 2, CONTRADICTED: 3}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP}


def answer(question: str, facts: list[FactRow], limit: int = 10) -> list[FactRow]:
    """The assertions that answer a question: those whose subject the question names most
    completely (and whose predicate it asks about, when it asks about one), confirmed first.

    Deterministic word matching over subjects, predicates and objects: the facts root is small
    and exact names matter more than meaning here.
    """
    asked = words(question)
    if not asked:
        return []
    asks_predicate = {p for p, ws in PREDICATE_WORDS.items() if ws & asked}
    scored = []
    for fact in facts:
        subject_words = words(label(fact.subject))
        matched = subject_words & asked
        object_hit = bool(words(label(fact.object)) & asked)
        if not matched and not object_hit:
            continue
        on_topic = not asks_predicate or fact.predicate in asks_predicate
        if not on_topic:
            continue
        coverage = len(matched) / len(subject_words) if subject_words else 0.0
        scored.append(((len(matched) + object_hit, coverage), fact))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    hits = [fact for score, fact in scored if score == best]
    hits.sort(key=lambda f: (_RANK.get(f.confidence, 9), f.library, f.subject, f.object))
    return hits[:limit]
