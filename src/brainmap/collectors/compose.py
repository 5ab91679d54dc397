"""Compose files: services, images, published and exposed ports, volumes, dependencies,
networks and the *names* of environment variables (never their values)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from brainmap.collectors import (
    CONTAINER_NAME,
    DEPENDS_ON,
    ENV_VAR,
    EXPOSES,
    IMAGE,
    NETWORK,
    PART_OF,
    PUBLISHES,
    RANDOM_HOST_PORT,
    VOLUME,
    Observation,
    image_key,
    is_secret_name,
    only_safe,
    parse_port,
    port_key,
    project_name,
    scrub,
    service_key,
)
from brainmap.collectors.yamltree import BudgetExceeded, Node, parse

# the files docker compose up reads in a folder: the first of these base files found, and the
# first override file found
BASE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
OVERRIDE_NAMES = (
    "compose.override.yml", "compose.override.yaml",
    "docker-compose.override.yml", "docker-compose.override.yaml",
)  # fmt: skip
# the tags with which an override file replaces a base file's list rather than adding to it
REPLACING_TAGS = ("!override", "!reset")
_REPLACEABLE = ("ports", "expose", "volumes")  # the lists a layer may replace so
_LAYER_NAME = re.compile(r"^(?:docker-)?compose\.(.+)\.ya?ml$")
MAX_RANGE = 256  # a published range wider than this is kept as one "port:a-b" claim
_VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_]\w*))")
_ENV_COMMENT = re.compile(r"\s+#")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")

# Reads the file an ``extends`` names: (the file that names it, None for the one collected;
# the path as written) -> (the file's path in the library, its services), None when it cannot
# be read (outside the library, missing, not YAML)
Load = Callable[[str | None, str], tuple[str, Mapping[str, Node]] | None]


def read_env(text: str) -> dict[str, str]:
    """A ``.env`` file's variables, for interpolating ports and names only (never stored),
    read as docker compose reads them: a comment begins at a space and a ``#`` after an
    unquoted value, and the variables above fill in an unquoted or double-quoted one."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _ENV_LINE.match(line)
        if m and not line.lstrip().startswith("#"):
            value = m.group(2)
            quote = value[0] if value and value[0] in "'\"" else ""
            if quote and (end := value.find(quote, 1)) > 0:
                value = value[1:end]  # what follows the closing quote is a comment
            else:
                quote, value = "", _ENV_COMMENT.split(value, maxsplit=1)[0]
            # no secret fills in another (a project's name, the files read, are kept)
            out[m.group(1)] = value if quote == "'" else interpolate(value, public(out))
    return out


