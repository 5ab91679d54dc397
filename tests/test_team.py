"""A team's served brain: users, roles per library, tokens kept as digests, the write log.

Real `brainmap serve` processes on 127.0.0.1, the real MCP client over streamable HTTP, the
team in team.db or in PostgreSQL's brainmap_team schema.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from playwright.sync_api import Browser, expect

from brainmap import ops
from brainmap.errors import UserError
from brainmap.ops.access import RULES
from brainmap.store.team import WriteRow
from brainmap.team import Team, digest, mint
from conftest import both_backends, drop_index, run_cli, serving, write
from gui_fixtures import LAPTOP, PHONE, console_errors, shot, shots_folder
from processes import cpu_ticks, settled, writer_of

SECRET = "Vault unseal keys rotate every quarter at the Zurich office"


@pytest.fixture
def team_brain(brain: ops.Brain, library: Path) -> dict[str, Any]:
    """The example home with a second library's note (in `brain`, the global library) and a
    team: alice writes `example`, bob reads `brain`, carol administers everything.

    What lies in `brain` only: the note's words, its tag `zebratag`, its entity `Zebra Vault`.
    What `example` holds of it: a code comment naming its slug, a note it supersedes, and the
    entity `Shared Thing` both name (a bridge)."""
    saved = ops.save(brain, ops.SaveInput(
        title="Key rotation runbook", library="brain", tags=["zebratag"],
        body=f"{SECRET}. See [[Zebra Vault]] and [[Shared Thing]].",
    ))  # fmt: skip
    write(library / "tool.py", "# Brain: key-rotation-runbook\nprint('rotate')\n")
    write(
        library / "notes" / "old-rotation.md",
        "# Old rotation\n\nRotate by hand. [[Shared Thing]]\n",
    )
    ops.reindex(brain, ops.ReindexInput(libraries=["example"]))
    # in brain only: an alias that would merge example's entity into brain's, and a code
    # comment naming example's note
    home = brain.home
    write(home / "brain" / "vault-ops.md",
          "---\naliases: [Shared Thing]\n---\n# Vault ops\n\nUnseal in order.\n")  # fmt: skip
    write(home / "brain" / "rotate.py", "# Brain: old-rotation\nprint('rotate')\n")
    ops.reindex(brain, ops.ReindexInput(libraries=["brain"]))
    ops.supersede(brain, ops.SupersedeInput(old="example:notes/old-rotation.md", new=saved.id))
    ops.user_add(brain, ops.UserAddInput(name="alice", role="write", library=["example"]))
    ops.user_add(brain, ops.UserAddInput(name="bob", role="read", library=["brain"]))
    ops.user_add(brain, ops.UserAddInput(name="carol", role="admin"))
    tokens = {
        name: ops.token_create(brain, ops.TokenCreateInput(name=name, label="test")).token
        for name in ("alice", "bob", "carol")
    }
    brain.close()
    return {"secret": saved.id, "tokens": tokens}


@pytest.fixture
def team_server(team_brain: dict[str, Any], home: Path) -> Iterator[dict[str, Any]]:
    with serving(home, token=team_brain["tokens"]["carol"]) as url:
        yield {**team_brain, "url": url, "home": home}


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_every_op_has_a_rule() -> None:
    assert set(RULES) == set(ops.OPS)
    served_without_rule = [o.name for o in ops.served() if RULES[o.name] is None]
    assert served_without_rule == []


@both_backends
def test_each_user_reads_and_writes_only_what_their_roles_allow(
    backend: str, team_server: dict[str, Any], home: Path
) -> None:
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]
    alice, bob, carol = _as(tokens["alice"]), _as(tokens["bob"]), _as(tokens["carol"])
    with httpx.Client(base_url=url, timeout=60) as http:
        # no token, a wrong one: nothing at all
        assert http.get("/search", params={"query": "vault"}).status_code == 401
        assert http.get("/search", params={"query": "vault"},
                        headers=_as("bmt_" + "x" * 43)).status_code == 401  # fmt: skip
        # alice reads example only: the other library's note is nowhere to her
        both = "rotate the vault keys, cron timezone"  # words of both libraries' notes
        found = http.get("/search", params={"query": both}, headers=alice).json()
        assert found["hits"] and {h["library"] for h in found["hits"]} == {"example"}
        seen = http.get("/search", params={"query": both, "limit": 50}, headers=carol).json()
        assert secret in {h["id"] for h in seen["hits"]}  # there, for one who may read brain
        named = http.get("/search", params={"query": "vault", "library": "brain"}, headers=alice)
        assert named.status_code == 403 and "alice may not read library 'brain'" in named.text
        assert http.get(f"/get/{secret}", headers=alice).status_code == 404
        assert http.get(f"/neighbors?node={secret}", headers=alice).status_code == 404
        asked = http.get("/ask", params={"question": both, "web": False}, headers=alice).json()
        assert asked["info"] and {i["library"] for i in asked["info"]} == {"example"}
        libraries = http.get("/libraries", headers=alice).json()["libraries"]
        assert [lib["name"] for lib in libraries] == ["example"]
        assert [
            line["library"] for line in http.get("/map", headers=alice).json()["libraries"]
        ] == ["example"]
        assert http.get("/stats", headers=alice).status_code == 403
        assert http.post("/reindex", json={}, headers=alice).status_code == 403
        # alice writes example, not brain
        saved = http.post("/save", headers=alice, json={"title": "Alice's kiwi note",
                          "body": "kiwi orchard irrigation", "library": "example"})  # fmt: skip
        assert saved.status_code == 200 and saved.json()["status"] == "saved"
        refused = http.post("/save", headers=alice, json={"title": "Into brain", "body": "x",
                            "library": "brain"})  # fmt: skip
        assert refused.status_code == 403
        assert not list((home / "brain").rglob("into-brain*.md"))
        # bob reads brain, and may write nowhere (his default save library is brain)
        mine = http.get("/search", params={"query": "vault unseal keys"}, headers=bob).json()
        assert mine["hits"][0]["id"] == secret
        assert http.get(f"/get/{secret}", headers=bob).json()["id"] == secret
        assert http.post("/save", headers=bob, json={"title": "b", "body": "b"}).status_code == 403
        assert http.post("/verify", headers=bob, json={"ref": secret}).status_code == 403
        # carol sees and administers everything
        assert http.get("/stats", headers=carol).status_code == 200
        assert http.get("/search", params={"query": "kiwi orchard"},
                        headers=carol).json()["hits"][0]["id"] == saved.json()["id"]  # fmt: skip
        report = http.post("/reindex", json={"embed": False}, headers=carol).json()
        assert {lib["library"] for lib in report["libraries"]} == {"brain", "example"}
    log = ops.write_log(ops.Brain(home), ops.WriteLogInput()).writes
    seen = {(w.member, w.op, w.library, w.outcome, w.interface) for w in log}
    assert ("alice", "save", "example", "done", "http") in seen
    assert ("alice", "save", "brain", "refused", "http") in seen  # the library it was refused on
    assert ("bob", "verify", "brain", "refused", "http") in seen
    assert ("carol", "reindex", "*", "done", "http") in seen
    done = next(w for w in log if w.member == "alice" and w.outcome == "done")
    assert done.target == f"example:{saved.json()['path']}" and done.token_id is not None
    assert any("alice may not write to library 'brain'" in w.detail for w in log)
    assert all(w.op != "search" for w in log)  # reads are not logged


def test_mcp_offers_and_runs_each_user_only_their_tools(team_server: dict[str, Any]) -> None:
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]

    async def session_of(token: str) -> tuple[set[str], dict[str, Any], Any, Any]:
        client = create_mcp_http_client(headers=_as(token))
        async with (
            client,
            streamable_http_client(f"{url}/mcp", http_client=client) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            init = await session.initialize()
            listed = {t.name for t in (await session.list_tools()).tools}
            query = "rotate the vault keys, cron timezone"
            found = await session.call_tool("search", {"query": query})
            opened = await session.call_tool("get", {"ref": secret})
            wrote = await session.call_tool(
                "save", {"title": "MCP note", "body": "x", "library": "brain"}
            )
            maps[token] = init.instructions or ""
            return listed, dict(found.structured_content or {}), opened, wrote

    maps: dict[str, str] = {}

    listed, found, opened, wrote = anyio.run(session_of, tokens["alice"])
    assert {"search", "get", "save", "ingest", "map"} <= listed
    assert not listed & {"stats", "doctor", "reindex", "collect", "git_import", "map_recompute"}
    assert found["hits"] and {h["library"] for h in found["hits"]} == {"example"}
    assert opened.is_error and "no entry" in opened.content[0].text
    assert wrote.is_error and "may not write to library 'brain'" in wrote.content[0].text
    listed, found, opened, wrote = anyio.run(session_of, tokens["bob"])
    assert "save" not in listed and "search" in listed  # bob writes nowhere
    assert found["hits"][0]["id"] == secret and not opened.is_error
    # each user's session starts with the map of what they may read, and no more
    alice_map, bob_map = maps[tokens["alice"]], maps[tokens["bob"]]
    assert "Library map (1 library" in alice_map and "- example (" in alice_map
    assert "- brain (" not in alice_map and "Zurich" not in alice_map
    assert "Zebra Vault" not in alice_map  # nor what they share with it
    assert "- brain (" in bob_map and "- example (" not in bob_map
    assert "`save`" in alice_map and "`save`" not in bob_map  # bob writes nowhere
    assert "Your roles on this team do not give you these tools: " in bob_map
    assert "read-only" not in bob_map
    # no token, no session: the guard answers before the MCP transport
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    refused = httpx.post(f"{url}/mcp", json=hello, headers=_as("bmt_" + "y" * 43))
    assert refused.status_code == 401


def test_a_team_users_save_runs_in_the_servers_writer_and_sees_only_their_libraries(
    team_server: dict[str, Any], home: Path
) -> None:
    """The writer process suggests a user's tags from the entries that user may read: alice
    saving a copy of a note in a library she may not read learns nothing of its tags."""
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]
    alice = _as(tokens["alice"])
    writer = writer_of(home)
    busy = settled(writer)  # loaded: it takes the next write
    copy = {"title": "Key rotation runbook", "body": f"{SECRET}. See [[Zebra Vault]].",
            "library": "example"}  # fmt: skip
    with httpx.Client(base_url=url, timeout=120) as http:
        first = http.post("/save", headers=alice, json=copy)
        assert cpu_ticks(writer) > busy  # the child wrote it
        assert first.status_code == 200 and first.json()["status"] == "saved"
        assert "zebratag" not in first.text and secret not in first.text
        again = http.post("/save", headers=alice, json=copy).json()
        assert again["status"] == "duplicate"
        assert [c["id"] for c in again["candidates"]] == [first.json()["id"]]
    log = ops.write_log(ops.Brain(home), ops.WriteLogInput()).writes
    outcomes = [(w.member, w.library, w.outcome) for w in log if w.op == "save"]
    assert sorted(outcomes) == [("alice", "example", "done"), ("alice", "example", "unchanged")]


def test_a_read_only_team_server_says_it_is_read_only(
    team_brain: dict[str, Any], home: Path
) -> None:
    """What a read-only server withholds is not blamed on the user's roles."""
    from brainmap.mcp_server import _team_instructions, tools
    from brainmap.team import OWNER, Principal, Role

    brain = ops.Brain(home)
    owner = _team_instructions(brain, tools(read_only=True), OWNER)
    assert "This server is read-only: the tools that write (" in owner
    assert "Your roles" not in owner and "- brain (" in owner and "- example (" in owner
    reader = _team_instructions(
        brain, tools(read_only=True), Principal("bob", {"brain": Role.READ})
    )
    assert "This server is read-only" in reader and "- example (" not in reader
    assert "Your roles on this team do not give you these tools: doctor, stats." in reader
    brain.close()


