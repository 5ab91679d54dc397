"""The facts root: collectors, pairing into confirmed / partial / hypothesis / contradicted,
conflicts and their resolution, secrets, `ask` with its web fallback.

Everything is real: compose files, ssh configs and READMEs written in tmp_path, a socket
listening on 127.0.0.1, a stand-in SearXNG server on 127.0.0.1 (the one remote service).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

import brainmap.ops.facts  # noqa: F401  (the tests name its types as ops.facts.*)
from brainmap import indexer, ops
from brainmap.collectors import compose, narrative, runtime, sshconfig, yamlconf
from brainmap.config import load, save
from brainmap.markdown import parse
from conftest import DATA, run_cli, write

COMPOSE = """\
services:
  web:
    image: example/web:1.2
    ports:
      - "8000:8000"
    depends_on:
      - redis
  redis:
    image: redis
"""
README_AGREES = """\
# Shop

Start it with `docker compose up`, then open http://localhost:8000 in a browser.
"""


def _facts(brain: ops.Brain) -> dict[tuple[str, str, str], ops.facts.Fact]:
    result = {}
    for row in brain.store.facts.assertions():
        fact = ops.facts.fact_of(row)
        result[(fact.subject, fact.predicate, fact.object)] = fact
    return result


def _brain(home: Path, library: Path, name: str = "lab") -> ops.Brain:
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(library)))
    return brain


def _ps(path: Path, project: str, service: str, ports: str, image: str = "nginx") -> Path:
    """A `docker ps --format json` file of one container of a compose project."""
    return write(path, json.dumps({
        "Names": f"{project}-{service}-1", "Image": image, "Ports": ports,
        "Labels": f"com.docker.compose.project={project},com.docker.compose.service={service}",
    }) + "\n")  # fmt: skip


def _collect(brain: ops.Brain, **kw: object) -> ops.facts.CollectReport:
    # vectors only where a test asks for them: embedding is most of a collection's time
    return ops.collect(brain, ops.CollectInput(**{"embed": False, **kw}))


# --- collectors ----------------------------------------------------------------------------


def test_compose_port_syntaxes() -> None:
    text = """\
name: shop
services:
  app:
    ports:
      - 80:80
      - "127.0.0.1:8001:81"
      - "[::1]:6001:6001"
      - "::1:6002:6002/udp"
      - "9090-9091:8080-8081"
      - "3000"
      - "${PORT:-8080}:82"
      - "${ADMIN_PORT}:83"
      - target: 443
        published: "8443"
        protocol: tcp
        host_ip: 0.0.0.0
    expose: ["5000", "6000-6001/udp"]
"""
    found = compose.collect(text, "ignored-folder-name", {"ADMIN_PORT": "9999"})
    published = {
        (o.object, o.props["container"], o.props["protocol"], o.props.get("host_ip", ""))
        for o in found
        if o.predicate == "publishes"
    }
    assert published == {
        ("port:80", "80", "tcp", ""),  # unquoted 80:80 is not YAML 1.1's sexagesimal 4880
        ("port:8001", "81", "tcp", "127.0.0.1"),
        ("port:6001", "6001", "tcp", "::1"),
        ("port:6002", "6002", "udp", "::1"),
        ("port:9090", "8080", "tcp", ""),
        ("port:9091", "8081", "tcp", ""),
        ("port:8080", "82", "tcp", ""),  # ${PORT:-8080} with PORT unset
        ("port:9999", "83", "tcp", ""),  # from .env
        ("port:8443", "443", "tcp", "0.0.0.0"),
    }
    exposed = {(o.object, o.props.get("published")) for o in found if o.predicate == "exposes"}
    assert exposed == {("port:3000", "random"), ("port:5000", None), ("port:6000", None),
                       ("port:6001", None)}  # fmt: skip
    assert {o.subject for o in found} == {"service:shop/app"}  # `name:` names the project
    lines = {o.object: o.line for o in found if o.predicate == "publishes"}
    assert lines["port:80"] == 5 and lines["port:8443"] == 13


def test_compose_env_names_not_values_and_interpolated_default() -> None:
    text = """\
services:
  db:
    image: postgres:${PG_VERSION:-16}
    environment:
      - POSTGRES_PASSWORD=hunter2-inline
      - POSTGRES_DB
    ports: ["${DB_PORT:-5432}:5432"]
"""
    found = compose.collect(text, "p", {"DB_PORT": "15432"})
    by_predicate = {(o.predicate, o.object) for o in found}
    assert ("env_var", "env:POSTGRES_PASSWORD") in by_predicate
    assert ("env_var", "env:POSTGRES_DB") in by_predicate
    assert ("image", "image:postgres:16") in by_predicate
    assert ("publishes", "port:15432") in by_predicate
    assert "hunter2-inline" not in repr(found)


def test_ssh_config_with_include_and_wildcards(tmp_path: Path) -> None:
    config = write(
        tmp_path / "ssh" / "config",
        """\
