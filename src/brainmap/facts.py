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
import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from brainmap.analysis import fold, is_stopword, split_tokens
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
    _undeclared(claims)
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


def _undeclared(claims: dict[Claim, _State]) -> None:
    """A compose file lists every port a service publishes, so a source stating one it does
    not list (a README's old ``docker compose ps`` row) states otherwise: it is against the
    list, or against the service's declaration when it lists none. A running container wins
    such a dispute (runtime over config); a doc loses it."""
    declared: dict[str, list[ObservationRecord]] = defaultdict(list)  # service -> its list
    for (subject, predicate, _, _), state in claims.items():
        if predicate in (PUBLISHES, PART_OF):
            declared[subject] += [o for o in state.support if o.method == "compose"]
    for claim, state in claims.items():
        subject, predicate, _, _ = claim
        if predicate != PUBLISHES or state.against or any(o.kind == CONFIG for o in state.support):
            continue  # declared, or already disputed on its container or host port
        listed = [o for o in declared.get(subject, []) if o.predicate == PUBLISHES]
        against = listed or declared.get(subject, [])
        slot = f"{subject} published ports"
        if _dispute(state, slot, against):
            for other in [claim, *{(o.subject, o.predicate, o.object, _detail(o)) for o in listed}]:
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


# --- asking --------------------------------------------------------------------------------

# Function words no shipped stopword list holds: the verb of "which host runs the backups"
# names a predicate, not a thing; Italian's "which".
_QUESTION_WORDS = frozenset("run runs quale quali".split())
# Question words that point at predicates, folded (lower case, no accents) as questions are:
# English, then Spanish, Italian and Chinese (two-character words: the analyzer cuts Chinese
# text into bigrams).
PREDICATE_WORDS: dict[str, set[str]] = {
    PUBLISHES: {
        "port", "publish", "publishes", "published", "expose", "exposed", "listen", "open",
        "reach", "url", "address", "bind", "bound",
        "puerto", "publica", "publicar", "publicado", "expone", "exponer", "escucha",
        "direccion",
        "porta", "porte", "pubblica", "pubblicare", "pubblicato", "espone", "esporre",
        "ascolta", "indirizzo",
        "端口", "发布", "暴露", "监听", "地址",
    },
    LISTENS_ON: {
        "port", "listen", "listening", "bind", "bound", "open",
        "puerto", "escucha", "porta", "porte", "ascolta", "端口", "监听",
    },
    SERVES: {
        "port", "url", "open", "serve", "address",
        "puerto", "direccion", "porta", "porte", "indirizzo", "端口", "地址",
    },
    "exposes": {
        "port", "expose", "exposes", "exposed",
        "puerto", "expone", "porta", "porte", "espone", "端口", "暴露",
    },
    IMAGE: {"image", "docker", "imagen", "immagine", "镜像"},
    "depends_on": {
        "depend", "dependency", "dependencies", "need", "require",
        "depende", "dependencia", "dipende", "dipendenza", "依赖",
    },
    HOSTNAME: {"hostname", "host", "address", "ip", "server", "name", "servidor", "主机"},
    USER: {"user", "login", "username", "account", "usuario", "utente", "用户"},
    PORT: {"port", "ssh", "puerto", "porta", "端口"},
    IDENTITY_FILE: {"key", "identity", "identityfile", "clave", "chiave", "密钥"},
    "network": {"network", "rete", "网络"},
    "volume": {
        "volume", "mount", "data", "stored", "storage", "volumen", "存储",
    },
    "env_var": {
        "env", "environment", "variable", "setting",
        "entorno", "variabile", "ambiente", "环境", "变量",
    },
    PART_OF: {"project", "part", "belong", "proyecto", "progetto", "项目"},
    CONTAINER_NAME: {"container", "contenedor", "contenitore", "容器"},
}  # fmt: skip
_RANK = {CONFIRMED: 0, PARTIAL: 1, HYPOTHESIS: 2, CONTRADICTED: 3}

Name = tuple[str, ...]  # a name as the tokens a question spells it with


