"""Claims in prose: what a README or a note says about services, hosts and ports.

Four forms are read: URLs and ``host:port`` mentions ("open http://localhost:8000"),
``docker compose ps`` / ``docker ps`` tables pasted from a terminal, compose snippets in code
blocks (narrative copies of a compose file, not declared config) and an explicit ``facts:``
list in the frontmatter. They are *narrative* observations: alone they never confirm anything.
"""

from __future__ import annotations

import re
from typing import Any

from brainmap.collectors import (
    LISTENS_ON,
    PART_OF,
    PUBLISHES,
    SERVES,
    Observation,
    compose,
    only_safe,
    parse_port,
    port_key,
    service_key,
)
from brainmap.collectors.runtime import port_mappings
from brainmap.keys import NodeKey
from brainmap.markdown import Entry

LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]", "host.docker.internal"}
# scheme://[user:pass@]host[:port][/path] - the user info is matched so that it can be dropped
_URL = re.compile(
    r"\b(https?|wss?|grpc)://(?:[^@\s/]*@)?(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)"
    r"(?::(\d{1,5}))?(/[^\s?#)\]>'\"`]*)?"
)
_LOCAL_PORT = re.compile(r"(?<![\w./:-])(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\]):(\d{1,5})\b")
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_KINDS = {"service", "host", "port", "image", "network", "volume", "env", "user", "container",
          "project", "entity"}  # fmt: skip


# Cheap tests first (most pages mention no endpoint): substring checks and a pattern with a
# literal prefix, which the regex engine scans for quickly.
def _has_local(low: str) -> bool:
    return (
        "localhost" in low
        or "127.0.0.1" in low
        or "0.0.0.0" in low
        or "[::1]" in low
        or ("host.docker.internal" in low)
    )


_PORT_URL = re.compile(r"://[^\s/]*:\d")
_RUNNING = re.compile(r"\b(Up|running|Running|Exited|exited|healthy)\b")
MAX_OBSERVATIONS = 2_000  # per file: a page of generated URLs must not flood the facts


def collect(text: str, entry: Entry, project: str) -> list[Observation]:
    """Observations in one markdown file (``entry`` is its parse, ``project`` its folder's)."""
    lines = text.split("\n")
    out: list[Observation] = _frontmatter_facts(entry.meta, lines[: entry.body_start])
    used: set[int] = set()  # lines read as tables or snippets, not scanned again for URLs
    # most pages have none of these: one search of the whole text each skips the line loops
    if "services:" in text:
        for start, end in entry.fences:
            body = lines[start + 1 : end]
            if body and body[-1].lstrip().startswith(("```", "~~~")):  # unless left open
                body = body[:-1]
            snippet = "\n".join(body)
            if re.search(r"^services:\s*$", snippet, re.MULTILINE):
                found = compose.collect(
                    snippet, project, method="compose-snippet", first_line=start + 2
                )
                if found:
                    out += found
                    used.update(range(start, end))
    low = text.lower()
    if "ports" in low:
        _tables(lines, entry.body_start, project, out, used)
    if _has_local(low) or _PORT_URL.search(text):
        for n in range(entry.body_start, len(lines)):
            line = lines[n]
            if n not in used and (_has_local(line.lower()) or _PORT_URL.search(line)):
                _endpoints(line, n + 1, project, out)
            if len(out) > MAX_OBSERVATIONS:
                break
    return only_safe(out[:MAX_OBSERVATIONS])


def _endpoints(line: str, number: int, project: str, out: list[Observation]) -> None:
    seen: set[tuple[str, int]] = set()
    for m in _URL.finditer(line):
        scheme, host, raw_port = m.group(1), m.group(2), m.group(3)
        port = parse_port(raw_port) if raw_port else _DEFAULT_PORTS.get(scheme)
        local = host.lower() in LOCAL_HOSTS
        if port is None or not (local or raw_port):  # a docs link is not a claim about a port
            continue
        if (host.lower(), port) in seen:  # [http://x:1](http://x:1)
            continue
        seen.add((host.lower(), port))
        # scheme, host and port only: paths can carry tokens (/reset/<token>, webhook ids)
        url = f"{scheme}://{host}{':' + raw_port if raw_port else ''}"
        subject = f"project:{project}" if local else f"host:{host.lower()}"
        out.append(Observation(subject, SERVES, port_key(port), number, "url",
                               {"host": host.lower(), "url": url}))  # fmt: skip
    for m in _LOCAL_PORT.finditer(line):
        host, port = m.group(1).lower(), parse_port(m.group(2))
        if port is None or (host, port) in seen:
            continue
        seen.add((host, port))
        out.append(Observation(f"project:{project}", SERVES, port_key(port), number, "url",
                               {"host": host}))  # fmt: skip