Include conf.d/*
Host bastion
  HostName 203.0.113.7
  User admin
Host *.internal !legacy.internal
  User deploy
  ProxyJump bastion
Host legacy.internal
  HostName 10.0.0.9
Host *
  Port 2222
  IdentityFile ~/.ssh/id_ed25519
""",
    )
    write(
        tmp_path / "ssh" / "conf.d" / "db",
        "Host db.internal\n    HostName=10.0.0.5\n    Port 5022\n",
    )
    found = sshconfig.collect(config, config.read_text())
    facts = {(o.subject, o.predicate, o.object) for o in found}
    assert ("host:db.internal", "hostname", "host:10.0.0.5") in facts
    assert ("host:db.internal", "port", "port:5022") in facts  # first value wins over Host *
    assert ("host:db.internal", "user", "user:deploy") in facts  # from the wildcard block
    assert ("host:db.internal", "proxy_jump", "host:bastion") in facts
    assert ("host:legacy.internal", "user", "user:deploy") not in facts  # negated pattern
    assert ("host:legacy.internal", "port", "port:2222") in facts
    assert ("host:bastion", "identity_file", "keyfile:~/.ssh/id_ed25519") in facts
    assert not any(s.startswith("host:*") for s, _, _ in facts)  # patterns are not hosts
    included = next(o for o in found if o.object == "host:10.0.0.5")
    assert included.props["file"].endswith("conf.d/db") and included.line == 2


def test_yaml_config_reads_listeners_not_secrets() -> None:
    text = """\
server_name: matrix.example.org
listeners:
  - port: 8008
    bind_addresses: ['::1', '127.0.0.1']
    type: http
database:
  args:
    password: hunter2-db
    host: db.internal
    port: 5432
registration_shared_secret: shared-s3cret
"""
    found = yamlconf.collect(text, "matrix", "homeserver")
    facts = {(o.subject, o.predicate, o.object) for o in found}
    assert ("service:matrix/homeserver", "listens_on", "port:8008") in facts
    assert ("service:matrix/homeserver", "connects_to", "port:5432") in facts
    assert ("service:matrix/homeserver", "hostname", "host:matrix.example.org") in facts
    assert "hunter2" not in repr(found) and "s3cret" not in repr(found)


def test_narrative_urls_tables_snippets_and_frontmatter() -> None:
    text = """\
---
facts:
  - homeserver listens_on 8008
  - {subject: backup, predicate: runs_on, object: "host:nas"}
  - {subject: db, predicate: password, object: hunter2}
---
# App

Open http://admin:pw-in-url@localhost:8080/login?token=abc or `localhost:9090`.
Docs: https://docs.docker.com/compose/ (a link, not a claim).

```
services:
  web:
    ports:
      - "8080:80"
```

```
$ docker compose ps
NAME          COMMAND    SERVICE   STATUS    PORTS
app-web-1     "nginx"    web       running   0.0.0.0:8080->80/tcp, :::8080->80/tcp
```
"""
    found = narrative.collect(text, parse(text, fallback_title="README"), "app")
    facts = {(o.subject, o.predicate, o.object, o.method) for o in found}
    assert ("project:app", "serves", "port:8080", "url") in facts
    assert ("project:app", "serves", "port:9090", "url") in facts
    assert not any(o.object == "port:443" for o in found)
    assert ("service:app/web", "publishes", "port:8080", "compose-snippet") in facts
    assert ("service:app/web", "publishes", "port:8080", "compose-ps") in facts
    assert ("entity:homeserver", "listens_on", "port:8008", "frontmatter") in facts
    assert ("entity:backup", "runs_on", "host:nas", "frontmatter") in facts
    assert not any(o.predicate == "password" for o in found)  # a secret's triplet is dropped
    url = next(o for o in found if o.method == "url" and o.object == "port:8080")
    assert url.props["url"] == "http://localhost:8080"  # no user info, no path, no query
    assert url.line == 9
    ps = [o for o in found if o.method == "compose-ps" and o.predicate == "publishes"]
    assert len(ps) == 1 and ps[0].line == 22  # the IPv4 and IPv6 twins are one mapping


def test_docker_ps_json_reads_labels_ports_and_nothing_else() -> None:
    lines = "\n".join(json.dumps(row) for row in [
        {"Names": "shop-web-1", "Image": "example/web:1.2", "State": "running",
         "Ports": "0.0.0.0:8000->8000/tcp, :::8000->8000/tcp",
         "Labels": "com.docker.compose.project=shop,com.docker.compose.service=web,"
                   "vault.token=hunter2-label"},
        {"Names": "other_cache_1", "Image": "redis:latest", "Ports": "6379/tcp", "Labels": ""},
    ])  # fmt: skip
    found = runtime.docker_ps(lines)
    facts = {(o.subject, o.predicate, o.object) for o in found}
    assert ("service:shop/web", "publishes", "port:8000") in facts
    assert ("service:other/cache", "image", "image:redis") in facts  # :latest is the default
    assert "hunter2" not in repr(found)
    assert sum(1 for o in found if o.predicate == "publishes") == 1


# --- pairing -------------------------------------------------------------------------------


def test_config_and_narrative_confirm_one_source_is_a_hypothesis(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", README_AGREES)
    brain = _brain(home, lib)
    report = _collect(brain)
    facts = _facts(brain)
    web = facts[("service:shop/web", "publishes", "port:8000")]
    assert web.confidence == "confirmed"
    assert {(e.path, e.line, e.kind) for e in web.evidence} == {
        ("shop/compose.yaml", 5, "config"), ("shop/README.md", 3, "narrative")}  # fmt: skip
    assert facts[("service:shop/web", "image", "image:example/web:1.2")].confidence == "partial"
    assert facts[("service:shop/redis", "image", "image:redis")].confidence == "hypothesis"
    lab = next(r for r in report.libraries if r.library == "lab")
    assert lab.assertions["confirmed"] >= 1 and lab.observations["compose"] >= 3
    # re-collecting changes nothing
    before = {k: v.confidence for k, v in facts.items()}
    _collect(brain)
    assert {k: v.confidence for k, v in _facts(brain).items()} == before
    # the README stops saying it: back to what the compose file alone supports
    write(lib / "shop" / "README.md", "# Shop\n\nNothing about ports here.\n")
    _collect(brain)
    assert _facts(brain)[("service:shop/web", "publishes", "port:8000")].confidence == (
        "hypothesis"
    )
    brain.close()


WEB_ROW = 'shop-web-1     "run"      web       running   0.0.0.0:8080->8000/tcp'
REDIS_ROW = 'shop-redis-1   "redis"    redis     running   0.0.0.0:6379->6379/tcp'


def _ps_readme(*rows: str) -> str:
    """A README holding a `docker compose ps` table with these rows."""
    table = ["$ docker compose ps", "NAME           COMMAND    SERVICE   STATUS    PORTS", *rows]
    return "# Shop\n\n```\n" + "\n".join(table) + "\n```\n"


def test_readme_contradicting_its_compose_file_is_audited(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", _ps_readme(WEB_ROW))
    brain = _brain(home, lib)
    _collect(brain)
    facts = _facts(brain)
    assert facts[("service:shop/web", "publishes", "port:8080")].confidence == "contradicted"
    declared = facts[("service:shop/web", "publishes", "port:8000")]
    assert declared.resolved_by == "authority" and declared.confidence == "partial"
    brain.close()
    proc = run_cli(home, "audit", "contradict", "--json", check=False)
    assert proc.returncode == 1  # something was found
    report = json.loads(proc.stdout)
    [conflict] = [c for c in report["conflicts"] if "container 8000/tcp" in c["slot"]]
    assert conflict["resolved_by"] == "authority"
    sides = {s["object"]: s for s in conflict["sides"]}
    assert sides["port:8080"]["confidence"] == "contradicted"
    assert sides["port:8080"]["evidence"][0]["path"] == "shop/README.md"
    assert sides["port:8080"]["evidence"][0]["line"] == 6
    assert sides["port:8000"]["evidence"][0]["path"] == "shop/compose.yaml"
    text = run_cli(home, "audit", "contradict", check=False).stdout
    assert "shop/README.md:6" in text and "shop/compose.yaml:5" in text and "authority" in text


def test_freshness_resolves_sources_of_one_kind_and_equal_age_stays_open(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    old = write(lib / "ops" / "ssh_config", "Host db\n  HostName 10.0.0.5\n")
    os.utime(old, (1_600_000_000, 1_600_000_000))
    outside = write(tmp_path / "elsewhere" / "config", "Host db\n  HostName 10.0.0.6\n")
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], source=["ssh"], from_file=str(outside))
    facts = _facts(brain)
    newer = facts[("host:db", "hostname", "host:10.0.0.6")]
    assert newer.resolved_by == "freshness" and newer.confidence == "hypothesis"
    assert facts[("host:db", "hostname", "host:10.0.0.5")].confidence == "contradicted"
    # two files of the same kind and the same age: nothing decides, both stay hypotheses
    same = write(lib / "ops2" / "ssh_config", "Host db\n  HostName 10.0.0.7\n")
    os.utime(same, (1_600_000_000, 1_600_000_000))
    outside.write_text("Host other\n  HostName 10.1.1.1\n")
    _collect(brain, libraries=["lab"], source=["ssh"], from_file=str(outside))
    _collect(brain)
    facts = _facts(brain)
    assert facts[("host:db", "hostname", "host:10.0.0.5")].confidence == "hypothesis"
    assert facts[("host:db", "hostname", "host:10.0.0.7")].confidence == "hypothesis"
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    assert [c.resolved_by for c in conflicts if c.subject == "host:db"] == [None]
    brain.close()


def test_partial_when_another_source_names_the_service_but_not_the_port(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(
        lib / "shop" / "README.md",
        """\
# Shop

```yaml
services:
  web:
    image: example/web:1.2
```
""",
    )
    brain = _brain(home, lib)
    _collect(brain)
    facts = _facts(brain)
    port = facts[("service:shop/web", "publishes", "port:8000")]
    assert port.confidence == "partial" and port.partial == "subject"
    assert facts[("service:shop/web", "image", "image:example/web:1.2")].confidence == ("confirmed")
    brain.close()


def test_a_listening_socket_pairs_with_the_compose_file_declaring_it(
    home: Path, tmp_path: Path
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        lib = tmp_path / "lab"
        write(
            lib / "probe" / "compose.yaml",
            f'services:\n  probe:\n    image: probe\n    ports:\n      - "{port}:80"\n',
        )
        brain = _brain(home, lib)
        _collect(brain)
        assert _facts(brain)[("service:probe/probe", "publishes", f"port:{port}")].confidence == (
            "hypothesis"
        )
        report = _collect(brain, source=["runtime"])
        assert "sockets" in report.libraries[-1].ran
        facts = _facts(brain)
    fact = facts[("service:probe/probe", "publishes", f"port:{port}")]
    assert fact.confidence == "confirmed"
    assert {e.kind for e in fact.evidence} == {"runtime", "config"}
    seen = facts[(f"host:{runtime.hostname()}", "listens_on", f"port:{port}")]
    assert any(e.method == "sockets" and e.process for e in seen.evidence)
    # the socket is closed: the next runtime collection takes its confirmation away
    _collect(brain, source=["runtime"])
    assert _facts(brain)[("service:probe/probe", "publishes", f"port:{port}")].confidence == (
        "hypothesis"
    )
    brain.close()


def test_docker_ps_from_a_file_confirms_and_disappearing_downgrades(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "shop-web-1", "Image": "example/web:1.2", "State": "running",
        "Ports": "0.0.0.0:8000->8000/tcp",
        "Labels": "com.docker.compose.project=shop,com.docker.compose.service=web"}) + "\n")  # fmt: skip
    brain = _brain(home, lib)
    brain.close()
    run_cli(home, "collect")
    out = run_cli(home, "collect", "lab", "--source", "runtime", "--from", str(ps), "--json")
    assert json.loads(out.stdout)["libraries"][-1]["observations"]["docker-ps"] >= 3
    brain = ops.Brain(home)
    fact = _facts(brain)[("service:shop/web", "publishes", "port:8000")]
    assert fact.confidence == "confirmed"
    assert {e.method for e in fact.evidence} == {"docker-ps", "compose"}
    assert next(e for e in fact.evidence if e.method == "docker-ps").path == str(ps)
    brain.close()
    ps.write_text("")  # the container is gone
    run_cli(home, "collect", "lab", "--source", "runtime", "--from", str(ps))
    brain = ops.Brain(home)
    assert _facts(brain)[("service:shop/web", "publishes", "port:8000")].confidence == (
        "hypothesis"
    )
    brain.close()
    bad = write(tmp_path / "bad.json", "not json\n")
    proc = run_cli(home, "collect", "lab", "--source", "runtime", "--from", str(bad), check=False)
    assert proc.returncode != 0 and "line 1" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli(home, "collect", "lab", "-s", "ssh", "-s", "yaml", "--from", str(bad),
                   check=False)  # fmt: skip
    assert proc.returncode != 0 and "one source" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli(home, "collect", "lab", "--from", str(tmp_path / "none.json"), check=False)
    assert proc.returncode != 0 and "no file" in proc.stderr and "Traceback" not in proc.stderr


def test_secrets_never_reach_the_database(home: Path, tmp_path: Path) -> None:
    """RELIABILITY.md item 16: values of environment variables, passwords, tokens and keys
    found by collectors are not in the database file's bytes."""
    secrets = ["hunter2-inline-env", "dotenv-s3cret-value", "yaml-db-passw0rd",
               "shared-secret-xyz", "label-token-abc", "BEGINKEYMATERIAL"]  # fmt: skip
    lib = tmp_path / "lab"
    write(
        lib / "shop" / "compose.yaml",
        """\
services:
  db:
    image: postgres
    environment:
      POSTGRES_PASSWORD: hunter2-inline-env
      API_TOKEN: ${API_TOKEN}
    ports: ["${DB_PORT:-5432}:5432"]
""",
    )
    write(lib / "shop" / ".env", "API_TOKEN=dotenv-s3cret-value\nDB_PORT=6543\n")
    write(
        lib / "matrix" / "homeserver.yaml",
        """\
listeners:
  - port: 8008
database:
  args:
    password: yaml-db-passw0rd
    port: 5432
registration_shared_secret: shared-secret-xyz
signing_key: |
  -----BEGIN PRIVATE KEY-----
  BEGINKEYMATERIAL
""",
    )
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "shop-db-1", "Image": "postgres", "Ports": "0.0.0.0:6543->5432/tcp",
        "Labels": "com.docker.compose.project=shop,com.docker.compose.service=db,"
                  "secret.token=label-token-abc"}) + "\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(ps))
    facts = _facts(brain)
    assert facts[("service:shop/db", "publishes", "port:6543")].confidence == "confirmed"
    assert ("service:shop/db", "env_var", "env:POSTGRES_PASSWORD") in facts  # the name only
    brain.close()
    data = b"".join(p.read_bytes() for p in home.glob("brain.db*"))
    assert b"POSTGRES_PASSWORD" in data  # the scan reads what was written
    for secret in secrets:
        assert secret.encode() not in data, secret


def test_facts_are_derived_data(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", README_AGREES)
    brain = _brain(home, lib)
    _collect(brain)
    before = sorted((k, v.confidence, [(e.path, e.line) for e in v.evidence])
                    for k, v in _facts(brain).items())  # fmt: skip
    brain.close()
    for path in home.glob("brain.db*"):
        path.unlink()
    run_cli(home, "reindex", "--no-embed")
    brain = ops.Brain(home)
    after = sorted((k, v.confidence, [(e.path, e.line) for e in v.evidence])
                   for k, v in _facts(brain).items())  # fmt: skip
    assert after == before and before
    # deleting the library takes its facts along
    ops.library_remove(brain, ops.LibraryNameInput(name="lab"))
    assert brain.store.facts.assertions() == [] and brain.store.facts.observation_counts() == {}
    assert brain.store.graph.orphans() == {"nodes": 0, "edges": 0}
    brain.close()


# --- ask -----------------------------------------------------------------------------------


class _SearXNG(BaseHTTPRequestHandler):
    mode = "ok"
    queries: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).queries.append(self.path)
        if self.mode == "slow":
            time.sleep(2)
        if self.mode == "throttle":
            self.send_response(429)
            self.send_header("Retry-After", "30")
            self.end_headers()
            return
        body = json.dumps({"query": "q", "results": [
            {"title": "Flask Redis", "url": "https://example.org/flask", "content": "port 8000",
             "engine": "stand-in"}]}).encode()  # fmt: skip
        if self.mode == "garbage":
            body = b"<html>not json</html>"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def searxng() -> Iterator[tuple[str, type[_SearXNG]]]:
    handler = type("Handler", (_SearXNG,), {"mode": "ok", "queries": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search", handler
    server.shutdown()
    server.server_close()


def test_ask_answers_from_facts_then_info_then_web(
    home: Path, tmp_path: Path, searxng: tuple[str, type[_SearXNG]]
) -> None:
    url, handler = searxng
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", README_AGREES)
    write(lib / "notes" / "backups.md", "# Backups\n\nThe nightly backup job runs on the NAS.\n")
    brain = _brain(home, lib)
    cfg = load(home)
    cfg.web.url, cfg.web.timeout_s = url, 1.0
    save(cfg)
    brain.close()
    run_cli(home, "collect")
    out = json.loads(run_cli(home, "ask", "which port does the web service of shop publish",
                             "--json").stdout)  # fmt: skip
    assert out["answer"] == "8000"
    top = out["facts"][0]
    assert (top["subject"], top["predicate"], top["object"], top["confidence"]) == (
        "service:shop/web", "publishes", "port:8000", "confirmed")  # fmt: skip
    assert {(e["path"], e["line"]) for e in top["evidence"]} == {
        ("shop/compose.yaml", 5), ("shop/README.md", 3)}  # fmt: skip
    assert out["web"]["status"] == "skipped" and not handler.queries  # a fact answered
    assert all(i["confirmed"] is False for i in out["info"])
    # no fact answers: notes (not confirmed) and the web as a possible second source
    out = json.loads(run_cli(home, "ask", "where does the nightly backup run", "--json").stdout)
    assert out["answer"] is None and out["facts"] == []
    assert out["info"][0]["path"] == "notes/backups.md"
    assert out["web"]["status"] == "ok" and out["web"]["results"][0]["url"].startswith("https")
    assert "format=json" in handler.queries[-1]
    text = run_cli(home, "ask", "where does the nightly backup run").stdout
    assert "not confirmed" in text and "possible second source" in text
    for mode, status in (("throttle", "throttled"), ("slow", "unavailable"),
                         ("garbage", "unavailable")):  # fmt: skip
        handler.mode = mode
        out = json.loads(run_cli(home, "ask", "where does the nightly backup run",
                                 "--json").stdout)  # fmt: skip
        assert out["web"]["status"] == status, mode
        assert out["web"]["results"] == []
    text = run_cli(home, "ask", "where does the nightly backup run").stdout
    assert "says nothing about the answer" in text
    handler.queries.clear()
    out = json.loads(run_cli(home, "ask", "backup", "--no-web", "--json").stdout)
    assert out["web"]["status"] == "skipped" and not handler.queries
    out = json.loads(run_cli(home, "ask", "shop web port", "--root", "facts", "--json").stdout)
    assert out["info"] == [] and out["facts"]
    out = json.loads(run_cli(home, "ask", "shop web port", "--root", "info", "--json").stdout)
    assert out["facts"] == [] and out["web"]["status"] == "skipped"


def test_ask_with_web_search_off_or_down(home: Path, tmp_path: Path) -> None:
    brain = _brain(home, write(tmp_path / "lab" / "a.md", "# A\n\ntext\n").parent)
    result = ops.ask(brain, ops.AskInput(question="anything at all"))
    assert result.web.status == "disabled"
    cfg = load(home)
    cfg.web.url = "http://127.0.0.1:9/search"  # nothing listens on the discard port
    save(cfg)
    brain.close()
    out = json.loads(run_cli(home, "ask", "anything at all", "--json").stdout)
    assert out["web"]["status"] == "unavailable"


@pytest.mark.skipif(not (DATA / "awesome-compose.tar.gz").exists(), reason="needs ../shared")
def test_awesome_compose_acceptance(home: Path, tmp_path: Path) -> None:
    """The 39 docker samples as one library: flask-redis publishes 8000, confirmed by its
    compose file and its README, with line numbers; a README that disagrees is audited."""
    with tarfile.open(DATA / "awesome-compose.tar.gz") as tar:
        tar.extractall(tmp_path / "samples", filter="data")
    brain = _brain(home, tmp_path / "samples", "compose")
    report = _collect(brain)
    assert report.libraries[-1].assertions["confirmed"] > 50
    result = ops.ask(brain, ops.AskInput(
        question="which port does the web service of flask-redis publish", web=False))  # fmt: skip
    assert result.answer == "8000"
    top = result.facts[0]
    assert top.confidence == "confirmed" and top.subject == "service:flask-redis/web"
    where = {(e.path, e.line) for e in top.evidence}
    assert ("flask-redis/compose.yaml", 14) in where
    assert ("flask-redis/README.md", 26) in where  # the compose snippet in the README
    assert ("flask-redis/README.md", 57) in where  # its `docker compose ps` row
    both = ops.ask(brain, ops.AskInput(question="which port does flask-redis publish", web=False))
    assert both.answer == "6379, 8000"  # no service named: both of the project's
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    vue = next(c for c in conflicts if c.subject == "service:vuejs/web")
    assert vue.resolved_by == "authority"
    assert {s.object: s.confidence for s in vue.sides}["port:80"] == "contradicted"
    brain.close()


def _published(entry: object) -> str | None:
    """The host port of one compose ``ports`` entry, as the compose spec reads it; None
    when docker picks one (a container port alone)."""
    if isinstance(entry, dict):
        published = entry.get("published")
        return str(published) if published is not None else None
    mapping = str(entry).rpartition("/")[0] or str(entry)  # drop the protocol
    parts = mapping.rsplit(":", 2)  # [ip:]host:container
    return parts[-2] if len(parts) >= 2 else None


def _asking(home: Path, lib: Path) -> tuple[ops.Brain, Callable[[str], ops.facts.AskResult]]:
    """A brain over ``lib``, collected, and :func:`_ask` on it."""
    brain = _brain(home, lib)
    _collect(brain)
    return brain, functools.partial(_ask, brain)


def _ask(brain: ops.Brain, question: str) -> ops.facts.AskResult:
    """``ask`` of the facts alone, without the web."""
    return ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))


def _said(result: ops.facts.AskResult, subject: str) -> set[str]:
    """The ports an answer states: those the answer leads with (before its brackets), which
    must be those of the asked service's assertions still standing; no sibling's may stand."""
    standing = [f for f in result.facts if f.confidence != "contradicted"]
    ports = {f.object.removeprefix("port:") for f in standing if f.predicate == "publishes"}
    ports |= {f"sibling {f.subject}" for f in standing if f.subject != subject}
    if result.answer is not None and set(result.answer.partition(" (")[0].split(", ")) != ports:
        return ports | {f"answer {result.answer}"}
    return ports


@pytest.mark.skipif(not (DATA / "awesome-compose.tar.gz").exists(), reason="needs ../shared")
def test_ask_every_published_port_of_the_samples(home: Path, tmp_path: Path) -> None:
    """Each service of the 39 samples, asked which port it publishes, answers exactly the
    host ports its compose file lists (read here with a YAML parser), never a sibling's; a
    service that lists none publishes no port (one on the host's network says so too)."""
    import yaml

    from brainmap.collectors import project_name

    with tarfile.open(DATA / "awesome-compose.tar.gz") as tar:
        tar.extractall(tmp_path / "samples", filter="data")
    brain = _brain(home, tmp_path / "samples", "compose")
    _collect(brain)
    right, wrong, silent = 0, [], 0
    for path in sorted((tmp_path / "samples").glob("*/compose.y*ml")):
        folder = path.parent.name
        for service, spec in (yaml.safe_load(path.read_text())["services"] or {}).items():
            ports = {p for p in map(_published, (spec or {}).get("ports") or []) if p}
            question = f"which port does the {service} service of {folder} publish"
            result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
            if not ports:
                silent += 1
                assert result.answer and "publishes no port" in result.answer, question
                continue
            said = _said(result, f"service:{project_name(folder)}/{service}")
            if said == ports:  # in the answer, or (one source: no answer) in the facts
                right += 1
            else:
                wrong.append((folder, service, sorted(ports), sorted(said), result.answer))
    assert wrong == []
    assert right == 52 and silent > 20
    # a README that disagrees: the compose file's value leads, the README's is shown
    vue = ops.ask(brain, ops.AskInput(question="which port does the web service of vuejs publish",
                                      web=False, root="facts"))  # fmt: skip
    assert vue.answer is not None and vue.answer.startswith("8080 (vuejs/README.md:")
    assert "says 80;" in vue.answer and "authority: config over narrative" in vue.answer
    # a log line in a README is not what the project publishes
    mc = ops.ask(brain, ops.AskInput(question="which port does minecraft publish", web=False))
    assert mc.answer is not None and mc.answer.startswith("25565 (")
    assert mc.confirmed and "says 25575" in mc.answer
    for question in ("¿qué puerto publica el servicio web de flask-redis?",
                     "quale porta pubblica il servizio web di flask-redis",
                     "quel port publie le service web de flask-redis ?",
                     "qual porta o serviço web do projeto flask-redis publica?",
                     "flask-redis 的 web 服务发布哪个端口"):  # fmt: skip
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        assert result.answer == "8000", question
        assert {f.subject for f in result.facts} == {"service:flask-redis/web"}
    brain.close()


