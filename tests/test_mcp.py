"""MCP with the official SDK client: every tool over stdio (a spawned `brainmap mcp`) and over
streamable HTTP (a real `brainmap serve`). RELIABILITY 15 (stdio exits on EOF)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from brainmap import libmap, ops
from brainmap.mcp_server import tool_list
from conftest import serving
from test_server import _snapshot

TOOLS = {"search", "get", "stats", "doctor", "reindex", "save", "ingest", "libraries",
         "neighbors", "backlinks", "refs", "git_import", "audit", "verify", "collect",
         "ask", "map", "get_map", "map_recompute",
         "feedback", "supersede"}  # fmt: skip
Connect = Callable[[], AbstractAsyncContextManager[ClientSession]]


def _stdio(home: Path, *args: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "brainmap", "mcp", *args],
            env={**os.environ, "BRAINMAP_HOME": str(home)},
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session

    return connect


def _http(url: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        async with (
            streamable_http_client(f"{url}/mcp") as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            yield session

    return connect


async def _call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return dict(result.structured_content or {})


async def _exercise_every_tool(connect: Connect) -> None:
    async with connect() as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == TOOLS
        assert all(tool.description and len(tool.description) > 60 for tool in listed.values())
        assert listed["search"].input_schema["required"] == ["query"]
        hits = (await _call(session, "search", {"query": "undo the last commit", "limit": 3}))[
            "hits"
        ]
        assert hits[0]["path"] == "patterns/git-undo-commit.md"
        entry = await _call(session, "get", {"ref": hits[0]["id"]})
        assert entry["title"] == "Undo the last git commit"
        assert (await _call(session, "stats", {}))["entries"] > 0
        assert "checks" in await _call(session, "doctor", {})
        libraries = (await _call(session, "libraries", {}))["libraries"]
        assert {lib["name"] for lib in libraries} == {"brain", "example"}
        saved = await _call(session, "save", {"title": "MCP saved: mango lassi ratio",
                                              "body": "two parts yoghurt, one part mango", "library": "example"})  # fmt: skip
        assert saved["status"] == "saved"
        duplicate = await _call(session, "save", {"title": "MCP saved: mango lassi ratio", "library": "example",
                                                  "body": "two parts yoghurt, one part mango"})  # fmt: skip
        assert (
            duplicate["status"] == "duplicate" and duplicate["candidates"][0]["id"] == saved["id"]
        )
        hint = await _call(session, "ingest", {})
        assert hint["status"] == "hint" and "uri" in hint["message"]
        ingested = await _call(session, "ingest", {"text": "Observed: the nightly build takes 41 minutes.",
                                                   "uri": "ci://nightly", "library": "example"})  # fmt: skip
        assert ingested["status"] == "saved"
        report = await _call(session, "reindex", {"embed": False})
        assert {lib["library"] for lib in report["libraries"]} == {"brain", "example"}
        found = (await _call(session, "search", {"query": "mango lassi"}))["hits"]
        assert found[0]["id"] == saved["id"]
        replaced = await _call(session, "supersede", {"old": ingested["id"], "new": saved["id"]})
        assert replaced["status"] == "superseded" and replaced["old"] == ingested["id"]
        nightly = await _call(session, "search", {"query": "nightly build minutes", "mode": "bm25"})
        assert ingested["id"] not in [h["id"] for h in nightly["hits"]]
        nightly = await _call(session, "search", {"query": "nightly build minutes", "mode": "bm25",
                                                  "include_inactive": True})  # fmt: skip
        assert ingested["id"] in [h["id"] for h in nightly["hits"]]
        bad = await session.call_tool("search", {"query": 3})
        assert bad.is_error and "invalid arguments" in bad.content[0].text  # type: ignore[union-attr]
        missing = await session.call_tool("get", {"ref": "no-such-entry"})
        assert missing.is_error and "no entry" in missing.content[0].text  # type: ignore[union-attr]
        # the graph tools
        hop = (await _call(session, "search", {"query": "undo the last commit", "hop": 3}))["hits"]
        assert hop[0]["hops"]["file"] == "file:example/patterns/git-undo-commit.md"
        walk = await _call(session, "neighbors", {"node": "example:patterns/git-undo-commit.md"})
        assert "file:example/patterns/git-undo-commit.md" in {n["key"] for n in walk["nodes"]}
        links = await _call(session, "backlinks", {"ref": "git-undo-commit"})
        assert links["entries"] == ["example:patterns/git-undo-commit.md"]
        refs = await _call(session, "refs", {"file": "example:patterns/git-undo-commit.md"})
        assert refs["breadcrumbs"] == []
        imported = await _call(session, "git_import", {})
        assert "example" in imported["not_git"]
        assert (await _call(session, "audit", {"kind": "stale"}))["kind"] == "stale"
        verified = await _call(session, "verify", {"ref": saved["id"]})
        assert verified["status"] == "verified"
        # the facts tools
        collected = await _call(session, "collect", {"libraries": ["example"]})
        assert collected["libraries"][0]["library"] == "example"
        asked = await _call(session, "ask", {"question": "undo the last commit", "web": False})
        assert asked["info"][0]["path"] == "patterns/git-undo-commit.md" and asked["facts"] == []
        contradict = await _call(session, "audit", {"kind": "contradict"})
        assert contradict["conflicts"] == []
        # the library map
        lines = (await _call(session, "map", {}))["libraries"]
        assert {line["library"] for line in lines} == {"brain", "example"}
        block = await _call(session, "get_map", {"library": "example"})
        assert block["status"] == "active" and block["narrative_source"] == "README.md"
        recomputed = await _call(session, "map_recompute", {"library": "example"})
        assert recomputed["unchanged"] == ["example"]
        unknown = await session.call_tool("get_map", {"library": "nope"})
        assert unknown.is_error and "no library" in unknown.content[0].text  # type: ignore[union-attr]


def test_every_tool_over_stdio(brain: ops.Brain, home: Path) -> None:
    brain.close()
    anyio.run(_exercise_every_tool, _stdio(home))


def test_every_tool_over_streamable_http(brain: ops.Brain, home: Path) -> None:
    brain.close()
    with serving(home) as url:
        anyio.run(_exercise_every_tool, _http(url))


async def initialize(home: Path) -> types.InitializeResult:
    """What a stdio MCP server answers to a real client's initialize."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "brainmap", "mcp"],
                                   env={**os.environ, "BRAINMAP_HOME": str(home)})  # fmt: skip
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await session.initialize()