def public(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that may fill in what is kept (ports, names, paths): those without a
    secret's name (a path or port built from a password would store the password)."""
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def interpolate(raw: str, env: Mapping[str, str]) -> str:
    """Compose variable interpolation: ``${X}``, ``${X:-default}``, ``${X-default}``,
    ``${X:+alt}``, ``$X`` and ``$$``. An unset variable without default becomes empty."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        value = env.get(name)
        if op in (":-", ":?"):
            return value if value else (arg if op == ":-" else "")
        if op in ("-", "?"):
            return value if value is not None else (arg if op == "-" else "")
        if op == ":+":
            return arg if value else ""
        if op == "+":
            return arg if value is not None else ""
        return value or ""

    return _VAR.sub(sub, raw)


class Include(NamedTuple):
    """One entry of a compose file's ``include:``: its files, relative to the including
    file's folder as written, and the env files that fill them in (none written: the
    ``.env`` of the first file's folder)."""

    paths: list[str]
    env_files: list[str]


def project_of(text: str, env: Mapping[str, str]) -> tuple[str | None, list[Include]]:
    """The project a compose file's folder names: ``COMPOSE_PROJECT_NAME`` in its ``.env``,
    else the file's ``name:`` (None when neither does: the folder's name is used), and what
    its ``include:`` names (``- db/compose.yaml``, or ``- path: db/compose.yaml`` or a list
    of paths, with an ``env_file``): docker compose copies their services into its project."""
    env = public(env)
    try:
        root = parse(text)
    except BudgetExceeded:  # its files fall back to the folder's name; collect() says why
        return _chosen(env), []
    node = root.get("include") if root is not None else None
    included: list[Include] = []
    for item in node.items if node is not None else []:
        long = isinstance(item.value, dict)
        paths = _texts(item.get("path") if long else item, env)
        if paths:
            included.append(Include(paths, _texts(item.get("env_file") if long else None, env)))
    return _named(root, env), included


def _texts(node: Node | None, env: Mapping[str, str]) -> list[str]:
    """The strings of a scalar or a list of them, interpolated (empty ones left out)."""
    listed = node.items if node is not None and node.text is None else [node]
    return [interpolate(n.text.strip(), env) for n in listed if n and n.text and n.text.strip()]


def _chosen(env: Mapping[str, str]) -> str | None:
    """The project ``COMPOSE_PROJECT_NAME`` sets (docker compose takes it over ``name:``)."""
    chosen = env.get("COMPOSE_PROJECT_NAME", "").strip()
    return project_name(chosen) if chosen else None


def _named(root: Node | None, env: Mapping[str, str]) -> str | None:
    if chosen := _chosen(env):
        return chosen
    name = root.get("name") if root is not None else None
    if name is None or not name.text:
        return None
    return project_name(interpolate(name.text, env))


def reads_up(env: Mapping[str, str]) -> list[str] | None:
    """The compose files ``docker compose up`` reads, in order, when ``COMPOSE_FILE`` names
    them (split by ``COMPOSE_PATH_SEPARATOR``); None when it does not, or names a file of
    another folder or one that is no compose file (not followed)."""
    listed = env.get("COMPOSE_FILE", "").strip()
    if not listed:
        return None
    separator = env.get("COMPOSE_PATH_SEPARATOR") or ":"
    names: list[str] = []
    for item in (part.strip() for part in listed.split(separator) if part.strip()):
        name = item.removeprefix("./")
        if "/" in name or "\\" in name or not (name in BASE_NAMES or layer_of(name)):
            return None
        names.append(name)
    return list(dict.fromkeys(names)) or None


def layer_of(filename: str) -> str | None:
    """The layer a compose file adds to its folder's base file (None for the base file):
    ``override`` for ``compose.override.yaml``, which docker compose reads by itself beside
    it, else a variant (``compose.prod.yaml``: prod), which it applies only with ``-f``
    (and then without the override file)."""
    found = _LAYER_NAME.match(filename)
    return found.group(1) if found else None


def collect(
    text: str,
    project: str,
    env: Mapping[str, str] | None = None,
    *,
    method: str = "compose",
    first_line: int = 1,
    layer: str | None = None,
    included: bool = False,
    load: Load | None = None,
    up: list[str] | None = None,
    started: list[str] | None = None,
    base: str | None = None,
) -> list[Observation]:
    """Observations of one compose file (or of a snippet of one, with ``method`` and the line
    where the snippet starts). ``project`` is the folder's name, unless the file sets ``name``
    or its ``.env`` (``env``) sets ``COMPOSE_PROJECT_NAME``.

    The observations of a ``layer`` (:func:`layer_of`) say so in their props. In the
    override file or a variant, a service whose ``ports``, ``expose`` or ``volumes`` list is tagged
    ``!override`` or ``!reset`` (replacing the base file's list, not adding to it) says which
    in its ``part_of``'s ``replaces``. The observations of a file another one ``included``
    say so (``included``): they are in ``project``, whatever the file names.

    A service that ``extends`` a service of another file has that one's settings merged in
    when ``load`` reads it: their observations cite that file (``file``, ``extended``). One
    whose chain could not be read whole (a file unread, a service missing, a loop) says why
    in its ``part_of``'s ``unread``: what it publishes is then not known (or not all). One
    on another's network or the host's (``network_mode``) says how it is reached instead, in
    its ``part_of``'s ``network``. The ``part_of``s of a base file and of those it includes
    say what its caller found ``docker compose up`` reads (``up``: the files its ``.env``'s
    ``COMPOSE_FILE`` names) and starts (``started``: ``COMPOSE_PROFILES``); the observations
    of an included file name the folder of the base file (``base``); the ``part_of`` of a
    service with ``profiles`` names them (whether it starts: :func:`brainmap.facts.pairing.pair`)."""
    root = parse(text, first_line)
    services = root.get("services") if root is not None else None
    if root is None or services is None or not services.mapping:
        return []
    # .env values fill in ports and the project name only (a port is not a secret); other
    # fields (image, container_name, volumes) get the defaults written in the file
    env = public(env or {})
    if not included:
        project = _named(root, env) or project
    out: list[Observation] = []
    for svc_name, svc in services.mapping.items():
        subject = service_key(project, svc_name)
        props: dict[str, object] = {}
        if layer:  # the override file, or a variant
            lists = [svc.get(k) for k in _REPLACEABLE]
            replaced = [k for k, n in zip(_REPLACEABLE, lists, strict=True)
                        if n is not None and n.tag in REPLACING_TAGS]  # fmt: skip
            props = {"replaces": replaced} if replaced else {}
        chain, unread = _extended(services.mapping, svc_name, load)
        if unread:
            props["unread"] = unread
        if network := _elsewhere(chain):
            props["network"] = network
        if up is not None:
            props["up"] = up
        if profiles := _profiles(chain, env):
            props["profiles"] = profiles
        if started:
            props["started"] = started
        out.append(Observation(subject, PART_OF, f"project:{project}", svc.line, method, props))
        _service(out, chain, subject, project, env, method)
    marks: dict[str, object] = {"layer": layer} if layer else {}
    if included:  # read with the base file in the folder ``base``
        marks = {"included": True} | ({"base": base} if base is not None else {})
    for obs in out:
        obs.props.update(marks)
    return only_safe(out)


class _Link(NamedTuple):
    """A service of an ``extends`` chain, and the file it is in (None: the one collected)."""

    node: Node
    file: str | None


def _extended(
    services: Mapping[str, Node], name: str, load: Load | None
) -> tuple[list[_Link], str | None]:
    """The service ``name`` and the services it ``extends`` (one another's, in turn, in its
    file or another that ``load`` reads), the furthest first: what docker compose merges into
    it; and, when ``load`` is given, why the chain stops short of what docker compose would
    merge (a file that cannot be read, a service a file does not have, a loop), which docker
    compose refuses: what the service has is then not known. Without ``load`` (a snippet in
    a README) the chain stops at the first ``extends`` of another file, saying nothing."""
    chain: list[_Link] = []
    seen: set[tuple[str | None, str]] = set()
    file: str | None = None
    why: str | None = None
    while (node := services.get(name)) is not None:
        if chain and not isinstance(node.value, dict):  # a string or a list: no service
            why = f"it extends {name}, which is no service"
            break
        if (file, name) in seen:
            why = "it extends services that extend one another in a loop"
            break
        seen.add((file, name))
        chain.append(_Link(node, file))
        extends = node.get("extends")
        if extends is None:
            break
        base = extends.get("service")
        name = (base.text if base is not None else extends.text) or ""
        other = extends.get("file")
        if other is not None and other.text and other.text.strip():
            path = other.text.strip()
            found = load(file, path) if load is not None else None
            if found is None:
                why = f"it extends a service of {path}, which cannot be read"
                break
            file, services = found
    else:  # the service extended is not in its file
        where = (
            f" of {file}, which has no such service" if file else ", which its file does not have"
        )
        why = f"it extends service {name}{where}"
    return chain[::-1], why if load is not None else None


def _network_mode(chain: list[_Link]) -> str:
    """The ``network_mode`` of a service (its own, else the nearest it extends)."""
    for node, _ in reversed(chain):
        mode = node.get("network_mode")
        if mode is not None and mode.text:
            return mode.text.strip()
    return ""


def _elsewhere(chain: list[_Link]) -> str | None:
    """Why compose does not say where a service is reached: it runs on the host's network
    without declaring a port (whatever it opens there), or on another service's or
    container's network (reached on that one's ports)."""
    mode = _network_mode(chain)
    if mode == "host" and not _merged(chain, "ports"):
        return "it runs on the host's network, on whatever ports it opens there"
    kind, _, other = mode.partition(":")
    if kind in ("service", "container") and other:
        return f"it runs on the network of {kind} {other}: reached on the ports that one publishes"
    return None


def _profiles(chain: list[_Link], env: Mapping[str, str]) -> list[str]:
    """The profiles a service declares (its own and those of the services it extends)."""
    named = {p.strip() for item, _ in _merged(chain, "profiles") for p in _texts(item, env)}
    return sorted(named - {""})  # a variable that fills in nothing names no profile


def _merged(chain: list[_Link], key: str) -> list[tuple[Node, str | None]]:
    """The items of a list attribute of an extended service, each with its file: the bases'
    and then its own (``!override``, ``!reset``: its own only)."""
    items: list[tuple[Node, str | None]] = []
    for node, file in chain:
        value = node.get(key)
        if value is not None:
            kept = items if value.tag not in REPLACING_TAGS else []
            items = kept + [(item, file) for item in value.items]
    return items


def _service(
    out: list[Observation],
    chain: list[_Link],
    subject: str,
    project: str,
    env: Mapping[str, str],
    method: str,
) -> None:
    """The observations of one service; ``chain``: the services it extends, then itself
    (their image when it sets none, their ports, exposed ports, volumes and variables)."""

    def add(predicate: str, obj: str, line: int, file: str | None = None, **props: str) -> None:
        cited: dict[str, object] = {"file": file, "extended": True} if file else {}
        out.append(Observation(subject, predicate, obj, line, method, {**props, **cited}))

    svc = chain[-1].node
    defaults: dict[str, str] = {}  # only ports take .env values
    image = next(
        ((n.get("image"), f) for n, f in reversed(chain) if n.get("image") is not None), None
    )
    if image is not None and image[0] is not None and image[0].text:
        add(IMAGE, image_key(interpolate(image[0].text, defaults)), image[0].line, image[1])
    container = svc.get("container_name")
    if container is not None and container.text:
        name = interpolate(container.text, defaults)
        add(CONTAINER_NAME, "container:" + name, container.line)
    on_host = _network_mode(chain) == "host"  # docker drops the mappings: it listens there
    for item, file in _merged(chain, "ports"):
        for mapped_ip, mapped, target, proto in _ports(item, env):
            host_ip, published = ("", target) if on_host else (mapped_ip, mapped)
            if published is None:  # a random host port: reachable, but on no known port
                add(EXPOSES, port_key(target), item.line, file, protocol=proto,
                    published=RANDOM_HOST_PORT)  # fmt: skip
            else:
                props = {"container": target, "protocol": proto}
                if host_ip:
                    props["host_ip"] = host_ip
                add(PUBLISHES, port_key(published), item.line, file, **props)
    for item, file in _merged(chain, "expose"):
        spec, _, proto = interpolate(item.text or "", env).partition("/")
        for port in _expand(spec) or []:
            add(EXPOSES, port_key(port), item.line, file, protocol=proto or "tcp")
    deps = svc.get("depends_on")
    for dep_name, dep_line in _names(deps):
        add(DEPENDS_ON, service_key(project, dep_name), dep_line)
    networks = svc.get("networks")
    for net_name, net_line in _names(networks):
        add(NETWORK, f"network:{project}/{net_name}", net_line)
    # target -> source: the last file's mount wins
    mounted: dict[str, tuple[str, int, str | None]] = {}
    for item, file in _merged(chain, "volumes"):
        source, target = _volume(item, defaults)
        mounted.pop(target, None)
        mounted[target] = (source, item.line, file)
    for target, (source, line, file) in mounted.items():
        if source:
            add(VOLUME, "volume:" + source, line, file, target=target)
    named: set[str] = set()
    for node, file in reversed(chain):  # its own first: a base's line for the same name is not
        for var, var_line in _env_names(node.get("environment")):
            if var not in named:
                named.add(var)
                add(ENV_VAR, "env:" + var, var_line, file)


def _names(node: Node | None) -> list[tuple[str, int]]:
    """Names from a list (``- redis``) or from the keys of a mapping (long syntax)."""
    if node is None:
        return []
    if isinstance(node.value, dict):
        return [(k, v.line) for k, v in node.value.items()]
    return [(n.text, n.line) for n in node.items if n.text]


def _env_names(node: Node | None) -> list[tuple[str, int]]:
    if node is None:
        return []
    if isinstance(node.value, dict):
        return [(k, v.line) for k, v in node.value.items()]
    return [(n.text.partition("=")[0].strip(), n.line) for n in node.items if n.text]


def _volume(item: Node, env: Mapping[str, str]) -> tuple[str, str]:
    if isinstance(item.value, dict):
        source, target = item.get("source"), item.get("target")
        return (
            interpolate(source.text or "", env) if source else "",
            interpolate(target.text or "", env) if target else "",
        )
    parts = scrub(interpolate(item.text or "", env)).split(":")  # //user:pw@server/share
    if len(parts) == 1:
        return "", parts[0]  # an anonymous volume: nothing named to point at
    if len(parts) > 2 and len(parts[0]) == 1:  # a Windows drive letter: C:\data:/data
        parts = [parts[0] + ":" + parts[1], *parts[2:]]
    return parts[0], parts[1]


def _expand(spec: str) -> list[str] | None:
    """``8000`` -> [8000]; ``8000-8002`` -> [8000, 8001, 8002]; a wide range stays whole."""
    low, sep, high = spec.strip().partition("-")
    a, b = parse_port(low), parse_port(high) if sep else None
    if a is None or (sep and (b is None or b < a)):
        return None
    if not sep or b == a:
        return [str(a)]
    assert b is not None
    if b - a >= MAX_RANGE:
        return [f"{a}-{b}"]
    return [str(p) for p in range(a, b + 1)]


def _ports(item: Node, env: Mapping[str, str]) -> list[tuple[str, str | None, str, str]]:
    """(host_ip, published host port or None, container port, protocol) of one ``ports``
    item, short (``[IP:][HOST:]CONTAINER[/PROTO]``, ranges, IPv6) or long syntax."""
    if isinstance(item.value, dict):

        def field(key: str) -> str:
            node = item.get(key)
            return interpolate(node.text or "", env) if node is not None else ""

        return _mapping(field("host_ip"), field("published"), field("target"),
                        (field("protocol") or "tcp").lower())  # fmt: skip
    spec = interpolate(item.text or "", env).strip()
    spec, _, proto = spec.partition("/")
    host_ip = ""
    if spec.startswith("["):  # [::1]:8080:80
        host_ip, _, spec = spec[1:].partition("]")
        spec = spec.lstrip(":")
    parts = spec.split(":")
    if len(parts) > 3:  # an unbracketed IPv6 address: ::1:8080:80, ::8080:80
        host_ip, parts = ":".join(parts[:-2]), parts[-2:]
        host_ip = "::" if host_ip == ":" else host_ip
    if len(parts) == 3:
        host_ip, published, target = parts
    elif len(parts) == 2:
        published, target = parts
    else:
        published, target = "", parts[0]
    return _mapping(host_ip, published, target, (proto or "tcp").lower())


def _mapping(
    host_ip: str, published: str, target: str, proto: str
) -> list[tuple[str, str | None, str, str]]:
    targets = _expand(target)
    if not targets:
        return []
    if not published:
        return [(host_ip, None, t, proto) for t in targets]
    hosts = _expand(published)
    if not hosts:
        return []
    if len(targets) == 1 and len(hosts) > 1:  # 8000-8010:80: one of the range, chosen at start
        return [(host_ip, f"{hosts[0]}-{hosts[-1]}", targets[0], proto)]
    if len(hosts) != len(targets):
        return []
    return [(host_ip, h, t, proto) for h, t in zip(hosts, targets, strict=True)]
