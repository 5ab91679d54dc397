"""The HTTP API of a real `brainmap serve`: REST paths, problem details, OpenAPI, security,
concurrency. RELIABILITY 12 (network hardening)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from brainmap import ops
from brainmap.config import load, save
from brainmap.server import openapi_document
from conftest import ROOT, free_port, run_cli, serving, write

SNAPSHOTS = ROOT / "tests" / "snapshots"


@pytest.fixture
def served(brain: ops.Brain, home: Path) -> Any:
    brain.close()
    with serving(home) as url:
        yield url


def test_rest_paths(served: str) -> None:
    hits = httpx.get(
        f"{served}/search", params={"query": "undo the last commit", "limit": 2}
    ).json()
    assert hits["hits"][0]["path"] == "patterns/git-undo-commit.md" and len(hits["hits"]) == 2
    posted = httpx.post(f"{served}/search", json={"query": "compose ports", "library": ["example"]})
    assert posted.json()["hits"][0]["path"] == "gotchas/compose-port-order.md"
    filtered = httpx.get(f"{served}/search", params=[("query", "sqlite"), ("type", "decision")])
    assert {h["type"] for h in filtered.json()["hits"]} == {"decision"}
    entry = httpx.get(f"{served}/get/example:patterns/git-undo-commit.md").json()
    assert entry["title"] == "Undo the last git commit" and entry["chunks"]
    assert httpx.get(f"{served}/get/{entry['id']}").json()["path"] == entry["path"]
    assert httpx.get(f"{served}/stats").json()["entries"] > 0
    assert {lib["name"] for lib in httpx.get(f"{served}/libraries").json()["libraries"]} == {
        "brain",
        "example",
    }
    assert "checks" in httpx.get(f"{served}/doctor").json()
    saved = httpx.post(f"{served}/save", json={"title": "HTTP saved note", "body": "kiwi orchard notes",
                                                "library": "example"}).json()  # fmt: skip
    assert saved["status"] == "saved"
    assert (
        httpx.get(f"{served}/search", params={"query": "kiwi orchard"}).json()["hits"][0]["id"]
        == saved["id"]
    )
    hint = httpx.post(f"{served}/ingest", json={}).json()
    assert hint["status"] == "hint"
    report = httpx.post(f"{served}/reindex", json={"embed": False}).json()
    assert {lib["library"] for lib in report["libraries"]} == {"brain", "example"}
    hop = httpx.get(f"{served}/search", params={"query": "undo the last commit", "hop": 1}).json()
    assert hop["hits"][0]["hops"]["path"] == "patterns/git-undo-commit.md"
    walk = httpx.get(f"{served}/neighbors", params={"node": entry["id"], "depth": 2}).json()
    assert walk["center"]["key"] == f"entry:{entry['id']}" and walk["edges"]
    links = httpx.get(f"{served}/backlinks/git-undo-commit").json()
    assert links["entries"] == ["example:patterns/git-undo-commit.md"]
    assert (
        httpx.get(f"{served}/refs/example:patterns/git-undo-commit.md").json()["breadcrumbs"] == []
    )
    assert httpx.post(f"{served}/git-import", json={}).json()["not_git"] == ["brain", "example"]
    assert httpx.get(f"{served}/audit", params={"kind": "stale"}).json()["kind"] == "stale"
    assert httpx.get(f"{served}/audit", params={"kind": "nonsense"}).status_code == 422
    # a title of C1 controls only is cleaned away: the schema refuses it too (schemathesis)
    title_schema = httpx.get(f"{served}/openapi.json").json()["components"]["schemas"]["SaveInput"]
    assert re.search(title_schema["properties"]["title"]["pattern"], "\u008d\u0085") is None
    assert httpx.post(f"{served}/save", json={"title": "\u008d"}).status_code == 422
    verified = httpx.post(f"{served}/verify", json={"ref": saved["id"]}).json()
    assert verified["status"] == "verified"
    collected = httpx.post(f"{served}/collect", json={"libraries": ["example"]}).json()
    assert collected["libraries"][0]["library"] == "example"
    asked = httpx.get(f"{served}/ask", params={"question": "undo the last commit", "web": False})
    assert asked.json()["info"][0]["path"] == "patterns/git-undo-commit.md"
    assert asked.json()["web"]["status"] == "skipped"
    contradict = httpx.get(f"{served}/audit", params={"kind": "contradict"}).json()
    assert contradict["kind"] == "contradict" and contradict["conflicts"] == []
    lines = httpx.get(f"{served}/map").json()
    assert [line["library"] for line in lines["libraries"]] == ["brain", "example"]
    assert lines["text"].startswith("Library map (2 libraries")
    block = httpx.get(f"{served}/map/example").json()
    assert block["library"] == "example" and block["status"] == "active"
    recomputed = httpx.post(f"{served}/map/recompute", params={"library": "example"}).json()
    assert recomputed == {"recomputed": [], "unchanged": ["example"], "not_indexed": []}


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/search", None, 422),  # no query
        ("GET", "/search?query=x&limit=0", None, 422),
        ("GET", "/search?query=x&mode=fuzzy", None, 422),
        ("GET", "/search?query=x&since=someday", None, 422),
        ("GET", "/search?query=x&library=nope", None, 404),
        ("GET", "/get/nothing", None, 404),
        ("GET", "/neighbors?node=entity:nothing", None, 404),
        ("GET", "/neighbors?node=x&depth=9", None, 422),
        ("GET", "/backlinks/nothing-at-all", None, 404),
        ("GET", "/refs/nolib:x.py", None, 404),
        ("POST", "/git-import", {"libraries": ["example"]}, 400),
        ("POST", "/verify", {"ref": "nothing"}, 404),
        ("POST", "/collect", {"source": ["nope"]}, 422),
        ("POST", "/collect", {"source": ["runtime"], "from_file": "/no/such/file"}, 403),
        ("POST", "/collect", {"source": ["runtime", "ssh"], "from_file": "/etc/hostname"}, 403),
        ("POST", "/collect", {"source": ["ssh"], "from_file": "/etc/passwd\u0000x"}, 403),
        ("GET", "/ask", None, 422),
        ("GET", "/ask?question=x&root=nope", None, 422),
        ("POST", "/save", {"title": ""}, 422),
        ("POST", "/save", {"title": "x", "surprise": 1}, 422),
        ("POST", "/save", {"title": "x", "library": "nope"}, 404),
        ("POST", "/save", "not json", 422),
        ("POST", "/reindex", {"libraries": ["nope"]}, 404),
        ("GET", "/map/nope", None, 404),
        ("POST", "/map/recompute?library=nope", None, 404),
        ("POST", "/map/recompute?surprise=1", None, 422),
        ("GET", "/nowhere", None, 404),
        ("DELETE", "/search", None, 405),
    ],
)
def test_bad_input_is_a_problem_document_never_500(
    served: str, method: str, path: str, body: Any, status: int
) -> None:
    kwargs: dict[str, Any] = {}
    if isinstance(body, str):
        kwargs = {"content": body, "headers": {"content-type": "application/json"}}
    elif body is not None:
        kwargs = {"json": body}
    response = httpx.request(method, f"{served}{path}", **kwargs)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["title"] and problem["detail"]
    if status == 422:  # the README promises a hint with every invalid parameter
        assert problem["hint"] and "/openapi.json" in problem["hint"], problem


def test_search_takes_q_as_the_gui_does_and_says_no_close_match(served: str) -> None:
    for nonsense in ("qwxzv plokjh", "?!...;;"):
        found = httpx.get(f"{served}/search", params={"q": nonsense}).json()
        assert (found["match"], found["hits"]) == ("none", []), nonsense
    by_q = httpx.get(f"{served}/search", params={"q": "undo the last commit", "limit": 2})
    by_query = httpx.get(f"{served}/search", params={"query": "undo the last commit", "limit": 2})
    assert by_q.status_code == 200 and by_q.json() == by_query.json()
    assert by_q.json()["hits"][0]["path"] == "patterns/git-undo-commit.md"
    posted = httpx.post(f"{served}/search", json={"q": "undo the last commit", "limit": 2})
    assert posted.json() == by_query.json()
    document = httpx.get(f"{served}/openapi.json").json()
    names = [p["name"] for p in document["paths"]["/search"]["get"]["parameters"]]
    assert "query" in names and "q" not in names  # one documented name; q is an alias


def test_network_hardening(served: str, home: Path) -> None:
    """RELIABILITY 12."""
    # a foreign Host header (DNS rebinding) is refused on every path
    assert httpx.get(f"{served}/stats", headers={"Host": "attacker.example"}).status_code == 421
    # a foreign Origin on /mcp, and on state-changing requests, gets 403
    mcp_headers = {
        "Origin": "http://attacker.example",
        "Accept": "application/json, text/event-stream",
    }
    assert httpx.post(f"{served}/mcp", json={}, headers=mcp_headers).status_code == 403
    assert (
        httpx.post(
            f"{served}/save", json={"title": "x"}, headers={"Origin": "http://evil.test"}
        ).status_code
        == 403
    )
    cross = {"Sec-Fetch-Site": "cross-site"}
    assert httpx.post(f"{served}/reindex", json={}, headers=cross).status_code == 403
    # our own origin is fine
    own = httpx.get(f"{served}/stats", headers={"Origin": served})
    assert own.status_code == 200
    # oversized bodies: 413, declared or streamed
    big = b'{"title": "x", "body": "' + b"a" * (3 * 1024 * 1024) + b'"}'
    declared = httpx.post(
        f"{served}/save", content=big, headers={"content-type": "application/json"}
    )
    assert declared.status_code == 413

    def chunks() -> Any:
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    streamed = httpx.post(
        f"{served}/save", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413


def test_collect_reads_over_http_only_library_and_allowed_files(
    brain: ops.Brain, home: Path, library: Path, tmp_path: Path
) -> None:
    """RELIABILITY 22: the network names no file outside the libraries and allow_from."""
    # the server user's own ssh config: a file the CLI may read, the network may not
    outside = write(Path(os.environ["HOME"]) / ".ssh" / "config", "Host secret-box\n  User root\n")
    allowed = write(tmp_path / "allowed" / "ssh_config", "Host nas\n  HostName 10.0.0.2\n")
    inside = write(library / "conf" / "hosts.md", "Host pi\n  Include ~/.ssh/config\n")
    (library / "escape").symlink_to(outside.parent)
    cfg = load(home)
    cfg.collect.allow_from = [str(allowed.parent)]
    save(cfg)
    brain.close()
    with serving(home) as url:

        def collect(path: str) -> httpx.Response:
            body = {"libraries": ["example"], "source": ["ssh"], "from_file": path}
            return httpx.post(f"{url}/collect", json=body, timeout=60)

        refused = [
            collect(path)
            for path in (str(outside), str(outside.parent / "missing"), "/etc/passwd",
                         "/proc/self/environ", str(library / "escape" / "config"),
                         f"{library}/../user-home/.ssh/config", "~/../../../../etc/passwd")
        ]  # fmt: skip
        assert [r.status_code for r in refused] == [403] * len(refused)
        # the same answer whether the file exists or not: nothing to learn about the disk
        assert len({r.text for r in refused}) == 1 and "allow_from" in refused[0].json()["hint"]
        assert collect(str(inside)).status_code == 200  # Include does not lead out either
        assert collect(str(allowed)).status_code == 200
        assert collect(str(library / "conf" / "missing")).status_code == 404  # inside: it may say
    with ops.Brain(home) as reopened:
        subjects = {row.subject for row in reopened.store.facts.assertions()}
    assert {"host:nas", "host:pi"} <= subjects and "host:secret-box" not in subjects
    # the CLI reads what its user names, as before
    run_cli(home, "collect", "example", "--source", "ssh", "--from", str(outside))


def test_non_loopback_needs_a_token(home: Path) -> None:
    proc = run_cli(home, "serve", "--host", "0.0.0.0", "--port", str(free_port()), check=False)
    assert proc.returncode == 1 and "token is required" in proc.stderr


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--token", "   "], {}),
        (["--token", "x"], {}),
        (["--token", "fifteen-chars.."], {}),
        (["--token", " sixteen-chars-ok "], {}),  # a client cannot send the spaces
        (["--token", "sixteen chars ok"], {}),
        ([], {"BRAINMAP_TOKEN": "short"}),
        (["--host", "0.0.0.0"], {"BRAINMAP_TOKEN": "  \t "}),
    ],
)
def test_blank_or_short_tokens_are_refused(
    home: Path, args: list[str], env: dict[str, str]
) -> None:
    command = [sys.executable, "-m", "brainmap", "--home", str(home), "serve",
               "--port", str(free_port()), *args]  # fmt: skip
    # before a token was checked such a server started, then answered every request with 401
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **env})  # fmt: skip
    assert proc.returncode == 1
    error, hint = proc.stderr.splitlines()
    assert error.startswith("error: ") and "16" in error and hint.startswith("hint: ")


def test_port_0_serves_on_the_port_it_got(brain: ops.Brain, home: Path) -> None:
    brain.close()
    command = [sys.executable, "-m", "brainmap", "--home", str(home), "serve", "--port", "0"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        url = banner.split()[2]  # "brainmap serving http://127.0.0.1:PORT: ..."
        url = url.removesuffix(":").removesuffix("(read-only):")
        port = int(url.rpartition(":")[2])
        assert port != 0, banner
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        own = httpx.post(f"{url}/reindex", json={"embed": False}, headers={"Origin": url})
        assert own.status_code == 200, own.text  # its own origin, with the port it got
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("[::1]", 200), ("[::1]:{port}", 200), ("localhost:{port}", 200), ("127.0.0.1", 200),
        ("[::1]evil.com", 421), ("[::1]:80evil.com", 421), ("[::1]:{port}:1", 421),
        ("[::1", 421), ("localhost:abc", 421), ("localhost:80:80", 421), ("127.0.0.1:", 200),
        ("evil.com@localhost", 421), ("localhost/evil", 421), ("", 421),
    ],
)  # fmt: skip
def test_host_header_grammar(served: str, host: str, status: int) -> None:
    port = served.rpartition(":")[2]
    response = httpx.get(f"{served}/health", headers={"Host": host.format(port=port)})
    assert response.status_code == status


def test_token_and_read_only(brain: ops.Brain, home: Path) -> None:
    brain.close()
    with serving(home, "--token", "s3cret-of-16-chars", "--read-only") as url:
        assert httpx.get(f"{url}/stats").status_code == 401
        assert (
            httpx.get(f"{url}/stats", headers={"Authorization": "Bearer wrong"}).status_code == 401
        )
        auth = {"Authorization": "Bearer s3cret-of-16-chars"}
        assert httpx.get(f"{url}/stats", headers=auth).status_code == 200
        refused = httpx.post(f"{url}/save", json={"title": "x", "body": "y"}, headers=auth)
        assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
        assert httpx.post(f"{url}/reindex", json={}, headers=auth).status_code == 403
        assert (
            httpx.get(f"{url}/search", params={"query": "commit"}, headers=auth).status_code == 200
        )


def _snapshot(name: str, value: Any) -> None:
    path = SNAPSHOTS / name
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("BRAINMAP_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path}; run with BRAINMAP_UPDATE_SNAPSHOTS=1"
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text), (
        f"{name} changed: review the interface change, then BRAINMAP_UPDATE_SNAPSHOTS=1 pytest"
    )


def test_openapi_snapshot(brain: ops.Brain) -> None:
    """Interface changes are reviewed: the OpenAPI document is compared with a snapshot."""
    document = openapi_document(brain)
    assert set(document["paths"]) == {
        "/search", "/get/{ref}", "/stats", "/doctor", "/reindex", "/save", "/ingest", "/libraries",
        "/neighbors", "/backlinks/{ref}", "/refs/{file}", "/git-import", "/audit", "/verify",
        "/collect", "/ask", "/map", "/map/{library}", "/map/recompute",
        "/feedback", "/supersede",
    }  # fmt: skip
    _snapshot("openapi.json", document)


def test_schemathesis_finds_no_server_error_and_no_schema_violation(served: str) -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "schemathesis.cli", "run", f"{served}/openapi.json",
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_schema_conformance,positive_data_acceptance",
            "--max-examples", "30", "--seed", "1", "--no-color",
        ],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert " passed" in proc.stdout


def test_eight_concurrent_clients_for_twenty_seconds(served: str) -> None:
    """Four clients search and four save, for 20 s: no error, no lost save."""
    errors: list[str] = []
    saved: list[tuple[str, str]] = []
    searches = [0]
    stop = time.monotonic() + 20

    def searcher(n: int) -> None:
        with httpx.Client(base_url=served, timeout=60) as client:
            while time.monotonic() < stop:
                r = client.get("/search", params={"query": f"commit docker sqlite {n}"})
                if r.status_code != 200:
                    errors.append(f"search {r.status_code}: {r.text[:200]}")
                searches[0] += 1

    def saver(n: int) -> None:
        with httpx.Client(base_url=served, timeout=60) as client:
            i = 0
            while time.monotonic() < stop:
                title = f"client {n} note {i} {'qwertyuiop'[n:]}"
                r = client.post("/save", json={"title": title, "body": f"payload {n}-{i}", "force": True,
                                               "library": "example"})  # fmt: skip
                if r.status_code != 200 or r.json()["status"] != "saved":
                    errors.append(f"save {r.status_code}: {r.text[:200]}")
                else:
                    saved.append((r.json()["id"], r.json()["file"]))
                i += 1

    threads = [threading.Thread(target=searcher, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=saver, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert searches[0] > 20 and len(saved) > 8
    for entry_id, file in saved:
        assert Path(file).exists()
        assert httpx.get(f"{served}/get/{entry_id}").status_code == 200
    stats = httpx.get(f"{served}/stats").json()
    assert stats["pending_embeddings"] == 0


def test_guard_edge_cases(brain: ops.Brain, home: Path) -> None:
    brain.close()
    port = free_port()
    token = "s3cret-of-16-chars"
    with serving(home, "--token", token, "--allow-host", "brain.internal", port=port) as url:
        auth = {"Authorization": f"Bearer {token}"}
        odd = httpx.get(
            f"{url}/stats", headers={"Authorization": "Bearer caf\xe9".encode("latin-1")}
        )
        assert odd.status_code == 401  # a non-ASCII token is a wrong token, not a crash
        assert httpx.post(f"{url}/mcp", json={}).status_code == 401  # the token guards /mcp too
        assert (
            httpx.get(
                f"{url}/stats", headers={**auth, "Host": f"brain.internal:{port}"}
            ).status_code
            == 200
        )
        other_port = {**auth, "Origin": f"http://localhost:{port + 1}"}  # another local dev server
        assert httpx.post(f"{url}/reindex", json={}, headers=other_port).status_code == 403
        own = {**auth, "Origin": f"http://localhost:{port}"}
        assert httpx.post(f"{url}/reindex", json={"embed": False}, headers=own).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/search", '{"query": "abc \\ud800"}'),
        ("POST", "/save", '{"title": "x", "merge_into": "\\ud800"}'),
        ("POST", "/save", '{"title": "t \\udfff", "body": "b"}'),
        ("GET", "/get/~nosuchuser", None),
    ],
)
def test_odd_input_is_4xx(served: str, method: str, path: str, body: str | None) -> None:
    headers = {"content-type": "application/json"}
    response = httpx.request(method, f"{served}{path}", content=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"] == "application/problem+json"


BLAS_THREADS = """
import ctypes, glob, os, sys
from brainmap.__main__ import one_blas_thread
assert "numpy" not in sys.modules
one_blas_thread()
import numpy
found = glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "*openblas*"))
if not found:
    print("no-openblas")
else:
    print(ctypes.CDLL(found[0]).scipy_openblas_get_num_threads64_())
"""


@pytest.mark.parametrize(("setting", "threads"), [(None, "1"), ("2", "2")])
def test_brainmap_gives_blas_one_thread_unless_told(setting: str | None, threads: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if setting is not None:
        env["OPENBLAS_NUM_THREADS"] = setting
    if setting and (os.cpu_count() or 1) < int(setting):
        pytest.skip("OpenBLAS caps its threads at the cores")
    out = subprocess.run([sys.executable, "-c", BLAS_THREADS], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    if out == "no-openblas":
        pytest.skip("this numpy has no bundled OpenBLAS to ask")
    assert out == threads
