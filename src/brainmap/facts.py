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
from dataclasses import dataclass, field, replace
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
    clean,
)
from brainmap.store import EdgeRecord, FactRow, NodeRecord, ObservationRecord, Store

CONFIRMED, PARTIAL, HYPOTHESIS, CONTRADICTED = "confirmed", "partial", "hypothesis", "contradicted"
AUTHORITY = {RUNTIME: 3, CONFIG: 2, NARRATIVE: 1}
# Predicates with one value per subject: two different values are a conflict.
SINGLE_VALUED = {IMAGE, CONTAINER_NAME, HOSTNAME, USER, PORT}
_PORT_PREDICATES = (PUBLISHES, LISTENS_ON)
# Claims with a part that names the service: another source naming the service makes them
# partial (the service, not the port); a volume or a variable is not such a claim.
_MULTI_PART = {PUBLISHES, "exposes", LISTENS_ON, IMAGE}

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
    """Who states an observation, for conflicts: a file, except that the compose files of one
    folder are one declaration (an override file adds to its base file, it does not
    contradict it)."""
    if obs.method == "compose":
        return f"compose:{obs.path.rpartition('/')[0]}"
    return f"{obs.method}:{obs.path}"


def split_service(key: str) -> tuple[str, str]:
    """``service:samples/app/web`` -> (``samples/app``, ``web``)."""
    project, _, service = key.removeprefix("service:").rpartition("/")
    return project, service


def _time(obs: ObservationRecord) -> str:
    return obs.observed_at or ""


def pair(observations: list[ObservationRecord]) -> tuple[list[NodeRecord], list[EdgeRecord]]:
    """The assertions (nodes and facts-root edges) that a library's observations support."""
    observations = _canonical_subjects(observations)
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
        elif CONFIG in kinds and len(kinds) >= 2:
            confidence = CONFIRMED
        elif len(kinds) >= 2:  # runtime and docs agree, and nothing declares it
            confidence, partial = PARTIAL, "undeclared"
        elif predicate in _MULTI_PART and subject_kinds[subject] - kinds:
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


def _canonical_subjects(observations: list[ObservationRecord]) -> list[ObservationRecord]:
    """Name each service as the config does. A terminal table or a runtime row without
    compose labels may name it by its ``container_name`` (``from_name``); docker names a
    project after its folder's last part, where the config uses the folder's path."""
    names: dict[tuple[str, str], str] = {}
    declared: dict[str, set[str]] = defaultdict(set)  # last path part -> config projects
    for obs in observations:
        if obs.kind != CONFIG or not obs.subject.startswith("service:"):
            continue
        project, _ = split_service(obs.subject)
        declared[project.rpartition("/")[2]].add(project)
        if obs.predicate == CONTAINER_NAME:
            names[(project, obs.object.removeprefix("container:"))] = obs.subject
    out = []
    for obs in observations:
        target = obs.subject
        if obs.kind != CONFIG and target.startswith("service:"):
            project, name = split_service(target)
            if project not in declared.get(project.rpartition("/")[2], ()):
                matches = declared.get(project, set())  # config projects with this last part
                if len(matches) == 1:
                    project = next(iter(matches))
                    target = f"service:{project}/{name}"
            if obs.props.get("from_name"):
                target = names.get((project, name), target)
        if target == obs.subject:
            out.append(obs)
            continue
        renamed = {**obs.props, "named": obs.subject}
        obj = obs.object
        if obs.predicate == PART_OF:  # the project it is part of is the config's too
            obj = "project:" + split_service(target)[0]
        out.append(replace(obs, subject=target, object=obj, props=renamed))
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
            project = obs.subject.removeprefix("project:")
            candidates = [c for c in candidates if split_service(c[0])[0] == project]
        if obs.method == "sockets":  # a UDP socket says nothing about a TCP port
            proto = str(obs.props.get("protocol", "tcp"))
            candidates = [c for c in candidates if c[3].rpartition("/")[2] in ("", proto)]
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
    declared: dict[str, list[Claim]] = defaultdict(list)  # project -> its declared mappings
    for claim, state in claims.items():
        subject, predicate, obj, detail = claim
        if predicate == PUBLISHES:
            slots[f"{subject} {predicate} container {detail}"].append(claim)
            if subject.startswith("service:"):
                project = split_service(subject)[0]
                proto = detail.rpartition("/")[2]
                ip = _host_ip(claim, state)
                slots[f"project:{project} host port {label(obj)}/{proto} on {ip}"].append(claim)
                if any(o.kind != NARRATIVE for o in state.support):
                    declared[project].append(claim)
        elif predicate in SINGLE_VALUED:
            slots[f"{subject} {predicate}"].append(claim)
    for slot, members in slots.items():
        if len(members) < 2:
            continue
        by_source: dict[str, set[Claim]] = defaultdict(set)
        disputed = False
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
            disputed = _dispute(state, slot, against) or disputed
        if disputed:  # every side shows in the audit
            for claim in members:
                claims[claim].slots.append(slot)
    for claim in sorted(unclaimed):
        project = claim[0].removeprefix("project:")
        slot = f"project:{project} published ports"
        against = [
            o for d in declared.get(project, []) for o in claims[d].support if o.kind != NARRATIVE
        ]
        if against:
            _dispute(claims[claim], slot, against)
            for other in [claim, *declared[project]]:  # the declared side beside the loser
                claims[other].slots.append(slot)