def _folded(text: str) -> list[str]:
    """The analyzer's tokens (any script; Chinese as bigrams), folded as the index folds."""
    return [fold(token) for token in split_tokens(text)]


def _function_word(token: str) -> bool:
    return is_stopword(token) or token in _QUESTION_WORDS


def words(text: str) -> set[str]:
    """Content words, with a plural's ``s`` folded (backups = backup, ports = port)."""
    return {_singular(t) for t in _folded(text) if not _function_word(t)}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _name(text: str) -> Name:
    return tuple(_singular(t) for t in _folded(text))


@functools.lru_cache(maxsize=8192)  # asked once per fact and question: names repeat
def _names(key: str) -> tuple[tuple[Name, ...], Name]:
    """The names a subject goes by, and the folders above them. A service: its project (the
    folder's last part) and its own name; a project: the folder's last part; anything else:
    its label."""
    kind, _, rest = key.partition(":")
    if kind == "service" and "/" in rest:
        project, service = split_service(key)
        above, _, folder = project.rpartition("/")
        return (_name(folder), _name(service)), _name(above)
    if kind == "project":
        above, _, folder = rest.rpartition("/")
        return (_name(folder),), _name(above)
    return (_name(label(key)),), ()


@dataclass
class _Question:
    tokens: list[str]
    spans: dict[Name, list[int]]  # the names it spells out, each where it starts
    free: set[str]  # content words outside those names

    def covered(self, names: tuple[Name, ...]) -> set[int]:
        """The question's tokens that spell the names: each name takes its own occurrence
        while there is one, so "minecraft service of minecraft" names a project and its
        service, and "minecraft" alone still names both."""
        used: dict[Name, int] = defaultdict(int)
        out: set[int] = set()
        for name in names:
            starts = self.spans.get(name)
            if not starts:
                continue
            start = starts[min(used[name], len(starts) - 1)]
            used[name] += 1
            out.update(range(start, start + len(name)))
        return out


def _read(question: str, names: set[Name]) -> _Question:
    """Find the names a question spells out, longest first, each token in one name only:
    "flask-redis" uses up both of its words, so a question about flask-redis does not also
    name its redis service; "the redis service of flask-redis" does."""
    raw = _folded(question)
    tokens = [_singular(t) for t in raw]
    content = [not _function_word(t) for t in raw]
    longest = max(map(len, names), default=0)
    found: list[tuple[int, int, Name]] = []
    for i in range(len(tokens)):
        for j in range(i + 1, min(len(tokens), i + longest) + 1):
            name = tuple(tokens[i:j])
            if name in names and any(content[i:j]):  # a function word names nothing
                found.append((-len(name), i, name))
    taken: set[int] = set()
    spans: dict[Name, list[int]] = defaultdict(list)
    for neg_len, start, name in sorted(found):
        where = range(start, start - neg_len)
        if taken.isdisjoint(where):
            taken.update(where)
            spans[name].append(start)
    free = {t for i, t in enumerate(tokens) if content[i] and i not in taken}
    return _Question(tokens, dict(spans), free)


def _asks(free: set[str]) -> dict[str, int]:
    """The predicates the question's words point at, each with how many words point at it:
    "port" points at four, "port ... publish" most at publishes."""
    out = {}
    for predicate, ws in PREDICATE_WORDS.items():
        hit = len({_singular(w) for w in ws} & free)
        if hit:
            out[predicate] = hit
    return out


def _strength(fact: FactRow, asks: dict[str, int], free: set[str]) -> int | None:
    """How strongly the question asks about a fact's predicate; None when off topic. A
    predicate of one's own (from a frontmatter list) is on topic when the question names it
    or the kind of its object ("which host ...")."""
    if not asks:
        return 0
    if fact.predicate in asks:
        return asks[fact.predicate]
    if fact.predicate in PREDICATE_WORDS:
        return None
    kind = fact.object.partition(":")[0]
    return len((words(fact.predicate.replace("_", " ")) | {_singular(kind)}) & free) or None