SHOP_REDIS = """\
services:
  redis:
    image: redis
  shop:
    image: example/shop
    ports:
      - "127.0.0.1:9000:9000"
      - target: 9443
        published: "9443"
"""


def test_ask_names_the_service_not_the_words_of_its_project(home: Path, tmp_path: Path) -> None:
    """Services named like a part of their project's name (or like the project itself),
    in nested folders, asked in English, Spanish, Italian and Chinese."""
    lib = tmp_path / "lab"
    write(lib / "stacks" / "redis-shop" / "compose.yaml", SHOP_REDIS)
    write(lib / "stacks" / "redis-shop" / "README.md",
          "# Redis shop\n\nOpen http://localhost:9000 for the shop.\n")  # fmt: skip
    write(lib / "old" / "redis-shop" / "compose.yaml",
          "services:\n  shop:\n    ports: ['7000:9000']\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    shop = "service:stacks/redis-shop/shop"
    for question in (
        "which port does the shop service of stacks/redis-shop publish",
        "¿qué puertos publica el servicio shop de stacks/redis-shop?",
        "quale porta pubblica il servizio shop di stacks/redis-shop",
        "quels ports publie le service shop du projet stacks/redis-shop ?",
        "stacks/redis-shop 的 shop 服务发布哪个端口",
    ):
        result = ask(question)
        assert _said(result, shop) == {"9000", "9443"}, question
        assert result.answer == "9000, 9443 (not confirmed: 9443)", question
    for question in (
        "which port does the redis service of stacks/redis-shop publish",
        "¿qué puerto publica el servicio redis de stacks/redis-shop?",
        "quale porta pubblica il servizio redis di stacks/redis-shop",
        "qual porta o serviço redis de stacks/redis-shop publica?",
        "stacks/redis-shop 的 redis 服务发布哪个端口",
    ):
        result = ask(question)
        assert result.answer == "service redis of stacks/redis-shop publishes no port", question
        assert [f for f in result.facts if f.predicate == "publishes"] == []
    # the project alone, or its services (a plural service word names no service): all of
    # its services' ports, and only its
    for question in ("which ports does stacks/redis-shop publish",
                     "which ports do the stacks/redis-shop services publish",
                     "quali porte pubblicano i servizi di stacks/redis-shop"):  # fmt: skip
        assert _said(ask(question), shop) == {"9000", "9443"}, question
    # the project the whole path names, not the one in another folder
    old = ask("which port does the shop service of old/redis-shop publish")
    assert _said(old, "service:old/redis-shop/shop") == {"7000"} and old.answer is None
    brain.close()


# a project whose services are named otherwise than the images they run (one by digest)
PAPERS = """\
services:
  broker: {image: docker.io/library/redis:7}
  db: {image: "postgres:16@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
  webserver: {image: ghcr.io/example/papers:2.1, ports: ["8010:8000"]}
"""


def test_ask_about_a_service_a_project_lacks_or_calls_otherwise(home: Path, tmp_path: Path) -> None:
    """A service the question calls so, in a project that has none of that name: the answer
    says so and names the project's services, never a sibling's ports (nor those of the
    service of that name in another project). A service goes by its image's name too ("the
    redis of P": the broker running redis), its own name first."""
    lib = tmp_path / "lab"
    write(lib / "papers" / "compose.yaml", PAPERS)
    write(lib / "papers" / "README.md", "Open http://localhost:8000 after starting.\n")
    write(lib / "cache-api" / "compose.yaml", """\
services:
  api: {image: example/api, ports: ["9191:8000"]}
  redis: {image: "registry.local:5000/redis", ports: ["6380:6379"]}
  nginx: {image: nginx, ports: ["8443:443"]}
  proxy: {image: nginx:1.27, ports: ["8081:80"]}
""")  # fmt: skip
    write(lib / "shop" / "compose.yaml", """\
services:
  web: {image: nginx, ports: ['8080:80']}
  db: {image: mariadb}
  otel-collector: {image: otel/opentelemetry-collector, ports: ['4317:4317']}
  reverse-proxy: {image: traefik:3, container_name: edge-router, ports: ['443:443']}
""")  # fmt: skip
    write(lib / "legacy" / "compose.yaml",
          "services:\n  frontend: {image: 'acme/shop-web:2', ports: ['9999:80']}\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    for question in (
        "which port does the db service of cache-api publish",
        "¿qué puerto publica el servicio db de cache-api?",
        "quale porta pubblica il servizio db di cache-api",
        "quel port publie le service db de cache-api ?",
        "which port does the service db of the project cache-api publish",
        "cache-api 的 db 服务发布哪个端口",
    ):
        result = ask(question)
        assert result.answer == (
            "project cache-api has no service called db (its services: api, nginx, proxy, redis)"
        ), question
        assert result.facts == [], question
    broker = ask("which port does the broker service of shop publish")  # papers has one
    assert broker.answer == (
        "project shop has no service called broker "
        "(its services: db, otel-collector, reverse-proxy, web)"
    )
    # words no service goes by, a project's name, a part of a service's name, a container's
    for question, ports in (
        ("¿qué servicio usa el puerto 8080 en shop?", None),
        ("which shop service publishes port 8080", None),
        ("which ports do the running services of shop publish", None),
        ("which port does the service use in shop", None),
        ("quale servizio di shop pubblica la porta 8080", None),
        ("which port does the database service of shop publish", None),
        ("qué puerto publica el servicio principal de shop", None),
        ("which port does the redis stack service of cache-api publish", {"6380"}),
        ("shop的数据库服务发布哪个端口", None),
        ("which port does the collector service of shop publish", {"4317"}),
        ("which port does the edge-router service of shop publish", {"443"}),
        ("which port does shop web publish", {"8080"}),  # not legacy's shop-web image
    ):
        result = ask(question)
        assert "no service called" not in (result.answer or ""), question
        if ports is not None:
            assert {f.object.removeprefix("port:") for f in result.facts} == ports, question
    # by the image it runs, when no service has that name
    for question, subject in (
        ("which port does the redis of papers publish", "broker"),
        ("which port does the postgres service of papers publish", "db"),
    ):
        result = ask(question)
        assert result.answer == f"service {subject} of papers publishes no port", question
        assert result.facts == [], question
    # its own name before another's image: nginx, not proxy that runs nginx
    nginx = ask("which port does the nginx service of cache-api publish")
    assert _said(nginx, "service:cache-api/nginx") == {"8443"}
    # the image's name where a service is named otherwise ("a registry's port is no tag")
    assert _said(ask("which port does redis of cache-api publish"),
                 "service:cache-api/redis") == {"6380"}  # fmt: skip
    # the port in the container (what a proxy in front of it needs), in the languages asked
    for question in ("what container port does the webserver service of papers use",
                     "¿qué puerto interno usa el servicio webserver de papers?",
                     "quel est le port interne du service webserver de papers",
                     "papers 的 webserver 服务的容器端口是什么"):  # fmt: skip
        answer = ask(question).answer or ""
        assert answer.startswith("8000 (in the container; published on the host as 8010;"), question
    # the project alone still answers with all of its ports
    assert ask("which port does papers publish").answer == (
        "8010 (papers/README.md:1 says 8000; overruled by authority: config over narrative)"
    )
    brain.close()


def test_ask_leads_with_the_authoritative_value(home: Path, tmp_path: Path) -> None:
    """A README that disagrees with the compose file loses and is shown; a port the compose
    file does not list is against it; a running container outranks the compose file."""
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", _ps_readme(WEB_ROW, REDIS_ROW))
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    web = ask("which port does the web service of shop publish")
    assert web.answer == (
        "8000 (shop/README.md:6 says 8080; overruled by authority: config over narrative)"
    )
    assert not web.confirmed
    assert [(f.object, f.confidence) for f in web.facts] == [
        ("port:8000", "partial"), ("port:8080", "contradicted")]  # fmt: skip
    redis = ask("which port does the redis service of shop publish")
    assert redis.answer == ("service redis of shop publishes no port (shop/README.md:7 says "
                            "6379; overruled by authority: config over narrative)")  # fmt: skip
    assert _facts(brain)[("service:shop/redis", "publishes", "port:6379")].confidence == (
        "contradicted"
    )
    # the container runs with the port published: runtime over config
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "shop-redis-1", "Image": "redis", "Ports": "0.0.0.0:6379->6379/tcp",
        "Labels": "com.docker.compose.project=shop,com.docker.compose.service=redis"}) + "\n")  # fmt: skip
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(ps))
    redis = ask("which port does the redis service of shop publish")
    assert redis.answer == "6379" and redis.facts[0].resolved_by == "authority"
    brain.close()


# --- hostile and unusual input (review findings) ---------------------------------------------


def test_hostile_config_files_never_stop_a_reindex(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(
        lib / "deep" / "compose.yaml", "services: {web: {ports: " + "[" * 3000 + "]" * 3000 + "}}"
    )
    write(lib / "bomb" / "compose.yaml", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)) + "services: {web: {image: *i}}\n")  # fmt: skip
    write(lib / "odd" / "compose.yaml", 'services:\n  web:\n    image: "\\ud800x"\n'
          "    ports: [{published: [1, 2], target: {a: b}}, 99999, '0:80', '70000-70010:80']\n"
          "    depends_on: {db: {condition: service_started}}\n  7: {}\n")  # fmt: skip
    write(
        lib / "odd" / "README.md",
        '# Odd\n\n```yaml\nservices:\n  web:\n    image: "\\ud800"\n```\n',
    )
    write(lib / "shop" / "compose.yaml", COMPOSE)
    brain = _brain(home, lib)
    brain.close()
    run_cli(home, "reindex", "--no-embed")
    brain = ops.Brain(home)
    facts = _facts(brain)
    assert ("service:shop/web", "publishes", "port:8000") in facts  # the others still count
    assert ("service:odd/web", "depends_on", "service:odd/db") in facts
    hits = ops.search(brain, ops.SearchInput(query="Odd", mode="bm25")).hits
    assert hits and hits[0].path == "odd/README.md"  # the note is searchable, not half-written
    brain.close()


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 8) + "]\n"
    for i in range(8)
) + "services:\n  web:\n    image: nginx\n    ports: ['8080:80']\n"  # fmt: skip


