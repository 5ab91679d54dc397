"""Display text of the facts root: a node key's label and phrase, a sentence per assertion."""

from __future__ import annotations

from collections.abc import Sequence

from brainmap.collectors import (
    CONTAINER_NAME,
    HOSTNAME,
    IDENTITY_FILE,
    IMAGE,
    LISTED_VIEW,
    LISTENS_ON,
    OVERRIDE_LAYER,
    PART_OF,
    PORT,
    PUBLISHES,
    SERVES,
    USER,
    split_service,
)
from brainmap.keys import NodeKey, name_of


def label(key: str) -> str:
    """What a node is called: its key's name (``redis`` for ``entity:redis``), else the key."""
    return name_of(key) or key


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
    phrase = _PHRASES.get(predicate, predicate.replace("_", " "))
    target = NodeKey.parse(obj)
    what = target.name if target.kind in ("port", "image", "env", "volume", "container",
                                          "keyfile", "user") else describe_key(obj)  # fmt: skip
    text = f"{describe_key(subject)} {phrase} {what}"
    if predicate == PUBLISHES and detail:
        text += f" (container {detail})"
    return text


def describe_key(key: str) -> str:
    """A node key in words: ``service web of flask-redis``, ``host nas``."""
    node = NodeKey.parse(key)
    if node.kind == "service" and "/" in node.name:
        project, service = split_service(key)
        return f"service {service} of {project}"
    return f"{node.kind} {node.name}" if node.kind else key


def views(layers: Sequence[str], profiles: Sequence[str] = ()) -> str | None:
    """Where a fact declared only in some compose files, or for services started only with
    a profile, holds, in words after "only": ``in the prod variant (-f)``, ``with --profile
    debug``; None when it holds wherever docker compose up runs."""
    where = ", ".join(
        "docker compose up (the override file)" if layer == OVERRIDE_LAYER
        else "docker compose up (COMPOSE_FILE)" if layer == LISTED_VIEW
        else f"the {layer} variant (-f)"
        for layer in layers
    )  # fmt: skip
    started = " or ".join(f"--profile {p}" for p in profiles)
    text = " ".join(([f"in {where}"] if where else []) + ([f"with {started}"] if started else []))
    return text or None
