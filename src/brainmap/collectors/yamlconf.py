"""YAML service configs (a Matrix ``homeserver.yaml`` and the like): listeners and ports the
service accepts connections on, the hosts and ports it connects to, and its public name.

Only these keys are read (a whitelist): passwords, shared secrets and keys that such files
hold are never looked at.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import SplitResult, urlsplit

from brainmap.collectors import (
    CONNECTS_TO,
    HOSTNAME,
    LISTENS_ON,
    SERVES,
    Observation,
    only_safe,
    parse_port,
    port_key,
    service_key,
)
from brainmap.collectors.yamltree import Node, parse

_PORT_KEYS = {"port", "listen_port", "http_port", "https_port", "bind_port", "tls_port"}
_HOST_KEYS = ("host", "hostname", "address", "bind_address", "bind_host")
# A port below one of these keys is one the service connects to, not one it listens on.
_CLIENT_KEYS = {"database", "db", "args", "redis", "cache", "smtp", "email", "upstream",
                "client", "backend", "ldap", "proxy", "outbound"}  # fmt: skip


def collect(text: str, project: str, stem: str) -> list[Observation]:
    """Observations of the YAML config ``stem`` (its file name) in ``project``."""
    root = parse(text)
    if root is None or not root.mapping:
        return []
    subject = service_key(project, stem)
    out: list[Observation] = []

    def add(predicate: str, obj: str, line: int, **props: str) -> None:
        out.append(Observation(subject, predicate, obj, line, "yaml-config", dict(props)))

    for listener in (root.get("listeners") or Node([], 0)).items:
        port_node = listener.get("port")
        port = parse_port(port_node.text or "") if port_node else None
        if port is None or port_node is None:
            continue
        binds = listener.get("bind_addresses") or listener.get("bind_address")
        bind = (
            ",".join(n.text for n in binds.items if n.text)
            if binds and binds.items
            else (binds.text if binds and binds.text else "")
        )
        kind = listener.get("type")
        add(LISTENS_ON, port_key(port), port_node.line, bind=bind,
            type=kind.text if kind and kind.text else "")  # fmt: skip
    name = root.get("server_name")
    if name is not None and name.text:
        add(HOSTNAME, "host:" + name.text, name.line)
    base = root.get("public_baseurl")
    if base is not None and base.text:
        url = urlsplit(base.text)
        port = url.port if _valid_port(url) else None
        if url.hostname:
            default = 443 if url.scheme == "https" else 80
            add(SERVES, port_key(port or default), base.line, host=url.hostname)
    _walk(root, [], add)
    return only_safe(out)


def _valid_port(url: SplitResult) -> bool:
    try:
        return url.port is not None
    except ValueError:  # a port out of range
        return False


def _walk(node: Node, path: list[str], add: Callable[..., None]) -> None:
    """Ports anywhere in the tree: listened on, or connected to below a client key."""
    if len(path) > 16:
        return
    mapping = node.mapping
    for key, child in mapping.items():
        if key == "listeners" and not path:
            continue  # read above, with its bind addresses
        low = key.lower()
        if low in _PORT_KEYS and child.text is not None:
            port = parse_port(child.text)
            if port is None:
                continue
            host = next((mapping[h].text for h in _HOST_KEYS if h in mapping and mapping[h].text),
                        "")  # fmt: skip
            where = ".".join([*path, key])
            client = any(p.lower() in _CLIENT_KEYS for p in path)
            predicate = CONNECTS_TO if client else LISTENS_ON
            add(predicate, port_key(port), child.line, host=host or "", key=where)
        elif isinstance(child.value, dict):
            _walk(child, [*path, key], add)
        elif isinstance(child.value, list):
            for item in child.items:
                if isinstance(item.value, dict):
                    _walk(item, [*path, key], add)