def test_an_alias_bomb_is_a_warning_for_collect_and_doctor(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    bomb = write(lib / "bomb" / "compose.yaml", ALIAS_BOMB)
    write(lib / "shop" / "compose.yaml", COMPOSE)
    brain = _brain(home, lib)
    warning = "bomb/compose.yaml: facts not read: YAML node budget exceeded"

    def said() -> tuple[list[str], list[str]]:
        report = _collect(brain, libraries=["lab"], source=["compose"])
        doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
        return report.libraries[0].notes, doctor["skipped"].items

    notes, doctor = said()
    assert [n for n in notes if n.startswith(warning)] == notes and len(notes) == 1
    assert [i for i in doctor if i.startswith(f"lab:{warning}")] == doctor and len(doctor) == 1
    assert ("service:shop/web", "publishes", "port:8000") in _facts(brain)  # the others count
    assert said() == (notes, doctor)  # not read again, still said
    write(bomb, COMPOSE.replace("8000:8000", "8001:8000"))
    assert said() == ([], [])  # fixed: the warning goes
    assert ("service:bomb/web", "publishes", "port:8001") in _facts(brain)
    # a file named with --from says so too
    outside = write(tmp_path / "elsewhere" / "compose.yaml", ALIAS_BOMB)
    report = _collect(brain, libraries=["lab"], source=["compose"], from_file=str(outside))
    assert [n.partition(": ")[2] for n in report.libraries[0].notes] == [
        warning.partition(": ")[2] + " (200,000 nodes; an alias bomb?)"
    ]
    brain.close()


def test_collect_embeds_the_notes_it_re_read(brain: ops.Brain, library: Path) -> None:
    write(library / "ops" / "backup.md", "# Backups\n\nThe nightly backup runs on the nas.\n")
    write(
        library / "README.md",
        (library / "README.md").read_text() + "\nOpen http://localhost:8000\n",
    )
    report = _collect(brain, libraries=["example"], embed=True)
    assert report.notes == [] and "narrative" in report.libraries[0].ran
    assert brain.store.vectors.pending_count(brain.searcher.model) == 0
    doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
    assert doctor["vectors"].ok and doctor["files:example"].ok
    hits = ops.search(brain, ops.SearchInput(query="nightly backup nas", mode="vector")).hits
    assert hits[0].path == "ops/backup.md"


def test_a_failed_write_inside_a_batch_leaves_nothing_half_written(home: Path) -> None:
    from brainmap.store import EntryRecord, ObservationRecord, Store

    home.mkdir(parents=True)
    with Store(home / "brain.db") as store:
        library_id = store.entries.ensure_library("lab", str(home), "project")
        entry = EntryRecord("e1", library_id, "a.md", "A", "note", None, [], [], None, None,
                            "2026-01-01", "h", 1, 1, 1, "2026-01-01", None, {}, [])  # fmt: skip
        bad = ObservationRecord("entity:a", "is", "x\ud800", "narrative", "frontmatter", "a.md",
                                1, "2026-01-01", None)  # fmt: skip
        with store.db.write():
            with pytest.raises(UnicodeEncodeError):
                store.entries.put_entry(entry, [], new=True, observations=[bad])
            store.entries.mark_indexed(library_id, "2026-01-02")  # the batch goes on
        assert store.entries.entry("e1") is None and store.facts.observation_counts() == {}


def test_secrets_in_hostile_places_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAINMAP_PROBE", "environ-leak-value")
    env = {"DB_PASSWORD": "s3cr3t-env", "API_TOKEN": "tok-123", "TAG": "1.2"}
    found = compose.collect(
        "services:\n  app:\n    image: reg/app:${TAG}-${DB_PASSWORD}\n"
        "    container_name: c-${API_TOKEN}\n    volumes: ['${API_TOKEN}:/x', "
        "'//user:cifs-pass@server/share:/mnt']\n", "p", env)  # fmt: skip
    assert "s3cr3t" not in repr(found) and "tok-123" not in repr(found)
    assert "cifs-pass" not in repr(found)
    assert any(o.object == "image:reg/app:-" for o in found)  # .env fills in ports only
    found = yamlconf.collect(
        "redis:\n  address: redis://:Sup3rPw@redis.internal\n  port: 6379\n"
        "database:\n  args:\n    host: postgres://syn:DbPw1@db/x\n    port: 5432\n", "m", "hs")  # fmt: skip
    assert "Sup3rPw" not in repr(found) and "DbPw1" not in repr(found)
    config = write(tmp_path / "ssh" / "config", "Host evil\n  Include /proc/self/environ\n")
    assert "environ-leak-value" not in repr(sshconfig.collect(config, config.read_text()))
    text = "---\nfacts:\n  - api_token equals abc123xyz\n  - {subject: admin, predicate: is, object: password hunter4}\n---\n# X\n"
    found = narrative.collect(text, parse(text, fallback_title="X"), "p")
    assert "abc123xyz" not in repr(found) and "hunter4" not in repr(found)


def test_ssh_include_inside_a_host_block_and_separators(tmp_path: Path) -> None:
    write(tmp_path / "ssh" / "extra", "Host other\n  User bob\n")
    config = write(tmp_path / "ssh" / "config",
                   "Host a\n  Include extra\n  User alice\nHost = eq\n\tHostName\t10.1.1.1\n")  # fmt: skip
    facts = {
        (o.subject, o.predicate, o.object) for o in sshconfig.collect(config, config.read_text())
    }
    assert ("host:a", "user", "user:alice") in facts  # after the Include, still in `Host a`
    assert ("host:other", "user", "user:bob") in facts
    assert ("host:other", "user", "user:alice") not in facts
    assert ("host:eq", "hostname", "host:10.1.1.1") in facts


def test_projects_overrides_merge_keys_and_container_names(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "a" / "app" / "compose.yaml", "services:\n  web:\n    ports: ['8080:80']\n")
    write(lib / "b" / "app" / "compose.yaml", "services:\n  web:\n    ports: ['9090:80']\n")
    write(lib / "c" / "compose.yaml", "services:\n  web:\n    ports: ['8080:80']\n")
    old = write(lib / "c" / "compose.prod.yaml", "services:\n  web:\n    ports: ['80:80']\n")
    os.utime(old, (1_600_000_000, 1_600_000_000))
    write(
        lib / "d" / "compose.yaml",
        """\
x-base: &base
  image: shared/base
  ports: ['7000:7000']
services:
  web:
    <<: *base
  proxy:
    image: nginx
    container_name: web
""",
    )
    # the project named by .env's COMPOSE_PROJECT_NAME, over the file's name: and the folder
    write(lib / "e" / "compose.yaml", "name: ignored\nservices:\n  web:\n    ports: ['6060:80']\n")
    write(lib / "e" / ".env", "# the project\nCOMPOSE_PROJECT_NAME=Shop_Front\n")
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "d-web-1", "Image": "shared/base", "Ports": "0.0.0.0:7000->7000/tcp",
        "Labels": "com.docker.compose.project=d,com.docker.compose.service=web"}) + "\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(ps))
    facts = _facts(brain)
    assert facts[("service:a/app/web", "publishes", "port:8080")].confidence == "hypothesis"
    assert facts[("service:b/app/web", "publishes", "port:9090")].confidence == "hypothesis"
    assert facts[("service:c/web", "publishes", "port:80")].confidence == "hypothesis"
    assert ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts == []
    assert facts[("service:shop_front/web", "publishes", "port:6060")]
    assert not [f for f in facts if f[0] in ("service:ignored/web", "service:e/web")]
    web = facts[("service:d/web", "publishes", "port:7000")]  # the merge key's ports
    assert web.confidence == "confirmed"  # the label says web: not proxy's container_name
    brain.close()


def test_a_layer_replaces_the_base_files_single_values(home: Path, tmp_path: Path) -> None:
    """An image or container name the override file or a variant sets replaces the base
    file's in that view (docker compose merges one value per service so): no conflict."""
    lib = tmp_path / "lab"
    write(lib / "blog" / "compose.yaml", "services:\n  web: {image: 'nginx:1.24', "
          "container_name: blog-web, ports: ['8080:80'], volumes: ['./site:/srv']}\n")  # fmt: skip
    write(lib / "blog" / "compose.override.yaml", "services:\n  web: {image: 'nginx:1.25', "
          "container_name: blog-web-dev, volumes: ['./dev:/srv']}\n")  # fmt: skip
    write(lib / "blog" / "compose.prod.yaml",
          "services:\n  web: {image: 'nginx:1.26', volumes: !reset []}\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    held = {(f.predicate, f.object): f.layers for k, f in _facts(brain).items()}
    assert held[("image", "image:nginx:1.25")] == ["override"]
    assert held[("image", "image:nginx:1.26")] == ["prod"]
    assert ("image", "image:nginx:1.24") not in held  # replaced in every view
    assert held[("container_name", "container:blog-web")] == ["prod"]  # not in the default
    assert held[("publishes", "port:8080")] == []  # a list: the layers add to it
    # a mount over the same path replaces the base file's, in that view
    assert held[("volume", "volume:./dev")] == ["override"]
    assert ("volume", "volume:./site") not in held  # replaced by both
    assert ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts == []
    brain.close()


def test_what_runs_disputes_the_view_compose_up_reads_not_a_variant(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    write(lib / "blog" / "compose.yaml", "services:\n  web: {image: nginx}\n")
    write(lib / "blog" / "compose.override.yaml", "services:\n  web: {ports: ['8080:80']}\n")
    write(lib / "blog" / "compose.prod.yaml", "services:\n  web: {ports: ['443:80']}\n")
    write(lib / "blog" / "README.md", "Open http://localhost:3000 to see the web service.\n")
    ps = _ps(tmp_path / "ps.json", "blog", "web", "0.0.0.0:9090->80/tcp")
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(ps))
    facts = _facts(brain)
    # docker compose up reads the override file: what runs says otherwise, and wins
    assert facts[("service:blog/web", "publishes", "port:8080")].confidence == "contradicted"
    # the prod variant is applied with -f: neither what runs nor the README is against it,
    # nor is it against them
    assert facts[("service:blog/web", "publishes", "port:443")].confidence != "contradicted"
    assert facts[("service:blog/web", "publishes", "port:443")].against == []
    assert facts[("service:blog/web", "publishes", "port:9090")].confidence != "contradicted"
    brain.close()


def test_a_service_that_extends_another_of_its_file_has_its_ports(
    home: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lab"
    write(lib / "app" / "compose.yaml", """\
services:
  base:
    image: example/app:1
    ports: ['8000:8000']
    environment: [LOG_LEVEL]
    volumes: ['./data:/data', './logs:/logs']
  web:
    extends: {service: base}
    ports: ['8443:8443']
    volumes: ['webdata:/data']
  worker:
    extends: base
    image: example/worker
    ports: !override ['9000:9000']
  remote:
    extends: {file: other.yaml, service: base}
    ports: ['7000:7000']
  loop_a: {extends: loop_b, ports: ['7100:7100']}
  loop_b: {extends: loop_a, ports: ['7200:7200']}
""")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    said: dict[tuple[str, str], set[str]] = {}
    for subject, predicate, obj in _facts(brain):
        said.setdefault((subject.removeprefix("service:app/"), predicate), set()).add(obj)
    assert said[("web", "publishes")] == {"port:8000", "port:8443"}
    assert said[("web", "image")] == {"image:example/app:1"}
    assert said[("web", "env_var")] == {"env:LOG_LEVEL"}
    assert said[("web", "volume")] == {"volume:webdata", "volume:./logs"}  # /data: its own
    assert said[("worker", "publishes")] == {"port:9000"}  # its own list replaces the base's
    assert said[("worker", "image")] == {"image:example/worker"}
    assert said[("remote", "publishes")] == {"port:7000"}  # another file's: not followed
    assert said[("loop_a", "publishes")] == {"port:7100", "port:7200"}
    brain.close()


def test_a_project_renamed_by_its_env_file_takes_its_docs_along(home: Path, tmp_path: Path) -> None:
    """COMPOSE_PROJECT_NAME set in .env later: the next reindex reads the folder's files
    anew (their text did not change), so the README still confirms the compose file."""
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", "services:\n  web: {ports: ['8000:80']}\n")
    write(lib / "shop" / "docs" / "README.md", README_AGREES)
    brain = _brain(home, lib)
    _collect(brain)
    assert _facts(brain)[("service:shop/web", "publishes", "port:8000")].confidence == "confirmed"

    def reindexed() -> tuple[int, dict[str, str]]:
        """Entries read anew, and the confidence of each service's port 8000."""
        report = ops.reindex(brain, ops.ReindexInput(libraries=["lab"], embed=False))
        said = {k[0]: f.confidence for k, f in _facts(brain).items() if k[2] == "port:8000"}
        return report.libraries[0].updated, said

    write(lib / "shop" / ".env", "COMPOSE_PROJECT_NAME=storefront\n")
    assert reindexed() == (1, {"service:storefront/web": "confirmed"})
    write(lib / "shop" / ".env", "COMPOSE_PROJECT_NAME=storefront\nWEB_PORT=1\n")
    assert reindexed() == (0, {"service:storefront/web": "confirmed"})  # no rename
    (lib / "shop" / ".env").unlink()
    assert reindexed() == (1, {"service:shop/web": "confirmed"})
    write(lib / "shop" / "compose.yaml", "name: outlet\nservices:\n  web: {ports: ['8000:80']}\n")
    assert reindexed() == (1, {"service:outlet/web": "confirmed"})
    brain.close()


def test_runtime_and_docs_without_a_declaration_are_partial(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "README.md", README_AGREES)
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "shop-web-1", "Image": "x", "Ports": "0.0.0.0:8000->80/tcp",
        "Labels": "com.docker.compose.project=shop,com.docker.compose.service=web"}) + "\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], from_file=str(ps))  # the source is told from the content
    fact = _facts(brain)[("service:shop/web", "publishes", "port:8000")]
    assert fact.confidence == "partial" and fact.partial == "undeclared"
    text = (
        "# T\n\nGive each service a name and list its ports below.\n| NAME | PORTS |\n|---|---|\n"
    )
    assert narrative.collect(text, parse(text, fallback_title="T"), "p") == []
    brain.close()


@pytest.mark.timeout(60)  # a hang guard, not a speed limit: quadratic would take hours
def test_scrub_is_linear_on_hostile_values() -> None:
    from brainmap.collectors import scrub

    hostile = "a" * 4_000_000 + "@"
    assert scrub(hostile) == hostile  # no credentials to take out, and it returns


def test_scrub_and_secret_names() -> None:
    from brainmap.collectors import Observation, is_secret_name, only_safe, scrub

    assert scrub("postgres://syn:le/akC@db:5432/x?sslmode=require") == "postgres://db:5432"
    assert scrub("smtp://u:p@ss-leak@mail") == "smtp://mail"
    assert scrub("default:leak333@redis") == "redis"
    assert scrub("//u:pa/ss@srv/share") == "//srv/share"
    assert scrub("https://hooks.example.com/services/T0/B0/leak") == "https://hooks.example.com"
    assert scrub("ann@example.org") == "ann@example.org"  # an address, no credentials
    assert scrub("postgres@sha256:abc") == "postgres@sha256:abc"
    pinned = "postgres:16@sha256:" + "0123456789abcdef" * 4  # a tag and a digest
    assert scrub(pinned) == pinned
    assert scrub("user:pw@sha256:0123") == "sha256:0123"  # no digest: credentials
    secret = ["DB_PASS", "MYSQL_PWD", "AWS_ACCESS_KEY_ID", "STRIPE_KEY", "API_TOKEN", "PGPASS"]
    assert all(is_secret_name(n) for n in secret[:5])
    assert not any(is_secret_name(n) for n in ["PORT", "DB_PORT", "TAG", "MONKEY", "HOSTNAME"])
    [obs] = only_safe([Observation("host:a", "listens_on", "port:1", None, "sockets",
                                   {"process": "bad\udcffname"})])  # fmt: skip
    assert obs.props["process"].encode("utf-8")  # storable