def test_a_revoked_or_expired_token_stops_working(team_server: dict[str, Any], home: Path) -> None:
    url, tokens = team_server["url"], team_server["tokens"]
    brain = ops.Brain(home)
    made = ops.token_create(brain, ops.TokenCreateInput(name="alice", label="to revoke"))
    assert httpx.get(f"{url}/libraries", headers=_as(made.token)).status_code == 200
    run_cli(home, "token", "revoke", str(made.id))  # another process, as an admin would
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/libraries", headers=_as(made.token)).status_code != 401:
        assert time.monotonic() < deadline, "a revoked token kept working"
        time.sleep(0.2)
    # an expired one: its row says so (tokens are made with a future expiry only)
    old = mint()
    Team(brain.cfg).repo.add_token("alice", digest(old), "old", "2020-01-01T00:00:00Z",
                                   "2021-01-01T00:00:00Z")  # fmt: skip
    assert httpx.get(f"{url}/libraries", headers=_as(old)).status_code == 401
    states = {t.label: t.state for t in ops.token_list(brain, ops.TokenListInput()).tokens}
    assert states["to revoke"] == "revoked" and states["old"] == "expired"
    # removing a user removes their tokens
    run_cli(home, "user", "remove", "bob")
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/libraries", headers=_as(tokens["bob"])).status_code != 401:
        assert time.monotonic() < deadline, "a removed user's token kept working"
        time.sleep(0.2)
    brain.close()


