"""Sources of observations for the facts root (DESIGN.md, Facts).

A collector reads one source and returns :class:`Observation` triplets with the line they come
from. Three kinds of source exist: **runtime** (what runs: ``docker ps``, listening sockets),
**config** (what is declared: compose files, ssh config, YAML configs) and **narrative** (what
the docs say: URLs, ``docker compose ps`` tables, compose snippets, frontmatter ``facts:``).
Pairing them into assertions is :mod:`brainmap.facts.pairing`.

Secrets never leave a collector: values of environment variables are never read, URLs lose
their user info and query, and :func:`keep` drops any triplet that names a secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from brainmap.keys import NodeKey

RUNTIME, CONFIG, NARRATIVE = "runtime", "config", "narrative"
# Which kind of source each method is (the pairing rule needs the kind, the user the method).
METHOD_KIND = {
    "docker-ps": RUNTIME,
    "sockets": RUNTIME,
    "compose": CONFIG,
    "ssh-config": CONFIG,
    "yaml-config": CONFIG,
    "url": NARRATIVE,
    "compose-ps": NARRATIVE,
    "compose-snippet": NARRATIVE,
    "frontmatter": NARRATIVE,
}

# Predicates (the object is a node key of the kind in brackets)
# What the config collectors (compose, ssh, yaml) make of a file, as a version: when it
# changes, the indexer reads every config file again, and no markdown (the text analysis has
# its own, analysis.ANALYZER_VERSION). 1: compose's extends of another file, the variables of
# an included file as docker compose merges them, network_mode, image digests; 2: compose
# profiles, COMPOSE_FILE.
CONFIG_COLLECTORS = 2

PART_OF = "part_of"  # service -> project
PUBLISHES = "publishes"  # service -> host port [port]; props: container, protocol, host_ip
# a published port with no host port (``ports: ["80"]``): docker picks one at start; kept as
# ``exposes`` with this ``published`` prop
RANDOM_HOST_PORT = "random"
# the layer of a compose file that docker compose reads by itself beside the base file
OVERRIDE_LAYER = "override"
# the view of the files a project's COMPOSE_FILE names (no layer: a file's name has no "/")
LISTED_VIEW = "/compose_file"
EXPOSES = "exposes"  # service -> container port reachable only inside its networks [port]
LISTENS_ON = "listens_on"  # host or service -> port it accepts connections on [port]
SERVES = "serves"  # project -> a host port its docs tell you to open [port]
IMAGE = "image"
DEPENDS_ON = "depends_on"
NETWORK = "network"
VOLUME = "volume"
ENV_VAR = "env_var"  # the variable's name only, never its value
CONTAINER_NAME = "container_name"
HOSTNAME = "hostname"
USER = "user"
PORT = "port"  # ssh port of a host alias
IDENTITY_FILE = "identity_file"  # a path, never the key
CONNECTS_TO = "connects_to"  # a config's client side: a database or upstream host/port

# A name that says "secret" (a predicate, a frontmatter fact), or a value that assigns one
# ("password=...", a PEM block). Bounded repetitions: a 10 MB line must not take hours.
_SECRET_NAME = r"pass(?:word|wd|phrase)|secret|token|api[_-]?key|private[_-]?key|credential"
_SECRET = re.compile(_SECRET_NAME, re.IGNORECASE)
_SECRET_VALUE = re.compile(
    rf"(?:{_SECRET_NAME})\w{{0,64}}\s{{0,8}}[=:]|-----BEGIN [A-Z ]{{0,40}}PRIVATE KEY",
    re.IGNORECASE,
)
# the parts of a variable name that say it holds a secret: DB_PASS, MYSQL_PWD, SIGNING_KEY
_SECRET_PARTS = {"pass", "passwd", "password", "passphrase", "pw", "pwd", "secret", "secrets",
                 "token", "key", "apikey", "credential", "credentials", "dsn", "auth", "cert",
                 "private", "cookie"}  # fmt: skip


@dataclass(slots=True)
class Observation:
    """One triplet as a source states it, with the line it was read from (1-based)."""

    subject: str
    predicate: str
    object: str
    line: int | None
    method: str
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return METHOD_KIND[self.method]


def keep(obs: Observation) -> bool:
    """False for a triplet that names or carries a secret: it is dropped at collection."""
    if _SECRET.search(obs.predicate):
        return False
    if obs.method == "frontmatter" and (_SECRET.search(obs.subject) or _SECRET.search(obs.object)):
        return False  # written by hand: "db password is ..." names the secret anywhere
    values = [obs.object, *(str(v) for v in obs.props.values())]
    return not any(_SECRET_VALUE.search(v) for v in values)


def is_secret_name(name: str) -> bool:
    """Whether a variable or key name says it holds a secret (``DB_PASS``, ``API_TOKEN``,
    ``SIGNING_KEY``)."""
    camel = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)  # AccountKey, apiToken
    parts = re.split(r"[^a-z0-9]+", camel.lower())
    return bool(_SECRET_PARTS.intersection(parts)) or _SECRET.search(name) is not None


def scrub(text: str) -> str:
    """Values without credentials: ``scheme://user:pw@host:port/path`` -> ``scheme://host:port``
    (paths and queries can carry tokens too), ``//user:pw@server/share`` -> ``//server/share``,
    ``user:pw@host`` -> ``host``. Word by word, in linear time."""
    if "@" not in text and "://" not in text:
        return text
    return " ".join(_scrub_word(word) for word in text.split(" "))


def _scrub_key(key: str) -> str:
    """A node key (``kind:value``) with its value scrubbed."""
    node = NodeKey.parse(clean(key))
    return str(NodeKey(node.kind, scrub(node.name)))


def drop_userinfo(url: str) -> str:
    """``scheme://user:pw@host/path`` -> ``scheme://host/path``. A password may hold '@' or
    '/': the host follows the last '@'."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    return f"{scheme}://{rest[rest.rfind('@') + 1 :]}"