def test_tables_in_crlf_and_v1_format_and_nested_project_names(home: Path, tmp_path: Path) -> None:
    text = (
        "# App\r\n\r\n```\r\n$ docker-compose ps\r\n"
        "Name               Command   State   Ports\r\n"
        "-----------------------------------------\r\n"
        "app_my-api_1       run       Up      0.0.0.0:8080->80/tcp\r\n```\r\n"
    )
    found = narrative.collect(text, parse(text, fallback_title="App"), "samples/app")
    assert {(o.subject, o.object) for o in found if o.predicate == "publishes"} == {
        ("service:samples/app/my-api", "port:8080")}  # fmt: skip
    # two services of one compose file on one host port, and docker disagreeing with one:
    # only the disagreeing slot is a conflict
    lib = tmp_path / "lab"
    write(lib / "p" / "compose.yaml",
          "services:\n  web:\n    ports: ['8080:80']\n  api:\n    ports: ['8080:3000']\n")  # fmt: skip
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "p-web-1", "Ports": "0.0.0.0:9090->80/tcp",
        "Labels": "com.docker.compose.project=p,com.docker.compose.service=web"}) + "\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)
    _collect(brain, libraries=["lab"], from_file=str(ps))
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    assert [c.slot for c in conflicts] == ["service:p/web publishes container 80/tcp"]
    assert conflicts[0].resolved_by == "authority"
    brain.close()


def test_a_fifo_named_like_a_compose_file_does_not_hang(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "app" / "README.md", "# App\n\nopen http://localhost:8000\n")
    os.mkfifo(lib / "app" / "compose.yaml")
    brain = _brain(home, lib)
    brain.close()
    proc = run_cli(home, "reindex", "--no-embed")  # a timeout fails the test
    assert "app/README.md" not in proc.stderr
    brain = ops.Brain(home)
    assert ("project:app", "serves", "port:8000") in _facts(brain)
    brain.close()


def test_an_edited_env_file_re_reads_the_compose_file_beside_it(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", 'services:\n  web:\n    ports: ["${WEB_PORT:-80}:80"]\n')
    env = write(lib / "shop" / ".env", "WEB_PORT=9100\n")
    brain = _brain(home, lib)
    _collect(brain)
    assert ("service:shop/web", "publishes", "port:9100") in _facts(brain)
    env.write_text("WEB_PORT=9200\n")
    os.utime(env, (time.time() + 5, time.time() + 5))  # a new stat even within one tick
    _collect(brain)
    facts = _facts(brain)
    assert ("service:shop/web", "publishes", "port:9200") in facts
    assert ("service:shop/web", "publishes", "port:9100") not in facts
    brain.close()
    data = b"".join(p.read_bytes() for p in home.glob("brain.db*"))
    assert b"WEB_PORT=9200" not in data  # the .env is followed, never stored


def test_ask_the_questions_of_the_issue(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "matrix" / "homeserver.yaml", "listeners:\n  - port: 8008\n    type: http\n")
    write(lib / "ops" / "backups.md", "---\nfacts:\n  - backup runs_on host:nas\n---\n# Backups\n")
    brain = _brain(home, lib)
    _collect(brain)
    port = ops.ask(brain, ops.AskInput(question="which port does the homeserver listen on",
                                       root="facts", web=False))  # fmt: skip
    assert [(f.subject, f.object, f.confidence) for f in port.facts] == [
        ("service:matrix/homeserver", "port:8008", "hypothesis")]  # fmt: skip
    assert port.answer is None  # one source: an honest "unconfirmed"
    host = ops.ask(brain, ops.AskInput(question="which host runs the backups", root="facts",
                                       web=False))  # fmt: skip
    assert [(f.subject, f.object) for f in host.facts] == [("entity:backup", "host:nas")]
    assert host.facts[0].evidence[0].path == "ops/backups.md"
    brain.close()


def test_ask_names_services_the_question_words_could_hide(home: Path, tmp_path: Path) -> None:
    """Projects unlike the samples (review findings): services named like function words
    (es, ai) or question words (port, image), a folder whose plural names a service of
    another project, ports only exposed, and a README whose port no service publishes."""
    lib = tmp_path / "lab"
    write(lib / "search" / "compose.yaml", """\
services:
  es: {image: elasticsearch, ports: ["9200:9200"]}
  kibana: {image: kibana, ports: ["5601:5601"]}
  ai: {image: ollama, ports: ["11434:11434"]}
  port: {image: example/portal, ports: ["8081:80"]}
  image: {image: example/thumbs}
""")  # fmt: skip
    write(lib / "search" / "README.md",
          "Elasticsearch: http://localhost:9200\n\nKibana: http://localhost:5601\n")  # fmt: skip
    write(lib / "store" / "compose.yaml",
          "services:\n  web:\n    ports: ['8080:80']\n    expose: ['9113']\n")  # fmt: skip
    write(lib / "store" / "README.md", "Open http://localhost:8080.\n")
    write(lib / "apps" / "store" / "compose.yaml",
          "services:\n  web: {ports: ['7070:80']}\n  app: {expose: ['3000']}\n")  # fmt: skip
    write(lib / "apps" / "store" / "README.md", "Open http://localhost:7070.\n")
    write(lib / "cache" / "compose.yaml",
          "services:\n  api: {ports: ['18000:8000']}\n  db: {ports: ['5432:5432']}\n")  # fmt: skip
    write(lib / "cache" / "README.md", "The API listens on http://localhost:8000.\n")
    # projects named like question words, and a path two folders deep
    write(lib / "server" / "compose.yaml", "services:\n  api: {ports: ['8000:8000']}\n")
    write(lib / "client" / "compose.yaml", "services:\n  api: {ports: ['3000:3000']}\n")
    write(
        lib / "deep" / "er" / "client" / "compose.yaml",
        "services:\n  worker: {ports: ['4100:80']}\n",
    )
    write(lib / "deep" / "worker" / "compose.yaml", "services:\n  worker: {ports: ['4200:80']}\n")
    write(lib / "infra" / "apps" / "shop" / "compose.yaml",
          "services:\n  web: {ports: ['6060:80']}\n  app: {image: example/app}\n")  # fmt: skip
    write(lib / "shop" / "compose.yaml", "services:\n  web: {ports: ['5050:80']}\n")
    brain = _brain(home, lib)
    _collect(brain)

    def said(question: str, subject: str) -> tuple[set[str], str | None]:
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        return _said(result, subject), result.answer

    for question in ("which port does the es service of search publish",
                     "¿qué puerto publica el servicio es de search?",
                     "quale porta pubblica il servizio es di search",
                     "search 的 es 服务发布哪个端口"):  # fmt: skip
        assert said(question, "service:search/es") == ({"9200"}, "9200"), question
    assert said("which port does the ai service of search publish", "service:search/ai")[0] == {
        "11434"
    }
    # "port" and "image" ask the question unless a word says they are names
    assert said("kibana port in search?", "service:search/kibana") == ({"5601"}, "5601")
    assert said("which port does the kibana service of search publish",
                "service:search/kibana") == ({"5601"}, "5601")  # fmt: skip
    assert said("which port does the port service of search publish",
                "service:search/port")[0] == {"8081"}  # fmt: skip
    image = ops.ask(brain, ops.AskInput(question="what image does the kibana service of search use",
                                        web=False, root="facts"))  # fmt: skip
    assert [(f.subject, f.object) for f in image.facts] == [("service:search/kibana",
                                                              "image:kibana")]  # fmt: skip
    # "port" asks unless a kind word says it is a name, however the question is put
    for question in ("which port does kibana publish", "which service publishes port 5601"):
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        assert {f.subject for f in result.facts if f.predicate == "publishes"} == {
            "service:search/kibana"
        }, question
    # "project" beside a name says what it names: it asks nothing about projects
    assert said("which port does the kibana service of the search project publish",
                "service:search/kibana") == ({"5601"}, "5601")  # fmt: skip
    # a project named like a question word captures no question that asks with that word
    for question in ("which port does api publish", "what is the api port"):
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        assert {f.subject for f in result.facts if f.predicate == "publishes"} == {
            "service:server/api", "service:client/api", "service:cache/api"}, question  # fmt: skip
    # a question word that is not read as a name still tells two subjects apart
    assert said("which port does the api service of server publish",
                "service:server/api")[0] == {"8000"}  # fmt: skip
    # a service named alone is every project's, however deep its folder
    result = ops.ask(brain, ops.AskInput(question="which port does worker publish", web=False,
                                         root="facts"))  # fmt: skip
    assert {f.object for f in result.facts if f.predicate == "publishes"} == {"port:4100",
                                                                              "port:4200"}  # fmt: skip
    # any tail of a project's path names it
    assert said("which port does the web service of apps/shop publish",
                "service:infra/apps/shop/web")[0] == {"6060"}  # fmt: skip
    # the path apps/store names that project; its "apps" does not name its app service
    assert said("which port does the web service of apps/store publish",
                "service:apps/store/web") == ({"7070"}, "7070")  # fmt: skip
    assert said("which port does the web service of store publish",
                "service:store/web") == ({"8080"}, "8080")  # fmt: skip
    # asked for "the port", a service's published port, not the one it only exposes
    for question in ("what is the port of the web service of store", "web port in store?"):
        assert said(question, "service:store/web") == ({"8080"}, "8080"), question
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        assert "exposes" not in {f.predicate for f in result.facts}, question
    # asked what it exposes, both (people say "exposed" of a published port too)
    exposed = ops.ask(brain, ops.AskInput(question="which ports does the web service of store "
                                          "expose", web=False, root="facts"))  # fmt: skip
    assert exposed.answer is not None and exposed.answer.startswith("8080, 9113")
    # the README's port no service publishes loses to the compose file, which leads, and
    # the disagreement is told as the project's, beside each service's own port
    ports, answer = said("which port does the api service of cache publish", "service:cache/api")
    assert ports == {"18000"}
    assert answer == ("18000 (cache/README.md:1 says project cache serves port 8000; "
                      "overruled by authority: config over narrative)")  # fmt: skip
    ports, answer = said("which port does the db service of cache publish", "service:cache/db")
    assert ports == {"5432"} and answer is not None and answer.startswith("5432 (")
    brain.close()


def test_ask_merges_compose_files_as_docker_compose_does(home: Path, tmp_path: Path) -> None:
    """An override file adds ports unless it tags them ``!override`` or ``!reset``; a
    variant (compose.prod.yaml) applies with ``-f`` only, so it is told beside the answer
    unless the question names it; a container port docker publishes on a host port it
    picks is published, not "no port"."""
    lib = tmp_path / "lab"
    write(lib / "blog" / "compose.yaml", """\
services:
  web: {image: nginx, ports: ["8080:80"]}
  api: {image: example/api, ports: ["3000:3000"]}
  admin: {image: example/admin, ports: ["9000:9000"]}
  worker: {image: example/worker}
""")  # fmt: skip
    write(lib / "blog" / "compose.override.yaml", """\
services:
  web:
    ports: !override
      - "8888:80"
  api:
    ports: ["3001:3001"]
  admin:
    ports: !reset []
""")  # fmt: skip
    write(lib / "blog" / "compose.prod.yaml", """\
services:
  web: {ports: ['80:80', '443:443']}
  api: {ports: ['3443:3443']}
  grafana: {image: grafana/grafana, ports: ['3030:3000']}
""")  # fmt: skip
    # a variant that replaces the base file's list itself
    write(lib / "shop" / "compose.yaml", "services:\n  store: {ports: ['7000:7000']}\n")
    write(lib / "shop" / "compose.staging.yaml",
          "services:\n  store:\n    ports: !override ['7100:7000']\n")  # fmt: skip
    write(lib / "shop" / "README.md", "The store: http://localhost:7000, in staging "
          "http://localhost:7100.\n")  # fmt: skip
    write(lib / "blog" / "README.md", "Open http://localhost:8888; the API answers on "
          "http://localhost:3000 and http://localhost:3001.\n")  # fmt: skip
    write(lib / "dice" / "docker-compose.yml",
          "services:\n  roller: {image: example/dice, ports: ['8000']}\n")  # fmt: skip
    # a project named like its service, and two base files in one folder: docker reads
    # compose.yaml only
    write(lib / "api" / "compose.yaml",
          "services:\n  api: {ports: ['5050:5000']}\n  worker: {ports: ['8100:8100']}\n")  # fmt: skip
    write(lib / "api" / "docker-compose.yml", "services:\n  api: {ports: ['6060:5000']}\n")
    write(lib / "api" / "README.md", "Health: http://localhost:5050/health, and :8100 too.\n")
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    def answer(question: str) -> str | None:
        return ask(question).answer

    # docker compose up: the override file's 8888 replaces the base file's 8080; the variant
    # is told aside, one note for the file
    web = answer("which port does the web service of blog publish")
    assert web == "8888 (blog/compose.prod.yaml, applied with -f, says 80, 443)", web
    assert answer("which port does the api service of blog publish") == (
        "3000, 3001 (blog/compose.prod.yaml, applied with -f, says 3443)"
    )
    # -f compose.yaml -f compose.prod.yaml: the base file and the variant, not the override
    assert answer("which port does the api service of blog publish in prod") == (
        "3000, 3443 (not confirmed: 3443; blog/compose.override.yaml, not read with -f, says 3001)"
    )
    # the prod view reads the base file's lists the override file replaced
    prod = ask("which port does the web service of blog publish in prod")
    assert prod.answer is None  # the compose files alone say so: the facts are the answer
    assert sorted((f.object, f.confidence, f.layers) for f in prod.facts) == [
        ("port:443", "partial", ["prod"]), ("port:80", "partial", ["prod"]),
        ("port:8080", "partial", ["prod"]), ("port:8888", "confirmed", ["override"]),
    ]  # fmt: skip
    admin = ask("which port does the admin service of blog publish in prod")  # one source
    assert [(f.object, f.layers) for f in admin.facts] == [("port:9000", ["prod"])]
    # a variant's own !override: the base file's 7000 is not in its view, nor told aside
    assert answer("which port does the store service of shop publish in staging") == "7100"
    assert answer("which port does the store service of shop publish") == (
        "7000 (shop/compose.staging.yaml, applied with -f, says 7100)"
    )
    # a variant another project has is not this one's view
    assert answer("which port does the store service of shop publish in prod") == (
        "7000 (shop/compose.staging.yaml, applied with -f, says 7100)"
    )
    # declared by the variant alone: what it says, not "publishes no port"
    assert answer("which port does the grafana service of blog publish") == (
        "blog/compose.prod.yaml, applied with -f, says 3030"
    )
    assert answer("which port does the admin service of blog publish") == (
        "service admin of blog publishes no port"
    )
    # one source says it (no README): unconfirmed, so the fact is the answer
    roller = ask("which port does the roller service publish")
    assert roller.answer is None
    assert [(f.object, f.published) for f in roller.facts] == [("port:8000", "random")]
    assert answer("which port does the worker service of blog publish") == (
        "service worker of blog publishes no port"
    )
    assert answer("which port does the api service of api publish") == "5050"
    # "the api service" is every service called api, not project api's other services; the
    # answer says whose is which
    assert answer("which port does the api service publish") == (
        "3000, 3001, 5050 (of api: 5050; of blog: 3000, 3001; blog/compose.prod.yaml, applied "
        "with -f, says 3443)"
    )
    # "production" names the prod variant
    assert answer("which port does the api service of blog publish in production") == (
        "3000, 3443 (not confirmed: 3443; blog/compose.override.yaml, not read with -f, says 3001)"
    )
    # what runs was started with some files: a port seen running is in the answer
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "blog-api-1", "Image": "example/api",
        "Ports": "0.0.0.0:3000->3000/tcp, 0.0.0.0:3443->3443/tcp",
        "Labels": "com.docker.compose.project=blog,com.docker.compose.service=api"}) + "\n")  # fmt: skip
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(ps))
    running = answer("which port does the api service of blog publish")
    assert running is not None and running.startswith("3000, 3001, 3443"), running
    assert "applied with -f" not in running and "ps.json" not in running
    # the host port docker picked for a random mapping confirms it, no conflict
    picked = write(tmp_path / "dice.json", json.dumps({
        "Names": "dice-roller-1", "Image": "example/dice", "Ports": "0.0.0.0:49153->8000/tcp",
        "Labels": "com.docker.compose.project=dice,com.docker.compose.service=roller"}) + "\n")  # fmt: skip
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(picked))
    roller = ask("which port does the roller service publish")
    assert {(f.object, f.confidence, bool(f.against)) for f in roller.facts} == {
        ("port:8000", "confirmed", False), ("port:49153", "partial", False)}  # fmt: skip
    # web running as docker compose up starts it: what the prod view declares instead is
    # not contradicted by it
    web_ps = _ps(tmp_path / "web.json", "blog", "web", "0.0.0.0:8888->80/tcp")
    _collect(brain, libraries=["lab"], source=["runtime"], from_file=str(web_ps))
    assert answer("which port does the web service of blog publish") == (
        "8888 (blog/compose.prod.yaml, applied with -f, says 80, 443)"
    )
    prod = ask("which port does the web service of blog publish in prod")
    assert prod.answer == "80, 443, 8080, 8888 (not confirmed: 80, 443, 8080)"
    assert not [f for f in prod.facts if f.confidence == "contradicted"]
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    assert not [c for c in conflicts if c.subject == "service:blog/web"], conflicts
    brain.close()


