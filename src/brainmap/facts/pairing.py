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
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from brainmap.collectors import (
    CONFIG,
    CONTAINER_NAME,
    EXPOSES,
    HOSTNAME,
    IMAGE,
    LISTED_VIEW,
    LISTENS_ON,
    NARRATIVE,
    OVERRIDE_LAYER,
    PART_OF,
    PORT,
    PUBLISHES,
    RANDOM_HOST_PORT,
    RUNTIME,
    SERVES,
    USER,
    VOLUME,
    Observation,
    clean,
    compose,
    split_service,
)
from brainmap.facts.models import AUTHORITY, CONFIRMED, CONTRADICTED, HYPOTHESIS, PARTIAL
from brainmap.facts.text import describe, label
from brainmap.keys import NodeKey
from brainmap.store import EdgeRecord, NodeRecord, ObservationRecord, Store

# The version of the rules below: a brain paired by other rules is paired again, by these,
# at its next reindex or collect, though its observations did not change.
PAIRING_RULES = 6  # 3: compose layers (override, variants) and random host ports; 4: what
# the override file or a variant replaces of the base file (lists, single values) per view;
# 5: a compose file another includes is read with it; 6: compose profiles, COMPOSE_FILE
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
    folder are one declaration, with the files they include (an override file adds to its
    base file, or replaces what a file it includes says: it does not contradict them)."""
    if obs.method == "compose":
        return f"compose:{_read_in(obs)}"
    return f"{obs.method}:{obs.path}"


def _read_in(obs: ObservationRecord) -> str:
    """The folder whose files docker compose reads a compose observation with: its file's,
    or that of the base file that includes it."""
    return str(obs.props.get("base") or obs.path.rpartition("/")[0])


def _time(obs: ObservationRecord) -> str:
    return obs.observed_at or ""


def pair(observations: list[ObservationRecord]) -> tuple[list[NodeRecord], list[EdgeRecord]]:
    """The assertions (nodes and facts-root edges) that a library's observations support."""
    observations = _canonical_subjects(_as_docker_reads(observations))
    gated = _gated(observations)
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
        edge = _edge(subject, predicate, obj, detail, state, confidence, partial)
        if subject in gated and RUNTIME not in kinds:  # seen running: it was started
            edge.props["profiles"] = gated[subject]
        edges.append(edge)
        for key in (subject, obj):
            node = NodeKey.parse(key)
            nodes.setdefault(key, NodeRecord(key, node.kind, node.name))
    return list(nodes.values()), edges