def _dispute(state: _State, slot: str, against: list[ObservationRecord]) -> bool:
    """Record sources against a claim and resolve; return whether there was a dispute."""
    if not against or not state.support:
        return False
    state.against += against
    rule, wins = _resolve(state.support, against)
    if rule is None:
        state.unresolved = True
    elif wins:
        state.won = state.won or rule
    else:
        state.lost = state.lost or rule
    return True


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
    unique = {(o.method, o.path, o.line, o.subject): o for o in observations}
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
    if state.slots:
        props["conflict"] = sorted(set(state.slots))
    if state.against:
        props["against"] = _cite(state.against)
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
        project, service = split_service(subject)
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
        project, service = split_service(key)
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
            clean(path),
            o.line,
            observed_at,
            source_rev,
            o.props,
        )
        for o in observations
    ]


def pair_library(store: Store, library_id: int) -> bool:
    """Re-pair a library when its observations changed since the last pairing; return
    whether it did."""
    digest = store.observation_digest(library_id)
    if store.pairing_digest(library_id) == digest:
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
    PART_OF: {"project", "part", "belong", "belongs"},
    CONTAINER_NAME: {"container"},
}
_RANK = {CONFIRMED: 0, PARTIAL: 1, HYPOTHESIS: 2, CONTRADICTED: 3}


def words(text: str) -> set[str]:
    """Content words, with a plural's ``s`` folded (backups = backup, ports = port)."""
    return {_singular(w) for w in _WORD.findall(text.casefold()) if w not in _STOP}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _on_topic(fact: FactRow, asks: set[str], asked: set[str]) -> bool:
    """Whether a fact is of the kind the question asks about: its predicate is one the
    question's words point at, or (for a predicate of one's own, from a frontmatter list)
    the question names the predicate or the kind of its object ("which host ...")."""
    if fact.predicate in asks:
        return True
    if fact.predicate in PREDICATE_WORDS:
        return False
    kind = fact.object.partition(":")[0]
    return bool(words(fact.predicate.replace("_", " ")) & asked) or _singular(kind) in asked


def answer(question: str, facts: list[FactRow], limit: int = 10) -> list[FactRow]:
    """The assertions that answer a question: those whose subject the question names most
    completely (and whose predicate it asks about, when it asks about one), confirmed first.

    Deterministic word matching over subjects, predicates and objects: the facts root is small
    and exact names matter more than meaning here.
    """
    asked = words(question)
    if not asked:
        return []
    asks_predicate = {p for p, ws in PREDICATE_WORDS.items() if {_singular(w) for w in ws} & asked}
    scored = []
    for fact in facts:
        if fact.subject.startswith("service:"):
            # "web of flask-redis": words the project's name uses up do not name a service
            # too, so flask-redis's redis service does not outrank its web service
            project, service = split_service(fact.subject)
            project_words, service_words = words(project.rpartition("/")[2]), words(service)
            rest = asked - project_words if project_words <= asked else asked
            matched = len(project_words & asked) + len(service_words & rest)
            size = len(project_words) + len(service_words)
        else:
            subject_words = words(label(fact.subject))
            matched, size = len(subject_words & asked), len(subject_words)
        object_hit = bool(words(label(fact.object)) & asked)
        if not matched and not object_hit:
            continue
        if asks_predicate and not _on_topic(fact, asks_predicate, asked):
            continue
        coverage = matched / size if size else 0.0
        scored.append(((matched + object_hit, coverage), fact))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    hits = [fact for score, fact in scored if score == best]
    hits.sort(key=lambda f: (_RANK.get(f.confidence, 9), f.library, f.subject, f.object))
    return hits[:limit]