def test_compose_include_syntaxes() -> None:
    text = """\
include:
  - db/compose.yaml
  - path: ./cache/compose.yaml
    env_file: cache.env
  - path:
      - compose.jobs.yaml
      - ${EXTRA:-extra}/compose.yaml
services:
  web: {image: nginx}
"""
    assert compose.project_of(text, {}) == (None, [
        ([ "db/compose.yaml"], []), (["./cache/compose.yaml"], ["cache.env"]),
        (["compose.jobs.yaml", "extra/compose.yaml"], []),
    ])  # fmt: skip
    assert compose.project_of(text, {"EXTRA": "more"})[1][-1].paths[-1] == "more/compose.yaml"
    listed = "include:\n  - path: a/compose.yaml\n    env_file: [a/one.env, a/two.env]\n"
    assert compose.project_of(listed, {})[1] == [(["a/compose.yaml"], ["a/one.env", "a/two.env"])]
    assert compose.project_of("name: x\nservices:\n  web: {image: nginx}\n", {}) == ("x", [])


def test_an_included_compose_file_is_part_of_its_includers_project(
    home: Path, tmp_path: Path
) -> None:
    """docker compose copies an included file's services into the including project: a
    service in a compose file of a subfolder (whose own base file names another project), or
    in a file beside the includer whose name would make it a variant, is the includer's, in
    the view ``compose up`` reads. The subfolder's own files (its base file, the override file
    beside it) stay its project's. Adding or taking out the include is followed at the next
    reindex, as a fresh index reads the same files."""
    lib = tmp_path / "lab"
    web = "services:\n  web:\n    image: nginx\n    ports: ['8080:80']\n"
    includer = "include:\n  - db/compose.pg.yaml\n  - path: compose.cache.yaml\n" + web
    write(lib / "shop" / "compose.yaml", web)
    write(lib / "shop" / "db" / "compose.yaml",
          "name: dbstack\nservices:\n  adminer:\n    ports: ['8081:8080']\n")  # fmt: skip
    write(lib / "shop" / "db" / "compose.override.yaml",
          "services:\n  adminer:\n    ports: !override ['9999:8080']\n")  # fmt: skip
    write(lib / "shop" / "db" / "compose.pg.yaml",
          "services:\n  postgres:\n    image: postgres:16\n    ports: ['5432:5432']\n")  # fmt: skip
    write(lib / "shop" / "db" / "README.md", "# Database admin\n\nAdminer for the shop.\n")
    write(lib / "shop" / "compose.cache.yaml",
          "services:\n  redis:\n    image: redis:7\n    ports: ['6379:6379']\n")  # fmt: skip
    write(lib / "shop" / "README.md",
          "# Shop\n\n```yaml\nservices:\n  postgres:\n    ports: ['5433:5432']\n```\n")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    def variants() -> None:  # without the include: variants of their folders' projects
        pg = ask("which port does the postgres service of dbstack publish")
        assert pg.answer == "shop/db/compose.pg.yaml, applied with -f, says 5432"
        redis = ask("which port does the redis service of shop publish")
        assert redis.answer == "shop/compose.cache.yaml, applied with -f, says 6379"

    variants()
    write(lib / "shop" / "compose.yaml", includer)  # the include added
    ops.reindex(brain, ops.ReindexInput(embed=False))
    postgres = ask("which port does the postgres service of shop publish")
    assert _said(postgres, "service:shop/postgres") == {"5432"}
    assert postgres.answer == (  # the README of the including project, outranked
        "5432 (shop/README.md:6 says 5433; overruled by authority: config over narrative)"
    )
    redis = ask("which port does the redis service of shop publish")
    assert _said(redis, "service:shop/redis") == {"6379"}
    assert redis.answer is None  # declared only, and no variant's aside
    every = ask("which ports does shop publish")
    assert {f.object for f in every.facts if f.confidence != "contradicted"} == {
        "port:8080", "port:5432", "port:6379",
    }  # fmt: skip
    adminer = ask("which port does the adminer service of dbstack publish")
    assert _said(adminer, "service:dbstack/adminer") == {"9999"}  # its own override file's
    _as_a_fresh_index(brain, lib, tmp_path / "fresh")
    # an edit of the subfolder's own base file renames nothing: its README is not read again
    write(lib / "shop" / "db" / "compose.yaml",
          "name: dbstack\nservices:\n  adminer:\n    ports: ['8082:8080']\n")  # fmt: skip
    report = ops.reindex(brain, ops.ReindexInput(libraries=["lab"], embed=False)).libraries[0]
    assert (report.updated, report.unchanged) == (0, 2)

    write(lib / "shop" / "compose.yaml", web)  # and taken out again
    ops.reindex(brain, ops.ReindexInput(embed=False))
    variants()
    assert ("service:shop/postgres", "publishes", "port:5432") not in _facts(brain)
    _as_a_fresh_index(brain, lib, tmp_path / "fresh-again")
    brain.close()


def _as_a_fresh_index(brain: ops.Brain, lib: Path, home: Path) -> None:
    """The brain's facts are those a new index of the same files has."""
    fresh = _brain(home, lib)
    _collect(fresh)
    assert _facts(fresh).keys() == _facts(brain).keys()
    fresh.close()


def test_a_service_extending_one_of_another_file(home: Path, tmp_path: Path) -> None:
    """``extends: {file: ..., service: ...}`` merges the other file's service in, as docker
    compose does: its ports (cited at that file's line), through further extends of that file
    (relative to it). The other file need not be a compose file the scan reads: an edit of it,
    its removal and its coming back are followed at the next reindex, as a fresh index reads
    the same files. One that cannot be read (outside the library, gone) makes what the
    service publishes unknown, never "publishes no port"."""
    lib = tmp_path / "lab"
    write(lib / "shared" / "base.yaml", """\
services:
  pybase:
    image: python:3.12
    ports: ["8400:8000"]
  worker:
    extends: {file: ./more/jobs.yml, service: jobs}
""")  # fmt: skip
    write(lib / "shared" / "more" / "jobs.yml",
          "services:\n  jobs:\n    expose: ['7000']\n    ports: ['7001:7000']\n")  # fmt: skip
    write(lib / "checkout" / "compose.yaml", """\
services:
  payments:
    extends: {file: ../shared/base.yaml, service: pybase}
  cron:
    extends:
      file: ../shared/base.yaml
      service: worker
    ports: ["7002:7000"]
  cart:
    image: example/cart
    ports: ["8300:80"]
  legacy:
    extends: {file: ../../outside.yaml, service: web}
  partial:
    extends: {file: ../../outside.yaml, service: web}
    ports: ["82:80"]
  typo:
    extends: {file: ../shared/base.yaml, service: nosuch}
  looped:
    extends: looped2
  looped2:
    extends: {service: looped}
  scalar: just-a-string
  odd:
    extends: scalar
""")  # fmt: skip
    brain = _brain(home, lib)
    _collect(brain)

    ask = functools.partial(_ask, brain)

    payments = ask("which port does the payments service of checkout publish")
    assert _said(payments, "service:checkout/payments") == {"8400"}
    [fact] = payments.facts
    assert [(e.path, e.line) for e in fact.evidence] == [("shared/base.yaml", 4)]
    # through the base file's own extends, relative to it; the service's own list adds up
    cron = ask("which port does the cron service of checkout publish")
    assert _said(cron, "service:checkout/cron") == {"7001", "7002"}
    assert _said(ask("which port does the cart service of checkout publish"),
                 "service:checkout/cart") == {"8300"}  # fmt: skip
    # what docker compose would refuse (a file outside, a service the file lacks, a loop, a
    # service that is a string); and a service whose own ports are known, not what it extends
    for service, why in (
        ("legacy", "it extends a service of ../../outside.yaml, which cannot be read"),
        ("typo", "it extends service nosuch of shared/base.yaml, which has no such service"),
        ("looped", "it extends services that extend one another in a loop"),
        ("odd", "it extends scalar, which is no service"),
    ):
        answer = ask(f"which port does the {service} service of checkout publish").answer
        assert answer == f"service {service} of checkout: not known ({why})"
    partial = ask("which port does the partial service of checkout publish")
    assert partial.answer == (
        "82 (service partial of checkout: it extends a service of ../../outside.yaml, which "
        "cannot be read; what that adds is not known; not confirmed: 82)"
    )
    _as_a_fresh_index(brain, lib, tmp_path / "fresh")

    write(lib / "shared" / "base.yaml",
          "services:\n  pybase:\n    image: python:3.12\n    ports: ['8401:8000']\n")  # fmt: skip
    ops.reindex(brain, ops.ReindexInput(embed=False))
    payments = ask("which port does the payments service of checkout publish")
    assert _said(payments, "service:checkout/payments") == {"8401"}
    cron = ask("which port does the cron service of checkout publish")  # worker is gone
    assert _said(cron, "service:checkout/cron") == {"7002"}
    _as_a_fresh_index(brain, lib, tmp_path / "fresh-edited")

    (lib / "shared" / "base.yaml").unlink()
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert ask("which port does the payments service of checkout publish").answer == (
        "service payments of checkout: not known (it extends a service of "
        "../shared/base.yaml, which cannot be read)"
    )
    _as_a_fresh_index(brain, lib, tmp_path / "fresh-gone")

    write(lib / "shared" / "base.yaml",
          "services:\n  pybase:\n    ports: ['8402:8000']\n")  # fmt: skip
    report = ops.reindex(brain, ops.ReindexInput(embed=False)).libraries[0]
    assert report.updated == 0  # the compose file is read again; no markdown is
    payments = ask("which port does the payments service of checkout publish")
    assert _said(payments, "service:checkout/payments") == {"8402"}
    _as_a_fresh_index(brain, lib, tmp_path / "fresh-back")
    brain.close()


