"""The HTTP API of a real `brainmap serve`: REST paths, problem details, OpenAPI, security,
concurrency. RELIABILITY 12 (network hardening)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from brainmap import ops
from brainmap.server import openapi_document
from conftest import ROOT, free_port, run_cli, serving

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
        ("POST", "/collect", {"source": ["runtime"], "from_file": "/no/such/file"}, 404),
        ("POST", "/collect", {"source": ["runtime", "ssh"], "from_file": "/etc/hostname"}, 400),
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


def test_non_loopback_needs_a_token(home: Path) -> None:
    proc = run_cli(home, "serve", "--host", "0.0.0.0", "--port", str(free_port()), check=False)
    assert proc.returncode == 1 and "token is required" in proc.stderr


def test_token_and_read_only(brain: ops.Brain, home: Path) -> None:
    brain.close()
    with serving(home, "--token", "s3cret", "--read-only") as url:
        assert httpx.get(f"{url}/stats").status_code == 401
        assert (
            httpx.get(f"{url}/stats", headers={"Authorization": "Bearer wrong"}).status_code == 401
        )
        auth = {"Authorization": "Bearer s3cret"}
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
    with serving(home, "--token", "s3cret", "--allow-host", "brain.internal", port=port) as url:
        auth = {"Authorization": "Bearer s3cret"}
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