@dataclass
class Reply:
    """What the facts root says to a question."""

    facts: list[FactRow]  # the answering assertions, best first, then sides they conflict with
    lead: list[FactRow]  # what the answer states: the asked subjects' values, none contradicted
    against: list[FactRow]  # contradicted assertions about the same slots: the disagreement
    silent: list[str]  # asked services their compose file declares without a port


def _slots(fact: FactRow) -> set[str]:
    return set(fact.props.get("conflict", []))


def reply(question: str, facts: list[FactRow]) -> Reply:
    """The assertions that answer a question: those about the subjects the question names
    most completely (and of the predicates it asks about, when it asks about some),
    confirmed first, with the assertions they conflict with.

    Deterministic name matching over subjects, predicates and objects: the facts root is
    small and exact names matter more than meaning here.
    """
    q = _read(question, {n for f in facts for n in _names(f.subject)[0] if n})
    asks = _asks(q.free)
    # what is left once the predicate words are out names things partly ("nextcloud")
    loose = q.free - {_singular(w) for p in asks for w in PREDICATE_WORDS[p]}

    def score(key: str) -> tuple[int, int, int]:
        """Tokens its names spell, other words of its names or folders the question has, and
        (minus) the words of its folders it lacks: of two projects named django, the one
        whose whole path the question spells."""
        names, above = _names(key)
        own = {w for n in (*names, above) for w in n}
        return len(q.covered(names)), len(loose & own), -len(set(above) - loose)

    subject_score = {subject: score(subject) for subject in {f.subject for f in facts}}
    scored: list[tuple[tuple[int, int, int], int, FactRow]] = []
    for fact in facts:
        strength = _strength(fact, asks, q.free)
        if strength is None:
            continue
        mine, theirs = subject_score[fact.subject], score(fact.object)
        fact_score = (mine[0] + theirs[0], mine[1] + theirs[1], mine[2])
        if fact_score[:2] != (0, 0):
            scored.append((fact_score, strength, fact))
    # a subject the question names best counts even when nothing answers about it: asked
    # about a service that publishes nothing, its siblings are not the answer
    named = [s for s in subject_score.values() if s[:2] != (0, 0)]
    best = max([s for s, _, _ in scored] + named, default=None)
    if best is None:
        return Reply([], [], [], [])
    hits = [(strength, f) for score, strength, f in scored if score == best]
    hits.sort(key=lambda h: (-h[0], _RANK.get(h[1].confidence, 9), h[1].library,
                             h[1].subject, h[1].object))  # fmt: skip
    asked = {s for s, score in subject_score.items() if score == best}
    asked |= {f.subject for _, f in hits}
    standing = [(s, f) for s, f in hits if f.confidence != CONTRADICTED]
    top = max((s for s, _ in standing), default=None)
    lead = [f for s, f in standing if s == top]
    silent: list[str] = []
    if asks.get(PUBLISHES) == max(asks.values(), default=0) and not any(
        f.predicate == PUBLISHES for _, f in standing
    ):  # asked what a service publishes, and nothing says it publishes anything
        declared = {f.subject for f in facts if "compose" in f.props.get("how", ())}
        silent = sorted(s for s in asked if s.startswith("service:") and s in declared)
        if silent:
            lead = []
    answering = [f for _, f in hits]
    slots = set().union(*(_slots(f) for f in answering)) if answering else set()
    seen = {id(f) for f in answering}
    peers = [
        f for f in facts
        if id(f) not in seen and _slots(f) & slots and _strength(f, asks, q.free) is not None
    ]  # fmt: skip
    peers.sort(key=lambda f: (_RANK.get(f.confidence, 9), f.library, f.subject, f.object))
    lead_slots = set().union(*(_slots(f) for f in lead)) if lead else slots
    against = [
        f for f in answering + peers if f.confidence == CONTRADICTED and _slots(f) & lead_slots
    ]
    return Reply(answering + peers, lead, against, silent)


def answer(question: str, facts: list[FactRow], limit: int = 10) -> list[FactRow]:
    """The assertions that answer a question, best first (see :func:`reply`)."""
    return reply(question, facts).facts[:limit]