def test_config_files_read_by_older_collectors_are_read_again(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index whose config files older collectors read (a version behind) reads every
    config file again at the next reindex, and no markdown; then it is current, unless one
    could not be read (it is gone or unreadable meanwhile)."""
    from brainmap.collectors import CONFIG_COLLECTORS

    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", "services:\n  web: {ports: ['8080:80']}\n")
    write(lib / "blog" / "compose.yaml", "services:\n  ghost: {ports: ['2368:2368']}\n")
    write(lib / "shop" / "README.md", "# Shop\n\nThe shop.\n")
    for path in lib.rglob("*.*"):  # written long before: no racy timestamps read again
        os.utime(path, (time.time() - 60, time.time() - 60))
    brain = _brain(home, lib)
    _collect(brain)
    [library_id] = brain.store.entries.library_ids(["lab"]).values()
    assert brain.store.entries.library_collectors(library_id) == CONFIG_COLLECTORS
    brain.store.entries.mark_collected(library_id, CONFIG_COLLECTORS - 1)
    reindex = ops.ReindexInput(libraries=["lab"], embed=False)
    report = ops.reindex(brain, reindex).libraries[0]
    assert (report.code_files, report.updated, report.unchanged) == (2, 0, 1)
    assert brain.store.entries.library_collectors(library_id) == CONFIG_COLLECTORS
    assert ops.reindex(brain, reindex).libraries[0].code_files == 0
    # one that cannot be read then: what it said goes, it says why, and the next reindex
    # reads it (and it alone) again
    brain.store.entries.mark_collected(library_id, CONFIG_COLLECTORS - 1)
    read_found = indexer.read_found

    def failing(root: Path, found: Any, limit: int) -> bytes:
        if found.rel == "blog/compose.yaml":
            raise PermissionError(13, "Permission denied")
        return read_found(root, found, limit)

    def ghost() -> set[str]:
        return {o.object for o in brain.store.facts.observations(library_id)
                if o.subject == "service:blog/ghost"}  # fmt: skip

    monkeypatch.setattr(indexer, "read_found", failing)
    report = ops.reindex(brain, reindex).libraries[0]
    assert report.code_files == 1
    assert [(path, why) for _, path, why in brain.store.entries.skipped()] == [
        ("blog/compose.yaml", "cannot be read: Permission denied")
    ]
    assert ghost() == set()
    monkeypatch.undo()
    assert ops.reindex(brain, reindex).libraries[0].code_files == 1
    assert "port:2368" in ghost() and brain.store.entries.skipped() == []
    assert brain.store.entries.library_collectors(library_id) == CONFIG_COLLECTORS
    brain.close()


def test_an_override_file_replaces_what_an_included_file_says(home: Path, tmp_path: Path) -> None:
    """The override file (or a file COMPOSE_FILE names after the base file) replaces what a
    file the base file includes says, as docker compose merges them: its ``!override`` list
    and its single values win, and no conflict is left between them. A base file of includes
    only reads its ``.env`` all the same (``COMPOSE_FILE``, ``COMPOSE_PROFILES``)."""
    lib = tmp_path / "lab"
    for project, env in (("lima", ""), ("mike", "COMPOSE_FILE=compose.yaml:compose.prod.yaml\n")):
        write(lib / project / "compose.yaml",
              "include: [db/compose.yaml]\nservices:\n  web: {ports: ['8080:80']}\n")  # fmt: skip
        write(lib / project / "db" / "compose.yaml",
              "services:\n  db: {image: 'postgres:15', ports: ['5432:5432']}\n")  # fmt: skip
        layer = "override" if not env else "prod"
        write(lib / project / f"compose.{layer}.yaml",
              "services:\n  db: {image: 'postgres:16', ports: !override ['15432:5432']}\n")  # fmt: skip
        write(lib / project / "README.md", f"# {project}\n\nhttp://localhost:15432/\n")
        if env:
            write(lib / project / ".env", env)
    # a base file of includes only: its .env still says what docker compose up reads and starts
    write(lib / "hub" / "compose.yaml", "include: [app/compose.yaml, tools/compose.yaml]\n")
    write(lib / "hub" / "app" / "compose.yaml", "services:\n  web: {ports: ['8180:80']}\n")
    write(lib / "hub" / "tools" / "compose.yaml", "services:\n  adminer: {ports: ['8181:8080'], "
          "profiles: [tools]}\n  debug: {ports: ['8182:80'], profiles: [debug]}\n")  # fmt: skip
    write(lib / "hub" / "compose.extra.yaml", "services:\n  mailhog: {ports: ['8125:8025']}\n")
    write(lib / "hub" / ".env",
          "COMPOSE_PROFILES=tools\nCOMPOSE_FILE=compose.yaml:compose.extra.yaml\n")  # fmt: skip
    write(lib / "hub" / "README.md",
          "# hub\n\n" + " ".join(f"http://localhost:{p}/" for p in (8180, 8181, 8182, 8125)))  # fmt: skip
    brain, ask = _asking(home, lib)
    assert ask("which ports does the hub project publish").answer == (
        "8125, 8180, 8181, 8182 (debug only with --profile debug)"
    )
    for project in ("lima", "mike"):
        port = ask(f"which port does the db service of {project} publish")
        assert port.answer == "15432", (project, port.answer)
        assert not [f for f in port.facts if f.confidence == "contradicted" or f.against]
        image = ask(f"which image does the db service of {project} use")
        assert [f.object for f in image.facts] == ["image:postgres:16"], project
    brain.close()


def test_two_folders_of_one_project_name_still_disagree(home: Path, tmp_path: Path) -> None:
    """Two folders whose compose files give one project name are two declarations: what they
    say differently is a conflict (a folder's own files, and those they include, are one)."""
    lib = tmp_path / "lab"
    write(lib / "a" / "compose.yaml", "name: shop\nservices:\n  web: {image: 'nginx:1.0'}\n")
    write(lib / "b" / "compose.yaml", "name: shop\nservices:\n  web: {image: 'nginx:2.0'}\n")
    brain, ask = _asking(home, lib)
    images = ask("which image does the web service of shop use").facts
    assert {f.object for f in images} == {"image:nginx:1.0", "image:nginx:2.0"}
    assert all(f.against for f in images)
    brain.close()


def test_an_included_file_is_filled_in_as_docker_compose_does(home: Path, tmp_path: Path) -> None:
    """A file a base file includes is filled in by the including file's variables, over
    those of its include's env files (its folder's ``.env`` unless the include names
    others), as docker compose's loader merges them. An edit of an env file that is no
    ``.env`` (the scan does not read it) is followed at the next reindex, as a fresh index
    reads the same files."""
    lib = tmp_path / "lab"
    write(lib / "orbit" / "compose.yaml", "include:\n  - observability/compose.yaml\n"
          "services:\n  api: {ports: ['8000:8000']}\n")  # fmt: skip
    write(lib / "orbit" / ".env", "GRAFANA_PORT=3777\n")
    write(lib / "orbit" / "observability" / "compose.yaml", """\
services:
  grafana: {ports: ["${GRAFANA_PORT:-3300}:3000"]}
  loki: {ports: ["${LOKI_PORT:-9}:3100"]}
""")  # fmt: skip
    write(lib / "orbit" / "observability" / ".env", "GRAFANA_PORT=3999\nLOKI_PORT=3100\n")
    write(lib / "ledger" / "compose.yaml", "include:\n  - path: ./db/compose.yaml\n"
          "    env_file: ./db/db.env\nservices:\n  web: {ports: ['80:80']}\n")  # fmt: skip
    write(lib / "ledger" / "db" / "compose.yaml",
          "services:\n  pg: {ports: ['${PG_PORT:-5432}:5432']}\n")  # fmt: skip
    write(lib / "ledger" / "db" / "db.env", "PG_PORT=5499\n")
    write(lib / "ledger" / "db" / ".env", "PG_PORT=5498\n")
    brain = _brain(home, lib)
    _collect(brain)

    def said(service: str, project: str) -> set[str]:
        question = f"which port does the {service} service of {project} publish"
        result = ops.ask(brain, ops.AskInput(question=question, web=False, root="facts"))
        return _said(result, f"service:{project}/{service}")

    assert said("grafana", "orbit") == {"3777"}  # the includer's .env wins
    assert said("loki", "orbit") == {"3100"}  # what only the included folder's .env sets
    assert said("pg", "ledger") == {"5499"}  # the env_file named, not the folder's .env
    _as_a_fresh_index(brain, lib, tmp_path / "fresh")
    write(lib / "ledger" / "db" / "db.env", "PG_PORT=5500\n")
    write(lib / "orbit" / ".env", "GRAFANA_PORT=3778\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert said("pg", "ledger") == {"5500"}
    assert said("grafana", "orbit") == {"3778"}
    _as_a_fresh_index(brain, lib, tmp_path / "fresh-edited")
    brain.close()


def test_services_on_the_hosts_or_anothers_network(home: Path, tmp_path: Path) -> None:
    """``network_mode: host``: docker drops the port mappings and the service listens on the
    host at its container's ports; one declaring none publishes none, and listens on whatever
    it opens there. ``network_mode: service:X`` publishes none: it is reached through X's."""
    lib = tmp_path / "lab"
    write(lib / "seedbox" / "compose.yaml", """\
services:
  gluetun: {image: qmcgaw/gluetun, ports: ["8085:8085", "6881:6881/udp"]}
  qbittorrent: {image: linuxserver/qbittorrent, network_mode: "service:gluetun"}
  homeassistant: {image: home-assistant, network_mode: host, ports: ["8124:8123"]}
  pihole: {image: pihole/pihole, network_mode: host}
""")  # fmt: skip
    brain, ask = _asking(home, lib)
    home_assistant = ask("which port does the homeassistant service of seedbox publish")
    assert _said(home_assistant, "service:seedbox/homeassistant") == {"8123"}
    for service, why in (
        ("pihole", "it runs on the host's network, on whatever ports it opens there"),
        ("qbittorrent", "it runs on the network of service gluetun: reached on the ports "
         "that one publishes"),
    ):  # fmt: skip
        answer = ask(f"which port does the {service} service of seedbox publish").answer
        assert answer == f"service {service} of seedbox publishes no port ({why})"
    brain.close()


def test_services_started_only_with_a_profile(home: Path, tmp_path: Path) -> None:
    """A service with ``profiles`` is not started by ``docker compose up``: its facts and the
    answer say which profile starts it. Its profiles add up across the files docker compose
    up reads (its own, those of a service it extends, the override file's); a profile the
    project's ``.env`` starts (``COMPOSE_PROFILES``, ``*``; not an included folder's) starts
    it. A ``.env`` value is read as docker compose reads it (a `` #`` starts a comment)."""
    lib = tmp_path / "lab"
    write(lib / "tools" / "compose.yaml", """\
services:
  app: {image: example/app, ports: ["${APP_PORT}:80"]}
  adminer: {image: adminer, ports: ["8081:8080"], profiles: [debug]}
  base: {image: example/base, profiles: [debug]}
  mailhog: {extends: base, image: mailhog/mailhog, ports: ["8025:8025"], profiles: [mail]}
  secret: {image: example/s, ports: ["8026:80"], profiles: ["${API_TOKEN}"]}
""")  # fmt: skip
    write(lib / "tools" / "compose.override.yaml", "services:\n  app: {profiles: [frontend]}\n")
    write(lib / "tools" / ".env", "APP_PORT=8080 # the app\nAPI_TOKEN=hunter2\n")
    write(lib / "tools" / "README.md", "# tools\n\nOpen http://localhost:8081 for adminer.\n")
    write(lib / "lab2" / "compose.yaml", """\
include: [db/compose.yaml]
services:
  docs: {image: example/docs, ports: ["9081:80"], profiles: [docs]}
  web: {image: nginx, ports: ["9080:80"], profiles: [debug]}
  adminer: {image: adminer, ports: ["9082:8080"]}
""")  # fmt: skip
    write(lib / "lab2" / "compose.override.yaml", "services:\n  web: {profiles: [tools]}\n")
    write(lib / "lab2" / ".env", "COMPOSE_PROFILES=docs,tools  # all but debug\n")
    write(lib / "lab2" / "db" / "compose.yaml",
          "services:\n  pgadmin: {image: dpage/pgadmin4, ports: ['5050:80'], profiles: [admin]}\n")  # fmt: skip
    write(lib / "lab2" / "db" / ".env", "COMPOSE_PROFILES=admin\n")
    brain, ask = _asking(home, lib)

    def started_with(question: str) -> dict[str, list[str]]:
        return {f"{f.subject} {f.object}": f.profiles for f in ask(question).facts
                if f.predicate == "publishes"}  # fmt: skip

    adminer = ask("which port does the adminer service of tools publish")
    assert adminer.answer == "8081 (only with --profile debug)"
    assert adminer.facts[0].views == "with --profile debug"
    assert started_with("which ports does tools publish") == {
        "service:tools/adminer port:8081": ["debug"],
        "service:tools/app port:8080": ["frontend"],  # the override file's profile
        "service:tools/mailhog port:8025": ["debug", "mail"],  # with the one it extends
        "service:tools/secret port:8026": [],  # a secret fills in no profile
    }
    assert "only with --profile  " not in (ask("which ports does tools publish").answer or "")
    assert started_with("which ports does lab2 publish") == {
        "service:lab2/docs port:9081": [],  # COMPOSE_PROFILES starts it
        "service:lab2/web port:9080": [],  # a profile the override file adds starts it
        "service:lab2/pgadmin port:5050": ["admin"],  # not the included folder's .env
        "service:lab2/adminer port:9082": [],
    }
    # several projects: the note says whose
    answer = ask("which port does the adminer service publish").answer or ""
    assert "service adminer of tools only with --profile debug" in answer, answer
    assert "lab2 only" not in answer
    # enabled everywhere: a fresh read of the file, no profile left to say
    write(lib / "tools" / ".env", "COMPOSE_PROFILES=*\n")
    _collect(brain)
    assert not any(started_with("which ports does tools publish").values())
    brain.close()


def test_ask_kind_words_by_what_the_library_has(home: Path, tmp_path: Path) -> None:
    """A service word beside a name no service goes by ("the shop service", "the service
    shop") is about the project of that name; beside a service's name, singular or plural,
    about the services of that name. A kind word alone names nothing (a ``services/`` folder
    is not "which service ..."), and a predicate the question asks less ("the project's web
    service") does not make its object the answer."""
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", """\
services:
  web: {image: nginx, ports: ["8080:80"]}
  cache: {image: redis, ports: ["6379:6379"], container_name: shop-cache}
""")  # fmt: skip
    write(lib / "web" / "compose.yaml", "services:\n  web: {image: httpd, ports: ['8082:80']}\n")
    write(lib / "services" / "payments" / "compose.yaml",
          "services:\n  api: {image: example/pay, ports: ['8200:8200']}\n")  # fmt: skip
    brain, ask = _asking(home, lib)

    def ports(question: str) -> set[str]:
        return {
            f"{f.subject} {f.object}" for f in ask(question).facts if f.predicate == "publishes"
        }

    shop = {"service:shop/web port:8080", "service:shop/cache port:6379"}
    for question in ("which port does the shop service publish",
                     "which ports do the shop services publish",
                     "which port does the service shop publish",
                     "quali porte pubblicano i servizi di shop"):  # fmt: skip
        assert ports(question) == shop, question
    webs = {"service:shop/web port:8080", "service:web/web port:8082"}
    assert ports("which ports do the web services publish") == webs
    assert ports("which service publishes port 8080") == {"service:shop/web port:8080"}
    # a plural project word: each project spelled is one, though a service goes by its name
    write(lib / "gitea" / "compose.yaml",
          "services:\n  gitea: {image: gitea/gitea, ports: ['3000:3000']}\n")  # fmt: skip
    _collect(brain)
    both = shop | {"service:gitea/gitea port:3000"}
    for question in ("which ports do the projects shop and gitea publish",
                     "quali porte pubblicano i progetti shop e gitea",
                     "what ports do the shop and gitea projects publish"):  # fmt: skip
        assert ports(question) == both, question
        assert "no service called" not in (ask(question).answer or ""), question
    # a service word beside a project's name when another project is said: a service's name
    assert ports("which port does the web service of services/payments publish") == set()
    assert ports("which port does the payments service of shop publish") == shop
    # a port the question names finds what publishes it, whatever else it asks most
    assert ports("what project does port 8082 belong to") == {"service:web/web port:8082"}
    # a container's name as the library writes it, though a project's name begins it
    assert ports("what port does the shop-cache container publish") == {
        "service:shop/cache port:6379"
    }
    # a plural predicate word
    images = ask("¿qué imágenes usan los servicios de shop?").facts
    assert {f.object for f in images} == {"image:nginx", "image:redis"}
    mine = ask("what port does the project's web service publish in shop")
    assert mine.answer != "service web of shop publishes no port"
    assert ports("what port does the project's web service publish in shop") == {
        "service:shop/web port:8080"
    }
    brain.close()


def test_compose_file_in_the_env_names_what_compose_up_reads(home: Path, tmp_path: Path) -> None:
    """``COMPOSE_FILE`` in a project's ``.env`` names the files ``docker compose up`` reads,
    in order: the answer is what they say, a later file's ``!override`` replacing what the
    files before it say, and the override file it does not name is told aside; one naming a
    file the folder does not have, or another folder's, is not followed (the override
    file's view, as without it)."""
    lib = tmp_path / "lab"
    for n, (project, env) in enumerate(
        (
            ("stage", "COMPOSE_FILE=compose.yaml:compose.prod.yaml  # prod\n"),
            ("plain", "COMPOSE_FILE=./compose.yaml\n"),
            ("middle", "COMPOSE_FILE=compose.yaml:compose.override.yaml:compose.prod.yaml\n"),
            ("last", "COMPOSE_FILE=compose.yaml:compose.prod.yaml:compose.override.yaml\n"),
            ("usual", ""),
            ("semi", "COMPOSE_FILE=compose.yaml;compose.prod.yaml\n"),
            ("gone", "COMPOSE_FILE=compose.yaml:compose.staging.yaml\n"),
            ("semi-ok", "COMPOSE_FILE=compose.yaml;compose.prod.yaml\nCOMPOSE_PATH_SEPARATOR=;\n"),
        )
    ):
        port = 2000 + 10 * n
        write(lib / project / "compose.yaml", f"services:\n  web: {{ports: ['{port}:80']}}\n")
        write(lib / project / "compose.override.yaml",
              f"services:\n  web: {{ports: !override ['{port + 8}:80']}}\n")  # fmt: skip
        write(lib / project / "compose.prod.yaml", f"services:\n  web: {{ports: !override "
              f"['{port + 7}:443']}}\n  worker: {{profiles: [batch], ports: ['{port + 5}:5']}}\n")  # fmt: skip
        if env:
            write(lib / project / ".env", env)
        urls = "\n".join(f"http://localhost:{port + d}/" for d in (0, 5, 7, 8))
        write(lib / project / "README.md", f"# {project}\n\n{urls}\n")
    # a listed variant without services; only a variant (no base file); a variable of the .env
    # above; the base file after the override file
    write(lib / "kappa" / "compose.yaml", "services:\n  web: {ports: ['2200:80']}\n")
    write(lib / "kappa" / "compose.override.yaml", "services:\n  web: {ports: ['2208:80']}\n")
    write(lib / "kappa" / "compose.prod.yaml", "volumes:\n  data: {external: true}\n")
    write(lib / "kappa" / ".env", "COMPOSE_FILE=compose.yaml:compose.prod.yaml\n")
    write(lib / "echo" / "compose.yaml", "services:\n  web: {ports: ['2300:80']}\n")
    write(lib / "echo" / "compose.prod.yaml", "services:\n  web: {ports: ['2307:80'], "
          "profiles: [batch]}\n")  # fmt: skip
    write(lib / "echo" / ".env", "COMPOSE_FILE=compose.prod.yaml\nCOMPOSE_PROFILES=batch\n")
    write(lib / "alpha" / "compose.yaml", "services:\n  web: {ports: ['2400:80']}\n")
    write(lib / "alpha" / "compose.prod.yaml", "services:\n  web: {ports: !override ['2407:80']}\n")
    write(lib / "alpha" / ".env", "ENV=prod\nCOMPOSE_FILE=compose.yaml:compose.${ENV}.yaml\n")
    write(lib / "golf" / "compose.yaml", "services:\n  web: {ports: ['2500:80']}\n")
    write(lib / "golf" / "compose.override.yaml",
          "services:\n  web: {ports: !override ['2508:80']}\n")  # fmt: skip
    write(lib / "golf" / ".env", "COMPOSE_FILE=compose.override.yaml:compose.yaml\n")
    for project, ports in (("kappa", "2200"), ("echo", "2307"), ("alpha", "2407"),
                           ("golf", "2500 2508")):  # fmt: skip
        urls = " ".join(f"http://localhost:{port}/" for port in ports.split())
        write(lib / project / "README.md", f"# {project}\n\n{urls}\n")
    write(lib / "pick" / "compose.yaml", "services:\n  web: {ports: ['2100:80']}\n")
    write(lib / "pick" / "docker-compose.yml", "services:\n  web: {ports: ['2101:80']}\n")
    write(lib / "pick" / ".env", "COMPOSE_FILE=docker-compose.yml\n")
    write(lib / "pick" / "README.md", "# pick\n\nhttp://localhost:2100/ http://localhost:2101/\n")
    brain, ask = _asking(home, lib)

    def answer(project: str) -> str:
        return ask(f"which port does the web service of {project} publish").answer or "?"

    expected = {"stage": "2007", "plain": "2010", "middle": "2027", "last": "2038",
                "usual": "2048", "semi": "2058", "gone": "2068", "semi-ok": "2077",
                "pick": "2101", "kappa": "2200", "echo": "2307", "alpha": "2407",
                "golf": "2500, 2508"}  # fmt: skip
    assert {p: answer(p).partition(" (")[0] for p in expected} == expected
    # its .env starts the profile, whichever files it names
    assert answer("echo") == "2307 (echo/compose.yaml, not in COMPOSE_FILE, says 2300)"
    assert "stage/compose.override.yaml, not read with -f, says 2008" in answer("stage")
    # a profile a file COMPOSE_FILE names adds
    worker = ask("which port does the worker service of stage publish")
    assert (worker.answer or "").startswith("2005 (only with --profile batch; ")
    assert (
        worker.facts[0].views == "in docker compose up (COMPOSE_FILE), the prod variant (-f)"
        " with --profile batch"
    )
    # more facts than the limit: how many more
    every = ask("which port does the web service publish")
    assert len(every.facts) == 5 and every.more_facts >= 4
    brain.close()


def test_ask_names_written_as_the_library_writes_them(home: Path, tmp_path: Path) -> None:
    """Second attack's findings: a container word names a service too; the missing name is
    shown as the library writes it (not its stem), several words long too, and not when a
    sibling runs an image of that name; names of several question words (user-service,
    image-service) are read whole; a project the question spells on its own outranks a
    service named elsewhere ("the otel-collector service of papers")."""
    lib = tmp_path / "lab"
    write(lib / "papers" / "compose.yaml", PAPERS)
    write(lib / "members" / "compose.yaml", """\
services:
  user-service: {image: example/users, ports: ["7001:8080"]}
  image-service: {image: example/images, ports: ["7003:8080"]}
  gateway: {image: nginx, ports: ["80:80"]}
""")  # fmt: skip
    write(lib / "bank" / "compose.yaml", "services:\n  user: {ports: ['6001:80']}\n")
    write(lib / "queue" / "compose.yaml", "services:\n  mq: {image: rabbitmq}\n")
    write(lib / "smarthome" / "compose.yaml",
          "services:\n  home-assistant: {ports: ['8123:8123']}\n"
          "  my-server: {ports: ['7005:80']}\n")  # fmt: skip
    write(lib / "web" / "compose.yaml", "services:\n  nginx: {ports: ['8088:80']}\n")
    write(lib / "blog" / "compose.yaml", "services:\n  ghost: {ports: ['2368:2368']}\n")
    write(lib / "cache" / "compose.yaml", "services:\n  postgres: {image: postgres}\n"
          "  otel-collector: {image: otel/collector, ports: ['4317:4317']}\n")  # fmt: skip
    brain, ask = _asking(home, lib)
    has = "(its services: broker, db, webserver)"
    for question, name in (
        ("which port does the mq container of papers publish", "mq"),
        ("el contenedor mq de papers qué puerto publica", "mq"),
        ("which port does the otel-collector service of papers publish", "otel-collector"),
    ):
        assert ask(question).answer == f"project papers has no service called {name} {has}"
    for question, service in (
        ("which port does the postgres service of papers publish", "db"),  # not "postgre"
        ("what port does the db of the papers service use", "db"),  # webserver runs papers
    ):
        assert ask(question).answer == f"service {service} of papers publishes no port", question
    for question, subject, port in (
        ("which port does the image-service publish", "service:members/image-service", "7003"),
        ("which port does user-service publish", "service:members/user-service", "7001"),
        ("which port does the user service of members publish",
         "service:members/user-service", "7001"),
        # (review) words of a question that are names of other things do not take it over
        ("which port does the user service of bank publish", "service:bank/user", "6001"),
        ("which port does the home assistant web ui publish",
         "service:smarthome/home-assistant", "8123"),
        ("which port does ghost publish on my server", "service:blog/ghost", "2368"),
    ):  # fmt: skip
        assert _said(ask(question), subject) == {port}, question
    assert ask("which port does the otel-collector of the blog project publish").answer == (
        "project blog has no service called otel-collector (its services: ghost)"
    )
    brain.close()


def test_no_secret_fills_in_a_path_that_is_kept(home: Path, tmp_path: Path) -> None:
    """A variable with a secret's name fills in no path an extends or an include names (the
    paths read are kept to follow their changes): not even one that leads nowhere."""
    lib = tmp_path / "lab"
    write(lib / "p1" / ".env", "DB_PASSWORD=hunter2hunter2\nAPI_TOKEN=s3cr3tv4lue99\n")
    write(lib / "p1" / "compose.yaml", """\
include:
  - path: sub/compose.yaml
    env_file: "sub/${API_TOKEN}.env"
services:
  api:
    extends: {file: "../shared/${DB_PASSWORD}.yaml", service: base}
""")  # fmt: skip
    write(lib / "p1" / "sub" / "compose.yaml", "services:\n  job: {ports: ['9000:9000']}\n")
    # nor a variable of the .env that a secret would fill in (a project's name, the files
    # COMPOSE_FILE names, the profiles COMPOSE_PROFILES starts are kept)
    write(lib / "p2" / ".env", "DB_PASSWORD=hunter2hunter2\nCOMPOSE_PROJECT_NAME=x${DB_PASSWORD}\n"
          "COMPOSE_PROFILES=${DB_PASSWORD}\nCOMPOSE_FILE=compose.yaml:compose.${DB_PASSWORD}.yaml\n")  # fmt: skip
    write(lib / "p2" / "compose.yaml", "services:\n  web: {ports: ['9100:80']}\n")
    brain = _brain(home, lib)
    _collect(brain)
    [library_id] = brain.store.entries.library_ids(["lab"]).values()
    kept = json.dumps(brain.store.facts.compose_reads(library_id))
    observations = brain.store.facts.observations(library_id)
    kept += json.dumps([(o.subject, o.object, o.props) for o in observations])
    assert "shared/.yaml" in kept and "sub/.env" in kept  # read, with the secret left out
    assert "hunter2" not in kept and "s3cr3t" not in kept
    assert "service:x/web" in kept
    brain.close()


def test_a_project_named_in_its_compose_file_goes_by_its_folder_too(
    home: Path, tmp_path: Path
) -> None:
    """A project ``name:`` names otherwise than its folder is asked about by either: "the
    frontend service of rusty" is react-rust-postgres's in rusty/, never the other projects'
    frontends (third attack: they were all answered)."""
    lib = tmp_path / "lab"
    write(lib / "rusty" / "compose.yaml", "name: react-rust-postgres\nservices:\n"
          "  frontend: {ports: ['3000:3000']}\n  backend: {image: example/api}\n"
          "  db: {image: postgres}\n")  # fmt: skip
    write(lib / "rusty" / "compose.override.yaml", "services:\n  db: {ports: ['5432:5432']}\n")
    write(lib / "shop" / "compose.yaml", "services:\n  frontend: {ports: ['80:80']}\n"
          "  backend: {ports: ['8000:8000']}\n  db: {ports: ['5433:5432']}\n")  # fmt: skip
    brain, ask = _asking(home, lib)
    for project in ("rusty", "react-rust-postgres"):
        frontend = ask(f"which port does the frontend service of {project} publish")
        assert _said(frontend, "service:react-rust-postgres/frontend") == {"3000"}, project
        db = ask(f"which port does the db service of {project} publish")
        assert _said(db, "service:react-rust-postgres/db") == {"5432"}, project
        assert ask(f"which port does the backend service of {project} publish").answer == (
            "service backend of react-rust-postgres publishes no port"
        ), project
    brain.close()