def _as_docker_reads(observations: list[ObservationRecord]) -> list[ObservationRecord]:
    """The compose observations as docker compose reads the files of a folder: of several
    base files the one it picks (``compose.yaml`` before ``docker-compose.yml``), of several
    override files likewise, each marked by the views it holds in. ``docker compose up`` reads
    the base file and the override file (the view named by :data:`OVERRIDE_LAYER`); a variant
    (``compose.prod.yaml``: prod) is read with ``-f``, beside the base file and without the
    override file. Where the folder's ``.env`` sets ``COMPOSE_FILE`` (the base file's
    ``part_of``'s ``up``), ``docker compose up`` reads the files it names, in that order
    (:data:`LISTED_VIEW`; of two base files, the one it names; naming two, it is not
    followed, and ``up`` is dropped). The lists of the files read together add up, but where
    one tags a service's ``ports`` or ``expose`` ``!override`` or ``!reset`` the lists of the
    files before it are not in that view, nor a single value (an image, a container name) a
    later file sets too: an observation then says in ``views`` the views it still holds in
    (none: it is dropped) and in ``replaced_in`` where it was replaced. An observation of the
    override file or a variant says its ``layer``; the others hold in every view, those of a
    file another one includes too (read with it, whatever its name, and replaced by the
    files read after it as its includer is)."""
    present: dict[str, set[str]] = defaultdict(set)  # folder -> its compose files' names
    named: dict[str, list[str]] = {}  # folder -> the files its COMPOSE_FILE names
    for obs in observations:
        if obs.method != "compose":
            continue
        if not obs.props.get("included"):  # read with its includer: in the includer's folder
            present[_read_in(obs)].add(obs.path.rpartition("/")[2])
        if obs.predicate == PART_OF and "up" in obs.props:
            named[_read_in(obs)] = list(obs.props["up"])
    read: dict[str, set[str]] = {}  # folder -> the base and override files docker reads
    views: dict[str, set[str]] = {}  # folder -> the views of its files
    # folder -> the layers COMPOSE_FILE names, in order ("": the base file), where followed
    listed: dict[str, list[str]] = {}
    for folder, names in present.items():
        read[folder] = {
            next((n for n in options if n in names), "")
            for options in (compose.BASE_NAMES, compose.OVERRIDE_NAMES)
        }
        layers = {compose.layer_of(n) for n in names} - {None, OVERRIDE_LAYER}
        views[folder] = {OVERRIDE_LAYER} | {str(layer) for layer in layers}
        files = named.get(folder, [])
        bases = [n for n in files if compose.layer_of(n) is None]
        if files and len(bases) <= 1:
            listed[folder] = [compose.layer_of(n) or "" for n in files]
            views[folder].add(LISTED_VIEW)
            if bases:  # of two base files, the one it names is read
                read[folder] = {bases[0]} | {n for n in read[folder] if compose.layer_of(n)}
            if not any(compose.layer_of(n) == OVERRIDE_LAYER for n in read[folder]):
                views[folder].discard(OVERRIDE_LAYER)  # no such view to tell apart
    # (service, list or single-valued predicate) -> the layers whose file replaces what the
    # files before it say of it
    replacing: dict[tuple[str, str], set[str]] = defaultdict(set)
    for obs in observations:
        layer = obs.props.get("layer")
        if obs.method != "compose" or layer is None:
            continue
        folder, _, name = obs.path.rpartition("/")
        if layer == OVERRIDE_LAYER and name not in read[folder]:
            continue
        for what in _replaced_by(obs):
            replacing[(obs.subject, what)].add(str(layer))

    def replaced_in(obs: ObservationRecord, folder: str, layer: str | None) -> set[str]:
        """The views in which what a file says is replaced by a file read after it."""
        by = set().union(*(replacing.get((obs.subject, w), set()) for w in _replaceable(obs)))
        out = by if layer is None else set()  # the base file's: by each layer, in its view
        order = listed.get(folder, [])
        if (layer or "") in order and by & set(order[order.index(layer or "") + 1 :]):
            out.add(LISTED_VIEW)
        return out

    def as_read(obs: ObservationRecord) -> ObservationRecord | None:
        if obs.method != "compose":
            return obs
        layer = obs.props.get("layer")
        folder, name = _read_in(obs), obs.path.rpartition("/")[2]
        if (
            not obs.props.get("included")
            and layer in (None, OVERRIDE_LAYER)
            and name not in read[folder]
        ):
            return None  # a second base or override file docker does not read
        if obs.predicate == PART_OF and "up" in obs.props and folder not in listed:
            obs = replace(obs, props={k: v for k, v in obs.props.items() if k != "up"})
        if folder not in views:  # an include-only base file, and nothing beside it
            return obs
        if layer is None:  # in every view, but the listed files' when they leave it out
            every = views[folder]
            holds = every - ({LISTED_VIEW} if "" not in listed.get(folder, [""]) else set())
        else:  # its own view, and the listed files' when COMPOSE_FILE names it
            every = {str(layer)}
            holds = every | ({LISTED_VIEW} if layer in listed.get(folder, ()) else set())
        replaced = replaced_in(obs, folder, layer)
        if not replaced and holds == every:
            return obs
        if not holds - replaced:
            return None
        props = {**obs.props, "views": sorted(holds - replaced), "replaced_in": sorted(replaced)}
        return replace(obs, props=props)

    return [kept for obs in observations if (kept := as_read(obs)) is not None]