@both_backends
def test_tokens_are_kept_only_as_digests_and_the_team_outlives_the_index(
    backend: str, brain: ops.Brain, home: Path
) -> None:
    ops.user_add(brain, ops.UserAddInput(name="dana", role="read"))
    made = ops.token_create(brain, ops.TokenCreateInput(name="dana", expires="30d"))
    assert made.token.startswith("bmt_") and len(made.token) == 47
    team = Team(brain.cfg)
    if backend == "sqlite":
        stored = b"".join(p.read_bytes() for p in home.glob("team.db*"))
    else:
        rows = team.repo.db.rows("SELECT digest, label, member FROM token")
        stored = json.dumps(rows).encode()
    assert made.token.encode() not in stored and digest(made.token).encode() in stored
    principal = team.authenticate(made.token)
    assert principal is not None and principal.user == "dana"
    team.close()
    brain.close()
    drop_index(home)  # the index is disposable; the team is not part of it
    rebuilt = ops.Brain(home)
    ops.reindex(rebuilt, ops.ReindexInput(embed=False))
    assert [u.name for u in ops.user_list(rebuilt, ops.NoInput()).users] == ["dana"]
    again = Team(rebuilt.cfg)
    assert again.authenticate(made.token) is not None
    assert again.authenticate(made.token + "x") is None
    again.close()
    rebuilt.close()