# a content digest (an OCI image's): algorithm, colon, at least 32 hex digits
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}")


def _scrub_word(word: str) -> str:
    at = word.rfind("@")
    if "://" in word:
        scheme, _, rest = drop_userinfo(word).partition("://")
        host = re.split(r"[/?#]", rest, maxsplit=1)[0]
        return f"{scheme}://{host}"
    if at < 0:
        return word
    if word.startswith("//"):
        return "//" + word[at + 1 :]
    if _DIGEST.fullmatch(word[at + 1 :]):  # an image pinned by digest: postgres:16@sha256:...
        return word
    return word[at + 1 :] if ":" in word[:at] else word


def only_safe(observations: list[Observation]) -> list[Observation]:
    """The observations without secrets: user info removed, secret-bearing triplets dropped."""
    out = []
    for obs in observations:
        obs.subject, obs.object = _scrub_key(obs.subject), _scrub_key(obs.object)
        obs.props = {k: scrub(clean(v)) if isinstance(v, str) else v for k, v in obs.props.items()}
        if keep(obs):
            out.append(obs)
    return out


def project_name(raw: str) -> str:
    """A compose project name as docker compose derives it from a folder name."""
    name = re.sub(r"[^a-z0-9_-]", "", raw.lower())
    return name or "default"


def service_key(project: str, service: str) -> str:
    return f"service:{project}/{service}"


def split_service(key: str) -> tuple[str, str]:
    """``service:samples/app/web`` -> (``samples/app``, ``web``): :func:`service_key` undone."""
    project, _, service = key.removeprefix("service:").rpartition("/")
    return project, service


def service_project(key: str) -> str:
    """The project a service's key names (``samples/app`` of ``service:samples/app/web``);
    any other key is its own."""
    return split_service(key)[0] if key.startswith("service:") else key


def port_key(port: int | str) -> str:
    return f"port:{port}"


def parse_port(raw: str) -> int | None:
    """A TCP/UDP port number, or None."""
    raw = raw.strip()
    if not raw.isdigit():
        return None
    port = int(raw)
    return port if 0 < port < 65536 else None


def image_key(ref: str) -> str:
    """``image:<ref>`` with the defaults docker fills in removed: ``docker.io/library/`` and
    ``:latest`` (so ``postgres`` and ``postgres:latest`` are one image)."""
    ref = ref.strip()
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    if ref.endswith(":latest") and "@" not in ref:
        ref = ref[: -len(":latest")]
    return "image:" + ref


def clean(text: str) -> str:
    """Text that SQLite can store: lone surrogates (``"\\ud800"`` escapes, file and process
    names that are not UTF-8) replaced."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")