def _replaced_by(obs: ObservationRecord) -> list[str]:
    """What a layer's observation replaces of the files before it: the lists its service
    tags ``!override`` (its ``part_of``'s ``replaces``), a single value, a mount's path."""
    if obs.predicate == PART_OF:
        return list(obs.props.get("replaces", ()))
    if obs.predicate in SINGLE_VALUED:  # an image, a container name: one per service
        return [obs.predicate]
    if obs.predicate == VOLUME:  # one mount per path in the container
        return [_mount(obs)]
    return []


def _replaceable(obs: ObservationRecord) -> list[str]:
    """What of an observation a later file may replace: its list (ports, expose; volumes
    also by its mount's path) or its single value."""
    if obs.predicate == PUBLISHES or _random_mapping(obs):
        return ["ports"]
    if obs.predicate == EXPOSES:
        return ["expose"]
    if obs.predicate == VOLUME:  # one mount a path; a list !override replaces all
        return [_mount(obs), "volumes"]
    return [obs.predicate]


def _gated(observations: list[ObservationRecord]) -> dict[str, list[str]]:
    """Service -> the profiles that start it, for the services ``docker compose up`` does not
    start: those whose files it reads (the base file, the override file or those
    ``COMPOSE_FILE`` names, what they include) give profiles, none of which its project's
    ``.env`` starts (``COMPOSE_PROFILES``, ``*`` for all). Profiles add up across those
    files, as compose merges them."""
    declared: dict[str, set[str]] = defaultdict(set)
    project_of: dict[str, str] = {}
    started: dict[str, set[str]] = defaultdict(set)
    parts = [o for o in observations if o.method == "compose" and o.predicate == PART_OF]
    listing = {_read_in(o) for o in parts if "up" in o.props}
    for obs in parts:
        layer = obs.props.get("layer")
        # what starts is what the project's .env says, whichever files it names
        started[obs.object].update(map(str, obs.props.get("started", ())))
        if obs.props.get("included"):
            up = True  # read with its base file in every view
        elif _read_in(obs) in listing:  # those its COMPOSE_FILE names
            views = obs.props.get("views")
            up = LISTED_VIEW in views if views is not None else layer is None
        else:
            up = layer in (None, OVERRIDE_LAYER)
        if not up:
            continue  # a variant, read only with -f
        project_of[obs.subject] = obs.object
        declared[obs.subject].update(map(str, obs.props.get("profiles", ())))
    return {
        service: sorted(named)
        for service, named in declared.items()
        if named and not ({"*"} | named) & started[project_of[service]]
    }


def _mount(obs: ObservationRecord) -> str:
    """What a volume observation mounts over: the path in the container."""
    return f"mount {obs.props.get('target', '')}"


def _random_mapping(obs: ObservationRecord) -> bool:
    """A container port published on a host port docker picks at start."""
    return obs.props.get("published") == RANDOM_HOST_PORT


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
                # what docker compose up publishes (a variant's ports are not in its view)
                if any(o.kind != NARRATIVE for o in state.support) and not _variant_only(
                    state.support
                ):
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
        # declared for variant views only (applied with -f): what runs or the docs say is
        # about the view docker compose up reads, neither against it nor disputed by it
        aside = {claim for claim in members if _variant_only(claims[claim].support)}
        for claim in members:
            state = claims[claim]
            mine = {_source(o) for o in state.support}
            declares = any(o.method == "compose" for o in state.support)
            against = [
                obs
                for other in members
                if other != claim
                for obs in claims[other].support
                if claim not in by_source[_source(obs)] and _source(obs) not in mine
                and not (claim in aside and obs.method != "compose")
                and not (other in aside and obs.method == "compose" and not declares)
            ]  # fmt: skip
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
            loser = claims[claim]
            _dispute(loser, slot, against)
            for other in [claim, *declared[project]]:  # the declared side beside the loser
                claims[other].slots.append(slot)
            if loser.lost:  # the declared ports won: each leads its service's answer
                for other in declared[project]:
                    claims[other].won = claims[other].won or loser.lost
                    claims[other].against += loser.support