def test_the_gui_signs_in_with_a_token_and_shows_only_the_users_libraries(
    team_server: dict[str, Any], home: Path
) -> None:
    url, tokens = team_server["url"], team_server["tokens"]
    with httpx.Client(base_url=url, timeout=60) as browser:
        first = browser.get("/ui/search?q=vault")
        assert first.status_code == 303
        assert first.headers["location"] == "/ui/login?next=%2Fui%2Fsearch%3Fq%3Dvault"
        page = browser.get("/ui/login?next=/ui/search?q=vault")
        assert page.status_code == 200 and 'type="password"' in page.text
        csrf = _csrf(page.text, "/ui/login")
        wrong = browser.post("/ui/login", data={"csrf_token": csrf, "token": "bmt_nope",
                                                "next": "/"})  # fmt: skip
        assert wrong.status_code == 401 and "not valid" in wrong.text
        assert browser.post("/ui/login", data={"token": tokens["alice"]}).status_code == 403
        signed = browser.post("/ui/login", data={"csrf_token": csrf, "token": tokens["alice"],
                                                 "next": "https://evil.example/"})  # fmt: skip
        assert signed.status_code == 303 and signed.headers["location"] == "/"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
        # the cookie names the sign-in, not the token: nothing else on the host can replay it
        assert tokens["alice"] not in cookie and "bmt_" not in cookie
        session = browser.cookies["brainmap_session"]
        assert httpx.get(f"{url}/search", params={"query": "kiwi"},
                         headers=_as(session)).status_code == 401  # fmt: skip
        forged = session[:-1] + ("0" if session[-1] != "0" else "1")
        assert httpx.get(f"{url}/", cookies={"brainmap_session": forged}).status_code == 303
        raw = httpx.get(f"{url}/", cookies={"brainmap_session": tokens["alice"]})
        assert raw.status_code == 303
        home_page = browser.get("/")
        assert (
            home_page.status_code == 200 and "Signed in as <strong>alice</strong>" in home_page.text
        )
        assert "/ui/search?library=example" in home_page.text
        assert "/ui/search?library=brain" not in home_page.text
        results = browser.get("/ui/search", params={"q": "vault unseal keys"})
        assert results.status_code == 200 and "Key rotation runbook" not in results.text
        hidden = browser.get("/ui/search", params={"q": "vault", "library": "brain"})
        assert hidden.status_code == 404  # a library she may not read is none of hers
        form = browser.get("/ui/save")
        assert '<option value="example"' in form.text and '<option value="brain"' not in form.text
        refused = browser.post("/ui/save", data={"csrf_token": _csrf(form.text, "/ui/save"),
                               "title": "GUI into brain", "body": "x", "library": "brain"})  # fmt: skip
        assert refused.status_code == 403 and "may not write to library" in refused.text
        # the cookie opens the GUI's pages only: REST and MCP still need the header
        assert browser.get("/search", params={"query": "kiwi"}).status_code == 401
        out = browser.post("/ui/logout", data={"csrf_token": _csrf(home_page.text, "/ui/logout")})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        assert browser.get("/").status_code == 303
    log = ops.write_log(ops.Brain(home), ops.WriteLogInput(user="alice")).writes
    assert [(w.op, w.interface, w.outcome) for w in log] == [("save", "gui", "refused")]


def _csrf(html: str, action: str) -> str:
    form = html[html.index(f'action="{action}"') :]
    found = re.search(r'name="csrf_token" value="([^"]+)"', form)
    assert found, f"no CSRF token for {action}"
    return found.group(1)


def test_the_owners_token_is_an_admin_and_a_team_may_serve_beyond_loopback(
    team_brain: dict[str, Any], home: Path
) -> None:
    owner = "owner-token-" + "z" * 20
    with serving(home, "--token", owner) as url:
        assert httpx.get(f"{url}/stats", headers=_as(owner)).status_code == 200
        saved = httpx.post(f"{url}/save", headers=_as(owner),
                           json={"title": "Owner note", "body": "x", "library": "brain"})  # fmt: skip
        assert saved.status_code == 200
        assert (
            httpx.get(f"{url}/stats", headers=_as(team_brain["tokens"]["bob"])).status_code == 403
        )
    log = ops.write_log(ops.Brain(home), ops.WriteLogInput(user="owner")).writes
    assert [(w.op, w.library, w.outcome) for w in log] == [("save", "brain", "done")]
    # a team needs no --token to bind every address: each request carries a user's token
    with serving(home, "--host", "0.0.0.0", token=team_brain["tokens"]["carol"]) as url:
        assert httpx.get(f"{url}/libraries").status_code == 401