def _tables(
    lines: list[str], start: int, project: str, out: list[Observation], used: set[int]
) -> None:
    """``docker compose ps`` (NAME ... SERVICE ... PORTS) and ``docker ps`` (... PORTS NAMES)
    tables: each row names a service and the ports it publishes."""
    n = start
    while n < len(lines):
        header = lines[n].rstrip()
        if n in used or not _is_table_header(header):
            n += 1
            continue
        used.add(n)
        service_col = _column(header, "SERVICE")
        names_last = re.search(r"\bNAMES\s*$", header) is not None
        n += 1
        while n < len(lines) and lines[n].strip() and not lines[n].lstrip().startswith("```"):
            row = lines[n]
            if set(row.strip()) <= {"-", " "}:  # the ---- rule under a docker-compose v1 header
                used.add(n)
                n += 1
                continue
            used.add(n)
            tokens = row.split()
            mappings = port_mappings(row)
            named: dict[str, str | bool] = {}
            if service_col is not None:
                service = row[service_col[0] : service_col[1]].strip().split(" ")[0]
            else:
                name = tokens[-1] if names_last else tokens[0]
                service = _service_of(name, project)
                named = {"from_name": True}  # maybe a container_name: pairing resolves it
            if service and (mappings or _RUNNING.search(row)) and "|" not in row:
                subject = service_key(project, service)
                out.append(Observation(subject, PART_OF, f"project:{project}", n + 1,
                                       "compose-ps", dict(named)))  # fmt: skip
                for ip, host_port, container, proto in mappings:
                    props: dict[str, str | bool] = {"container": container, "protocol": proto}
                    props.update(named)
                    if ip:
                        props["host_ip"] = ip
                    out.append(Observation(subject, PUBLISHES, port_key(host_port), n + 1,
                                           "compose-ps", props))  # fmt: skip
            n += 1


def _is_table_header(line: str) -> bool:
    """A terminal table's header: NAME(S) and PORTS columns set apart by two or more spaces,
    every word capitalised (`docker ps`, `docker compose ps`, docker-compose v1's
    ``Name  Command  State  Ports``), so that prose about names and ports is not one."""
    words = line.split()
    upper = line.upper()
    return (
        len(words) >= 2
        and "PORTS" in upper.split()
        and ("NAME" in upper.split() or "NAMES" in upper.split())
        and all(w[0].isupper() for w in words)
        and "  " in line.strip()
    )


def _column(header: str, name: str) -> tuple[int, int] | None:
    """Where a column of a fixed-width table header starts and ends."""
    m = re.search(rf"\b{name}\b", header.upper())
    if m is None:
        return None
    nxt = re.search(r"\S", header[m.end() :])
    after = re.search(r"\s{2,}\S", header[m.end() :])
    end = m.end() + after.end() - 1 if after and nxt else len(header) + 200
    return m.start(), end


def _service_of(name: str, project: str) -> str:
    """The service in a container name: ``<project>-<service>-<n>`` (``_`` in compose v1);
    a name without that shape is taken as the service's ``container_name``."""
    truncated = name.startswith(("...", "\u2026"))  # docker cut the project prefix off
    name = name.lstrip(".\u2026")
    indexed = re.match(r"^(.+)[-_]\d+$", name)
    if indexed is None:
        return name
    base = indexed.group(1)
    prefix = project.rpartition("/")[2]  # docker names a project after the folder's last part
    for sep in ("-", "_"):
        if base.lower().startswith(prefix + sep):
            return base[len(prefix) + 1 :]
    if truncated:
        return base
    m = re.match(r"^.+[-_]([A-Za-z0-9.]+)$", base)
    return m.group(1) if m else base


def _frontmatter_facts(meta: dict[str, Any], lines: list[str]) -> list[Observation]:
    """``facts:`` in the frontmatter: ``"homeserver listens_on 8008"`` strings or
    ``{subject, predicate, object}`` mappings."""
    facts = meta.get("facts")
    if not isinstance(facts, list):
        return []
    out = []
    for item in facts[:MAX_OBSERVATIONS]:
        if isinstance(item, dict):
            triple = [str(item.get(k, "")).strip() for k in ("subject", "predicate", "object")]
        elif isinstance(item, str):
            parts = item.split(None, 2)
            triple = parts if len(parts) == 3 else []
        else:
            continue
        if len(triple) != 3 or not all(triple):
            continue
        subject, predicate, obj = triple
        predicate = re.sub(r"[^a-z0-9_]+", "_", predicate.lower()).strip("_")
        if not predicate:
            continue
        needle = subject if isinstance(item, dict) else item
        line = next((i + 1 for i, text in enumerate(lines) if needle in text), 1)
        out.append(Observation(_key(subject, predicate), predicate, _key(obj, predicate), line,
                               "frontmatter"))  # fmt: skip
    return out


def _key(text: str, predicate: str) -> str:
    """A node key for a name written by hand: ``service:app/web`` stays, ``8008`` becomes a
    port when the predicate is about ports, anything else an entity."""
    node = NodeKey.parse(text)
    if node.kind.lower() in _KINDS and node.name:
        return str(NodeKey(node.kind.lower(), node.name.strip()))
    if predicate in (PUBLISHES, LISTENS_ON, SERVES, "port", "exposes") and parse_port(text):
        return port_key(text.strip())
    return "entity:" + " ".join(text.split()).casefold()
