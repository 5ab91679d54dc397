"""What runs: containers from ``docker ps --format '{{json .}}'`` (the docker CLI, or its saved
output) and the sockets listening on this machine with the process that owns each (psutil)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess

from brainmap.collectors import (
    CONTAINER_NAME,
    IMAGE,
    LISTENS_ON,
    PART_OF,
    PUBLISHES,
    Observation,
    clean,
    image_key,
    only_safe,
    port_key,
    project_name,
    service_key,
)
from brainmap.errors import UserError

DOCKER_TIMEOUT_S = 10.0
# "0.0.0.0:8000->8000/tcp", ":::8000->8000/tcp", "127.0.0.1:5000-5001->5000-5001/tcp"
PORT_MAPPING = re.compile(
    r"(?:(\[?[0-9A-Fa-f:.]*\]?):)?(\d{1,5})(?:-(\d{1,5}))?->(\d{1,5})(?:-(\d{1,5}))?/(tcp|udp|sctp)"
)


def hostname() -> str:
    return socket.gethostname() or "localhost"


def port_mappings(text: str) -> list[tuple[str, str, str, str]]:
    """(host_ip, host port, container port, protocol) of each mapping in a PORTS column,
    ranges expanded and the IPv4/IPv6 twins of one mapping merged."""
    out: dict[tuple[str, str, str], str] = {}
    for m in PORT_MAPPING.finditer(text):
        ip, h1, h2, c1, c2, proto = m.groups()
        hosts = range(int(h1), int(h2 or h1) + 1)
        containers = range(int(c1), int(c2 or c1) + 1)
        if len(hosts) != len(containers) or len(hosts) > 256:
            continue
        if not all(0 < p < 65536 for p in (hosts[0], hosts[-1], containers[0], containers[-1])):
            continue
        for h, c in zip(hosts, containers, strict=True):
            out.setdefault((str(h), str(c), proto), (ip or "").strip("[]"))
    return [(ip, h, c, proto) for (h, c, proto), ip in out.items()]


def docker_ps_lines() -> str:
    """The running containers as ``docker ps`` JSON lines (raises UserError without docker)."""
    exe = shutil.which("docker")
    if exe is None:
        raise UserError(
            "no docker CLI on this machine",
            hint="save `docker ps --format '{{json .}}'` elsewhere and pass it with --from FILE",
        )
    try:
        done = subprocess.run(
            [exe, "ps", "--format", "{{json .}}"],
            capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"docker ps failed: {exc}") from exc
    if done.returncode != 0:
        raise UserError(f"docker ps failed: {done.stderr.strip()[:300]}")
    return done.stdout


def docker_ps(text: str) -> list[Observation]:
    """Observations of ``docker ps --format '{{json .}}'`` output: one container a line.
    Compose labels name the project and service; else the name ``<project>-<service>-<n>``."""
    out: list[Observation] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            raise UserError(
                f"line {n} of the docker ps output is not JSON",
                hint="produce it with: docker ps --format '{{json .}}'",
            ) from None
        if not isinstance(row, dict):
            continue
        names = row.get("Names")  # podman gives a list
        name = clean(str(names[0] if isinstance(names, list) and names else names or ""))
        name = name.split(",")[0].strip()
        labels = _labels(row.get("Labels"))
        project = labels.get("com.docker.compose.project")
        service = labels.get("com.docker.compose.service")
        named: dict[str, str | bool] = {}
        if not (project and service):
            if not name:
                continue
            named = {"from_name": True}  # maybe a container_name: pairing resolves it
            parts = re.split(r"[-_]", name)
            if len(parts) < 3 or not parts[-1].isdigit():
                project, service = "docker", name  # a container outside compose
            else:
                project, service = "-".join(parts[:-2]), parts[-2]
        subject = service_key(project_name(project), service)
        state = clean(str(row.get("State") or ""))
        props: dict[str, str | bool] = {"container": name, **named}
        if state:
            props["state"] = state
        out.append(Observation(subject, PART_OF, f"project:{project_name(project)}", n,
                               "docker-ps", props))  # fmt: skip
        if row.get("Image"):
            image = image_key(clean(str(row["Image"])))
            out.append(Observation(subject, IMAGE, image, n, "docker-ps", dict(named)))
        if name:
            out.append(Observation(subject, CONTAINER_NAME, f"container:{name}", n, "docker-ps"))
        for ip, host_port, container, proto in port_mappings(_ports_text(row.get("Ports"))):
            mapping: dict[str, str | bool] = {"container": container, "protocol": proto,
                                              "host_ip": ip, **named}  # fmt: skip
            out.append(Observation(subject, PUBLISHES, port_key(host_port), n, "docker-ps",
                                   {k: v for k, v in mapping.items() if v}))  # fmt: skip
    return only_safe(out)


def _ports_text(raw: object) -> str:
    """docker's PORTS column; podman gives a list of mappings instead."""
    if not isinstance(raw, list):
        return clean(str(raw or ""))
    out = []
    for m in raw:
        if not isinstance(m, dict):
            continue
        numbers = [str(m.get(k) or "") for k in ("host_port", "container_port", "range")]
        if not (numbers[0].isdigit() and numbers[1].isdigit()):
            continue
        host, container = int(numbers[0]), int(numbers[1])
        count = min(int(numbers[2]), 1000) if numbers[2].isdigit() else 1
        span = (f"{host}-{host + count - 1}->{container}-{container + count - 1}"
                if count > 1 else f"{host}->{container}")  # fmt: skip
        out.append(f"{m.get('host_ip') or '0.0.0.0'}:{span}/{m.get('protocol') or 'tcp'}")
    return ", ".join(out)


def _labels(raw: object) -> dict[str, str]:
    if isinstance(raw, dict):  # podman gives a mapping
        raw = ",".join(f"{k}={v}" for k, v in raw.items())
    out = {}
    for part in clean(str(raw or "")).split(","):
        key, sep, value = part.partition("=")
        if sep and key.startswith("com.docker.compose."):  # nothing else is read: labels
            out[key.strip()] = value.strip()  # may carry anything
    return out


def sockets() -> list[Observation]:
    """Sockets in LISTEN state on this machine, with the owning process when it is visible."""
    import psutil

    try:
        conns = psutil.net_connections(kind="inet")
    except psutil.AccessDenied as exc:
        raise UserError(
            "listing sockets needs more privileges on this system", hint="run as root"
        ) from exc
    host = hostname()
    seen: dict[tuple[int, str], tuple[set[str], set[str]]] = {}  # (port, proto) -> ips, procs
    names: dict[int, str] = {}
    for c in conns:
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        proto = "tcp" if c.type == socket.SOCK_STREAM else "udp"
        addrs, procs = seen.setdefault((c.laddr.port, proto), (set(), set()))
        addrs.add(c.laddr.ip)
        if c.pid:
            if c.pid not in names:
                try:
                    names[c.pid] = psutil.Process(c.pid).name()
                except (psutil.Error, OSError):  # gone, or another user's process
                    names[c.pid] = ""
            if names[c.pid]:
                procs.add(names[c.pid])
    out = []
    for (port, proto), (addrs, procs) in sorted(seen.items()):
        props = {"address": ",".join(sorted(addrs)), "protocol": proto, "host": host}
        if procs:
            props["process"] = ",".join(sorted(procs))
        out.append(Observation(f"host:{host}", LISTENS_ON, port_key(port), None, "sockets",
                               props))  # fmt: skip
    return only_safe(out)