def test_user_and_token_commands_say_what_a_user_expects(home: Path) -> None:
    assert "no users" in run_cli(home, "user", "list").stdout
    added = run_cli(home, "user", "add", "erin", "--role", "write", "-l", "brain")
    assert "added erin (write on brain)" in added.stdout and "first user" in added.stdout
    again = run_cli(home, "user", "add", "erin", check=False)
    assert again.returncode == 1 and "error: user 'erin' exists" in again.stderr
    bad = run_cli(home, "user", "add", "../x", check=False)
    assert bad.returncode == 1 and "invalid user name" in bad.stderr
    assert run_cli(home, "user", "add", "x", "-l", "brain", check=False).returncode == 2
    assert run_cli(home, "user", "grant", "erin", "god", check=False).returncode == 2
    assert run_cli(home, "user", "grant", "nobody", "read", check=False).returncode == 1
    run_cli(home, "user", "grant", "erin", "read")
    listed = json.loads(run_cli(home, "user", "list", "--json").stdout)
    assert listed["users"][0]["roles"] == {"*": "read", "brain": "write"}
    made = run_cli(home, "token", "create", "erin", "--label", "ci", "--expires", "90d")
    token = made.stdout.strip()
    assert token.startswith("bmt_") and "shown this once" in made.stderr
    shown = json.loads(run_cli(home, "token", "list", "erin", "--json").stdout)["tokens"]
    assert shown[0]["label"] == "ci" and shown[0]["state"] == "active"
    assert token not in json.dumps(shown)
    assert (
        run_cli(home, "token", "create", "erin", "--expires", "soon", check=False).returncode == 1
    )
    assert run_cli(home, "token", "revoke", "99", check=False).returncode == 1
    assert "revoked token 1" in run_cli(home, "token", "revoke", "1").stdout
    assert "took 1 role from erin" in run_cli(home, "user", "revoke", "erin", "brain").stdout
    assert "no writes logged" in run_cli(home, "user", "log").stdout
    assert "removed erin" in run_cli(home, "user", "remove", "erin").stdout
    for args in (("user", "list"), ("token", "list"), ("user", "log")):
        result = run_cli(home, *args, check=False)
        assert result.returncode == 0 and "Traceback" not in result.stderr


def test_the_write_log_filters_by_user_library_and_day(home: Path) -> None:
    brain = ops.Brain(home)
    team = Team(brain.cfg)
    team.add_user("fay")
    rows = [
        WriteRow(
            None, f"2026-0{m}-01T10:00:00Z", who, None, "http", "save", library, "", "done", ""
        )
        for m, who, library in ((1, "fay", "docs"), (2, "gus", "docs"), (3, "fay", "ops"))
    ]
    team.log(rows)
    team.close()
    log = ops.write_log
    assert [w.at[:7] for w in log(brain, ops.WriteLogInput()).writes] == [
        "2026-03", "2026-02", "2026-01"
    ]  # fmt: skip
    assert len(log(brain, ops.WriteLogInput(user="fay")).writes) == 2
    assert len(log(brain, ops.WriteLogInput(library="docs")).writes) == 2
    since = log(brain, ops.WriteLogInput.model_validate({"since": "2026-02-15"})).writes
    assert [w.library for w in since] == ["ops"]
    shown = run_cli(home, "user", "log", "--user", "fay")
    assert "fay  http  save ops" in shown.stdout and "gus" not in shown.stdout
    brain.close()


@contextlib.contextmanager
def _signed_in(url: str, token: str) -> Iterator[httpx.Client]:
    """A client signed in on the GUI, as a browser is after the sign-in form."""
    with httpx.Client(base_url=url, timeout=60) as client:
        yield _sign_in(client, token)


def _sign_in(client: httpx.Client, token: str) -> httpx.Client:
    page = client.get("/ui/login")
    done = client.post("/ui/login", data={"csrf_token": _csrf(page.text, "/ui/login"),
                                          "token": token, "next": "/"})  # fmt: skip
    assert done.status_code == 303, done.text
    return client


def test_pages_offer_only_the_forms_a_user_may_send(team_server: dict[str, Any]) -> None:
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]
    with _signed_in(url, tokens["bob"]) as reader:
        entry = reader.get(f"/ui/entry/{secret}")
        assert entry.status_code == 200 and "Key rotation runbook" in entry.text
        assert "Mark verified" not in entry.text  # bob reads brain, writes nothing
        assert "Your roles let you write to no library" in reader.get("/ui/save").text
        assert "Recompute map" not in reader.get("/").text
    with _signed_in(url, tokens["carol"]) as admin:
        assert "Mark verified" in admin.get(f"/ui/entry/{secret}").text
        assert "Recompute map" in admin.get("/").text


def test_signing_in_in_a_browser(
    team_server: dict[str, Any], browser: Browser, tmp_path: Path
) -> None:
    url, tokens = team_server["url"], team_server["tokens"]
    for size, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        page = context.new_page()
        errors = console_errors(page)
        shots = shots_folder(tmp_path, f"sign-in-{size}")
        page.goto(f"{url}/ui/search?q=kiwi")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        shot(page, shots, "form")
        page.get_by_label("Token").fill("bmt_wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("not valid")
        page.get_by_label("Token").fill(tokens["alice"])
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("Signed in as")).to_contain_text("alice")
        assert page.url.endswith("/ui/search?q=kiwi")  # back where she was going
        shot(page, shots, "signed-in")
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        # the one error: the wrong token's answer, 401 (the form shown again with the reason)
        assert errors == ["console: Failed to load resource: the server responded with a "
                          "status of 401 (Unauthorized)"]  # fmt: skip
        context.close()