def _undeclared(claims: dict[Claim, _State]) -> None:
    """A compose file lists every port a service publishes, so a source stating one it does
    not list (a README's old ``docker compose ps`` row) states otherwise: it is against the
    list, or against the service's declaration when it lists none. A running container wins
    such a dispute (runtime over config); a doc loses it. A host port stated for a container
    port the list publishes on a random host port (``ports: ["8000"]``) is the port docker
    picked: no dispute, and it confirms that mapping."""
    declared: dict[str, list[ObservationRecord]] = defaultdict(list)  # service -> its list
    randomly: dict[tuple[str, str], Claim] = {}  # (service, container port) -> that mapping
    for claim, state in claims.items():
        subject, predicate, obj, _ = claim
        if predicate in (PUBLISHES, PART_OF):
            declared[subject] += [o for o in state.support if o.method == "compose"]
        if predicate == EXPOSES and any(map(_random_mapping, state.support)):
            randomly[(subject, label(obj))] = claim
    for claim, state in claims.items():
        subject, predicate, _, detail = claim
        if predicate != PUBLISHES or state.against or any(o.kind == CONFIG for o in state.support):
            continue  # declared, or already disputed on its container or host port
        picked = randomly.get((subject, detail.partition("/")[0]))
        if picked is not None:
            claims[picked].support += [o for o in state.support if o.kind != CONFIG]
            continue
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
    for key in ("included", "extended"):  # no variant, whatever its file's name says
        if obs.props.get(key):
            out[key] = True
    for key in ("unread", "network"):  # why its ports are not (all) in its compose file
        if obs.props.get(key):
            out[key] = obs.props[key]
    if "up" in obs.props:  # the files docker compose up reads (COMPOSE_FILE)
        out["up"] = obs.props["up"]
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
    if any(map(_random_mapping, support)):
        props["published"] = RANDOM_HOST_PORT  # on a host port docker picks at start
        props["what"] = (f"{describe(subject, PUBLISHES, obj)} (container port) on a random "
                         "host port")  # fmt: skip
    # declared in some views only (whatever the docs say): those views; what runs (runtime)
    # is in every view, whichever files it was started with
    held = [_views(o) for o in support if o.method == "compose"]
    limited = [views for views in held if views is not None]
    if held and len(limited) == len(held) and RUNTIME not in {o.kind for o in support}:
        props["layers"] = sorted(set().union(*limited))
        replaced = {v for o in support for v in o.props.get("replaced_in", ())}
        if replaced:
            props["replaced_in"] = sorted(replaced)
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


def _variant_only(support: list[ObservationRecord]) -> bool:
    """Whether a claim is declared only for views that ``docker compose up`` does not read
    (variants applied with ``-f``), and not seen running."""
    held = [_views(o) for o in support if o.method == "compose"]
    views = [v for v in held if v is not None]
    return (
        bool(held)
        and len(views) == len(held)
        and not {OVERRIDE_LAYER, LISTED_VIEW} & set().union(*views)
        and all(o.kind != RUNTIME for o in support)
    )


def _views(obs: ObservationRecord) -> set[str] | None:
    """The compose views an observation holds in (:func:`_as_docker_reads`; None: all)."""
    if "views" in obs.props:
        return set(obs.props["views"])
    layer = obs.props.get("layer")
    return None if layer is None else {str(layer)}


def _observer(obs: ObservationRecord) -> str:
    if obs.kind == RUNTIME:
        return f"{obs.method} on {obs.props.get('host') or obs.path}"
    return f"{obs.method} collector"


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


def due_digest(store: Store, library_id: int) -> str:
    """What a library's pairing digest is once its facts are paired from its observations
    as they are, by these rules."""
    return f"{PAIRING_RULES}:{store.facts.observation_digest(library_id)}"


def pair_library(store: Store, library_id: int) -> bool:
    """Re-pair a library when its observations changed since the last pairing; return
    whether it did."""
    digest = due_digest(store, library_id)
    if store.facts.pairing_digest(library_id) == digest:
        return False
    nodes, edges = pair(store.facts.observations(library_id))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.facts.put_assertions(library_id, digest, nodes, edges, now)
    return True