def test_instructions_say_what_the_brain_holds(brain: ops.Brain, home: Path) -> None:
    brain.close()
    init = anyio.run(initialize, home)
    assert init.instructions and "`search` first" in init.instructions
    assert "Library map (2 libraries" in init.instructions
    assert "- example (14 entries): A small brain used by" in init.instructions


def test_read_only_offers_no_write_tools(brain: ops.Brain, home: Path) -> None:
    brain.close()

    async def check() -> None:
        async with _stdio(home, "--read-only")() as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == TOOLS - {"save", "ingest", "reindex", "git_import", "verify", "collect",
                                     "map_recompute", "supersede"}  # fmt: skip
            refused = await session.call_tool("save", {"title": "x"})
            assert refused.is_error and "read-only" in refused.content[0].text  # type: ignore[union-attr]

    anyio.run(check)


def test_search_tool_says_no_close_match_for_nonsense(brain: ops.Brain, home: Path) -> None:
    brain.close()

    async def check() -> None:
        async with _stdio(home)() as session:
            for nonsense in ("qwxzv plokjh", "?!...;;"):
                found = await _call(session, "search", {"query": nonsense})
                assert (found["match"], found["hits"]) == ("none", []), nonsense
            found = await _call(session, "search", {"query": "undo the last commit"})
            assert found["match"] == "strong" and found["hits"]

    anyio.run(check)


def test_collect_reads_no_file_outside_the_libraries(
    brain: ops.Brain, home: Path, library: Path, tmp_path: Path
) -> None:
    """RELIABILITY 22 over MCP: an agent names no file outside the libraries for reading."""
    line = json.dumps({"Names": "shop-web-1", "Image": "nginx", "Ports": "0.0.0.0:80->80/tcp"})
    outside = tmp_path / "outside" / "ps.json"
    outside.parent.mkdir()
    outside.write_text(line + "\n")
    inside = library / "ps.json"
    inside.write_text(line + "\n")
    brain.close()

    async def check() -> None:
        async with _stdio(home)() as session:
            said = []
            for path in (outside, outside.with_name("missing.json"), Path("/etc/passwd")):
                refused = await session.call_tool("collect", {
                    "libraries": ["example"], "source": ["runtime"], "from_file": str(path)})  # fmt: skip
                assert refused.is_error
                said.append(refused.content[0].text)  # type: ignore[union-attr]
            assert len(set(said)) == 1 and "allow_from" in said[0]  # existing or not: one answer
            read = await _call(session, "collect", {
                "libraries": ["example"], "source": ["runtime"], "from_file": str(inside)})  # fmt: skip
            assert read["libraries"][0]["ran"] == [f"runtime from {inside}"]

    anyio.run(check)