@both_backends
def test_nothing_of_a_library_out_of_sight_shows_through_another(
    backend: str, team_server: dict[str, Any]
) -> None:
    """What an outside attack found: the graph, the 404s, the search terms, tag suggestions,
    supersession links and map bridges all told alice of `brain`, which she may not read."""
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]
    alice, carol = _as(tokens["alice"]), _as(tokens["carol"])
    with httpx.Client(base_url=url, timeout=60) as http:
        # the graph: nodes only brain holds are missing, as a node nobody holds is
        nothing = http.get("/neighbors", params={"node": "entity:no such thing"}, headers=alice)
        for node in ("tag:zebratag", "entity:zebra vault", "Zebra Vault", secret):
            seen = http.get("/neighbors", params={"node": node}, headers=alice)
            assert seen.status_code == 404, node
            assert seen.json()["hint"] == nothing.json()["hint"]
            assert http.get("/neighbors", params={"node": node}, headers=carol).status_code == 200
        walk = http.get("/neighbors", params={"node": "file:example/tool.py", "depth": 2},
                        headers=alice).json()  # fmt: skip
        assert all(n["key"] != f"entry:{secret}" for n in walk["nodes"])
        assert "Key rotation runbook" not in json.dumps(walk)
        shared = http.get("/neighbors", params={"node": "entity:shared thing"}, headers=alice)
        assert {e["library"] for e in shared.json()["edges"]} == {"example"}
        # brain's alias does not merge the entity into brain's, for her
        assert shared.json()["center"]["key"] == "entity:shared thing"
        merged = http.get("/neighbors", params={"node": "entity:shared thing"}, headers=carol)
        assert merged.json()["center"]["key"] == "entity:vault ops"
        # brain's code comment naming example's note is not among its backlinks, for her
        mine = http.get("/backlinks/old-rotation", headers=alice).json()
        assert [c["library"] for c in mine["breadcrumbs"]] == []
        theirs = http.get("/backlinks/old-rotation", headers=carol).json()
        assert [c["library"] for c in theirs["breadcrumbs"]] == ["brain"]
        # an entry out of sight is missing in the very words of one that is not there
        for path, body in (
            ("/verify", {"ref": "REF"}),
            ("/supersede", {"old": "example:notes/old-rotation.md", "new": "REF"}),
            ("/save", {"title": "t", "body": "b", "library": "example", "merge_into": "REF"}),
        ):
            answers = []
            for ref in (secret, "0123456789abcdef"):
                sent = json.loads(json.dumps(body).replace("REF", ref))
                answer = http.post(path, json=sent, headers=alice)
                assert "detail" in answer.json(), (path, ref, answer.text)
                answers.append((answer.status_code, answer.json()["detail"].replace(ref, "R"),
                                answer.json().get("hint")))  # fmt: skip
            assert answers[0] == answers[1] and answers[0][0] == 404, (path, answers)
        assert http.get(f"/backlinks/{secret}", headers=alice).status_code == 404
        crumbs = http.get("/backlinks/key-rotation-runbook", headers=alice).json()
        assert crumbs["entries"] == [] and crumbs["breadcrumbs"][0]["entries"] == []
        refs = http.get("/refs/example:tool.py", headers=alice).json()
        assert refs["breadcrumbs"][0]["entries"] == []
        # supersession links into brain are unresolved to her, as if brain had no such entry
        old = http.get("/get/example:notes/old-rotation.md", headers=alice).json()
        assert old["superseded_by"] == [] and "Key rotation runbook" not in json.dumps(old)
        assert http.get("/get/example:notes/old-rotation.md",
                        headers=carol).json()["superseded_by"][0]["id"] == secret  # fmt: skip
        # the search's terms: only what her hits hold, not what the whole index knows
        found = http.get("/search", params={"query": "zurich quarter kiwi", "mode": "bm25"},
                         headers=alice).json()  # fmt: skip
        assert "zurich" not in found["terms"]
        # the map: no bridge to brain, no word of it
        block = http.get("/map/example", headers=alice).json()
        assert "brain" not in block["bridged_libraries"]
        assert all("brain" not in b["libraries"] for b in block["bridges"])
        lines = http.get("/map", headers=alice).json()
        assert lines["libraries"][0]["bridged_libraries"] == []
        assert "Zebra" not in lines["text"] and "rotation runbook" not in lines["text"]
        assert "brain" in http.get("/map/example", headers=carol).json()["bridged_libraries"]
        # tag suggestions come from her libraries' entries only
        suggested = http.post("/save", headers=alice, json={
            "title": "Vault key rotation at the Zurich office", "body": SECRET, "force": True,
            "library": "example"}).json()  # fmt: skip
        assert suggested["status"] == "saved" and "zebratag" not in suggested["tags"]
        # a file of brain is in no library, to her
        inside = http.get(f"/refs/{team_server['home']}/brain/key-rotation-runbook.md",
                          headers=alice)  # fmt: skip
        outside = http.get("/refs//etc/hostname", headers=alice)
        assert inside.status_code == outside.status_code == 404
        assert inside.json()["hint"] == outside.json()["hint"]
        # collecting a file by path reads it on the server: admin of every library only
        eve = http.post("/collect", headers=alice,
                        json={"libraries": ["example"], "from_file": "x.json"})  # fmt: skip
        assert eve.status_code == 403
    log = ops.write_log(ops.Brain(team_server["home"]),
                        ops.WriteLogInput(user="alice")).writes  # fmt: skip
    assert any(w.op == "collect" and w.outcome == "refused" for w in log)


def test_a_second_attack_finds_nothing_more(team_server: dict[str, Any], home: Path) -> None:
    """What a second outside attack found: a removed user's sign-in came back as the user
    whose token got its number; a scoped admin's reindex named another library; a word only
    another library holds changed a hit's match; an unknown library's error listed them all."""
    url, tokens = team_server["url"], team_server["tokens"]
    alice = _as(tokens["alice"])
    brain = ops.Brain(home)
    ops.user_add(brain, ops.UserAddInput(name="mallory", role="read", library=["example"]))
    mallory = ops.token_create(brain, ops.TokenCreateInput(name="mallory"))
    with _signed_in(url, mallory.token) as session:
        assert session.get("/").status_code == 200
        ops.user_remove(brain, ops.UserInput(name="mallory"))
        again = ops.token_create(brain, ops.TokenCreateInput(name="carol", label="new laptop"))
        assert again.id != mallory.id  # a token's number is never given twice
        deadline = time.monotonic() + 10
        while session.get("/").status_code != 303:
            assert time.monotonic() < deadline, "a removed user's sign-in kept working"
            time.sleep(0.2)
    with httpx.Client(base_url=url, timeout=60) as http:
        # a word only brain holds weighs as a made-up word does in alice's search (by words:
        # the two queries' own vectors differ, whatever the libraries hold)
        held = http.get("/search", params={"query": "compose ports zurich", "mode": "bm25"},
                        headers=alice)  # fmt: skip
        made_up = http.get("/search", params={"query": "compose ports zqxjvw", "mode": "bm25"},
                           headers=alice)  # fmt: skip
        assert held.json()["hits"][0]["coverage"] == made_up.json()["hits"][0]["coverage"]
        assert held.json()["match"] == made_up.json()["match"]
        # an admin of example only: the report names no other library
        ops.user_add(brain, ops.UserAddInput(name="eve", role="admin", library=["example"]))
        eve = _as(ops.token_create(brain, ops.TokenCreateInput(name="eve")).token)
        write(Path(team_server["home"]).parent / "library" / "probe.md",
              "# Probe\n\nAbout [[Zebra Vault]] and the key rotation runbook.\n")  # fmt: skip
        report = http.post("/reindex", json={"embed": False}, headers=eve).json()
        assert [lib["library"] for lib in report["libraries"]] == ["example"]
        assert "brain" not in json.dumps({k: report[k] for k in ("map", "facts_paired", "rollups")})
        recomputed = http.post("/map/recompute", params={"library": "example"}, headers=eve)
        assert "brain" not in recomputed.text
        # a library granted but not there is unknown, in words that list no other
        ops.user_grant(brain, ops.GrantInput(name="alice", role="read", library=["ghost"]))
        time.sleep(2.5)  # the server reads roles again every two seconds
        for path in ("/search?query=x&library=ghost", "/map?library=ghost", "/map/ghost"):
            unknown = http.get(path, headers=alice)
            detail = unknown.json()["detail"]
            assert unknown.status_code == 404 and detail == "no library named 'ghost'", path
    brain.close()


def test_doctor_tells_the_team_and_grants_that_name_no_library(brain: ops.Brain) -> None:
    def team_check() -> Any:
        return next(c for c in ops.doctor(brain, ops.NoInput()).checks if c.name == "team")

    assert team_check().ok and "no users" in team_check().detail
    ops.user_add(brain, ops.UserAddInput(name="gil", role="read", library=["example"]))
    assert team_check().ok and "1 user(s), 0 usable token(s)" in team_check().detail
    assert team_check().items == ["gil: no usable token"]
    ops.user_grant(brain, ops.GrantInput(name="gil", role="write", library=["exmaple"]))
    found = team_check()
    assert not found.ok and "gil: write on 'exmaple', which is no library" in found.items
    assert found.fix == "fix the grant: brainmap user revoke NAME LIBRARY"


def test_a_teams_server_refuses_a_call_without_a_user(brain: ops.Brain) -> None:
    """A call that reaches an op with no user (a transport that lost the request) is
    refused, never run as the owner of the files."""
    from brainmap.ops.access import PRINCIPAL, requester

    team = Team(brain.cfg)
    with pytest.raises(UserError) as refused:
        requester({}, team, "mcp")
    assert refused.value.status == 401
    assert requester({}, None, "mcp") is None  # no team: no rules, the owner's server
    principal = ops_principal("ann")
    assert requester({PRINCIPAL: principal}, team, "http") is not None
    team.close()


def ops_principal(name: str) -> Any:
    from brainmap.team import Principal, Role

    return Principal(name, {"example": Role.READ}, 1)