def test_tool_list_snapshot() -> None:
    """Interface changes are reviewed: the MCP tool list is compared with a snapshot."""
    tools = [tool.model_dump(mode="json", exclude_none=True) for tool in tool_list(read_only=False)]
    # one naming style, whatever the HTTP path says (git-import is the git_import tool)
    assert all(re.fullmatch("[a-z]+(_[a-z]+)*", tool["name"]) for tool in tools)
    _snapshot("mcp_tools.json", tools)


def test_stdio_server_exits_soon_after_stdin_closes(brain: ops.Brain, home: Path) -> None:
    """RELIABILITY 15: an agent that goes away must not leave a server behind."""
    brain.close()
    proc = subprocess.Popen([sys.executable, "-m", "brainmap", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "BRAINMAP_HOME": str(home)})  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    proc.stdin.write((json.dumps(hello) + "\n").encode())
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()  # it is up and answering
    proc.stdin.close()
    proc.wait(timeout=10)  # a server left behind fails here (speed is for benchmarks)
    assert proc.returncode == 0


def test_read_only_instructions_name_only_the_tools_offered(brain: ops.Brain, home: Path) -> None:
    brain.close()
    every = {o.tool for o in ops.served()}

    async def check(args: tuple[str, ...]) -> tuple[str, set[str]]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "brainmap", "mcp", *args],
            env={**os.environ, "BRAINMAP_HOME": str(home)},
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            listed = {tool.name for tool in (await session.list_tools()).tools}
        return init.instructions or "", listed

    for args in ((), ("--read-only",)):
        text, listed = anyio.run(check, args)
        named = set(re.findall(r"`([a-z_]+)`", text)) & every
        assert named <= listed, (args, named - listed)
        assert ("save" in named) == (not args) and ("read-only" in text) == bool(args)


def test_help_of_read_only_names_every_tool_it_drops() -> None:
    from click.testing import CliRunner

    from brainmap.cli.main import cli

    writes = {o.tool for o in ops.served() if o.writes}
    for command in ("serve", "mcp"):
        shown = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
        assert all(tool in shown for tool in writes), (command, writes - set(shown.split()))


def test_stdio_answers_a_line_that_is_not_json_with_a_parse_error(
    brain: ops.Brain, home: Path
) -> None:
    brain.close()
    proc = subprocess.Popen([sys.executable, "-m", "brainmap", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "BRAINMAP_HOME": str(home)})  # fmt: skip
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    bad = [b"{not json", b"\xff\xfe\x80", b"[" * 100_000 + b"]" * 100_000]
    try:
        out, _ = proc.communicate(
            b"".join(line + b"\n" for line in bad)
            + b'{"jsonrpc": "2.0", "id": 7}\n'  # JSON, but no JSON-RPC message
            + json.dumps(hello).encode()
            + b"\n",
            timeout=60,
        )
    finally:
        proc.kill()
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a.get("error", {}).get("code") for a in answers] == [-32700] * 3 + [-32600, None]
    assert all(a["jsonrpc"] == "2.0" and a["id"] is None for a in answers[:4])
    assert answers[4]["id"] == 1 and answers[4]["result"]["serverInfo"]["name"] == "brainmap"


def test_a_stdio_server_writes_the_map_its_saves_wait_for_before_it_exits(
    brain: ops.Brain, home: Path
) -> None:
    """The map of a session's saves settles in the background; a session that ends first
    (stdin closed, or SIGTERM) still leaves it current."""
    brain.close()

    async def save_and_close() -> None:
        async with _stdio(home)() as session:
            note = {"title": "Closing time", "body": "the map settles", "library": "example",
                    "force": True}  # fmt: skip
            assert (await _call(session, "save", note))["status"] == "saved"

    anyio.run(save_and_close)
    with ops.Brain(home) as after:
        assert libmap.stale(after.cfg, after.store) == []
    env = {**os.environ, "BRAINMAP_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "brainmap", "mcp"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "save",
            "arguments": {"title": "Killed", "body": "by SIGTERM", "library": "example",
                          "force": True}}},
    ]  # fmt: skip
    for message in messages:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert answers[1]["id"] == 2 and not answers[1]["result"].get("isError")
    with ops.Brain(home) as during:
        assert libmap.stale(during.cfg, during.store) == ["example"]  # waiting to settle
    proc.send_signal(signal.SIGTERM)  # stdin still open
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    with ops.Brain(home) as after:
        assert libmap.stale(after.cfg, after.store) == []