def test_a_write_done_stays_done_when_the_log_cannot_be_written(brain: ops.Brain) -> None:
    from brainmap.ops.access import Requester, run
    from brainmap.team import Principal, Role

    team = Team(brain.cfg)
    team.add_user("ann")
    team.repo.db.execute("DROP TABLE write_log")  # the log is broken; the write must not be
    who = Requester(Principal("ann", {"example": Role.WRITE}, 1), team, "http")
    inp = ops.SaveInput(title="Written while the log is down", body="x", library="example")
    result = run(ops.OPS["save"], brain, inp, "http", who)
    assert result.status == "saved" and (brain.cfg.library("example").path / result.path).exists()
    team.close()


def test_the_duplicate_a_save_refuses_is_logged_as_unchanged(brain: ops.Brain) -> None:
    from brainmap.ops.access import Requester, run
    from brainmap.team import Principal, Role

    team = Team(brain.cfg)
    team.add_user("ann")
    who = Requester(Principal("ann", {"example": Role.WRITE}, 1), team, "http")
    body = "Compose port mappings are HOST:CONTAINER, and the host side comes first."
    first = run(ops.OPS["save"], brain, ops.SaveInput(title="Port order", body=body,
                                                     library="example"), "http", who)  # fmt: skip
    again = run(ops.OPS["save"], brain, ops.SaveInput(title="Port order", body=body,
                                                     library="example"), "http", who)  # fmt: skip
    assert (first.status, again.status) == ("saved", "duplicate")
    outcomes = [w.outcome for w in team.repo.writes(member="ann")]
    assert outcomes == ["unchanged", "done"]  # newest first
    team.close()


def test_terms_only_the_hits_hold_for_a_user_who_reads_some_libraries(
    team_brain: dict[str, Any], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terms of a search are cut to what the hits hold even for a word too frequent to
    be checked against the user's libraries one by one (no word here is: the check is off)."""
    from brainmap import ftsquery
    from brainmap.ops.access import Requester, run
    from brainmap.team import Principal, Role

    monkeypatch.setattr(ftsquery, "VIEW_CHECKED_DF", 0)
    brain = ops.Brain(home)
    team = Team(brain.cfg)
    who = Requester(Principal("alice", {"example": Role.READ}, 1), team, "http")
    inp = ops.SearchInput(query="zurich cron timezone", mode="bm25")
    result = run(ops.OPS["search"], brain, inp, "http", who)
    assert result.hits and "zurich" not in result.terms and "cron" in result.terms
    assert "zurich" in run(ops.OPS["search"], brain, inp, "http", None).terms  # the owner's
    team.close()
    brain.close()


def test_two_users_at_once_keep_to_their_own_views(team_server: dict[str, Any]) -> None:
    url, tokens, secret = team_server["url"], team_server["tokens"], team_server["secret"]
    leaks: list[str] = []

    def searches(token: str, may_see_secret: bool) -> None:
        with httpx.Client(base_url=url, timeout=60, headers=_as(token)) as http:
            for _ in range(15):
                hits = http.get("/search", params={"query": "vault unseal keys rotate"}).json()
                ids = {h["id"] for h in hits["hits"]}
                if (secret in ids) != may_see_secret:
                    leaks.append(token[:8])

    threads = [threading.Thread(target=searches, args=(tokens["alice"], False)) for _ in range(3)]
    threads += [threading.Thread(target=searches, args=(tokens["bob"], True)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert leaks == []


def test_cookies_of_other_sites_and_malformed_sign_ins(team_server: dict[str, Any]) -> None:
    url, tokens = team_server["url"], team_server["tokens"]
    with _signed_in(url, tokens["alice"]) as browser:
        session = browser.cookies["brainmap_session"]
        # another app on the same host name keeps a cookie the standard library cannot read
        raw = f'other={{"x": 1}}; brainmap_session={session}'
        assert httpx.get(f"{url}/", headers={"cookie": raw}).status_code == 200
    for bad in ("9" * 30 + ".9999999999." + "a" * 64, "1." + "9" * 5000 + ".abc", "..", "1.2"):
        answer = httpx.get(f"{url}/", cookies={"brainmap_session": bad})
        assert answer.status_code == 303, bad  # sent to sign in, never a 500


def test_team_commands_leave_nothing_behind_when_they_fail(home: Path) -> None:
    gone = run_cli(home, "user", "remove", "bob", check=False)
    assert gone.returncode == 1 and "no team yet" in gone.stderr
    assert not (home / "team.db").exists()
    bad = run_cli(home, "user", "add", "ann", "--role", "write", "--library", "bad name!",
                  check=False)  # fmt: skip
    assert bad.returncode == 1 and "invalid library name" in bad.stderr
    assert not (home / "team.db").exists()  # no user without the role asked for
    run_cli(home, "user", "add", "ann", "--role", "read")
    far = run_cli(home, "token", "create", "ann", "--expires", "9999y", check=False)
    assert far.returncode == 1 and "up to 100y" in far.stderr and "Traceback" not in far.stderr
