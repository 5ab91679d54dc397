"""RELIABILITY 3: the CLI, an HTTP server and two stdio MCP servers each save 200 notes at once:
no "database is locked", no lost note, each indexed once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from brainmap import ops
from conftest import both_backends, serving

NOTES = int(os.environ.get("BRAINMAP_TEST_NOTES", "200"))
# on PostgreSQL fewer, for the suite's time: the same four writers, the same checks
NOTES_POSTGRES = int(os.environ.get("BRAINMAP_TEST_NOTES_POSTGRES", "10"))
WORDS = "amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lotus".split()


def _body(writer: str, i: int) -> str:
    return f"{writer} wrote note {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(6))


@pytest.mark.slow
@pytest.mark.timeout(900)
@both_backends
def test_four_writers_in_four_processes(
    backend: str, brain: ops.Brain, home: Path, library: Path
) -> None:
    notes = NOTES_POSTGRES if backend == "postgres" else NOTES
    entries_before = brain.store.counts()["entries"]
    brain.close()
    results: dict[str, list[dict[str, object]]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def record(writer: str, out: dict[str, object] | None, error: str | None) -> None:
        with lock:
            if error is not None:
                errors.append(f"{writer}: {error}")
            else:
                results.setdefault(writer, []).append(out or {})

    def cli_save(i: int) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "brainmap", "save", f"cli note {i}", "-b", _body("cli", i),
             "-l", "example", "--force", "--json"],
            check=False, capture_output=True, text=True, timeout=300,
            env={**os.environ, "BRAINMAP_HOME": str(home)},
        )  # fmt: skip
        if proc.returncode:
            record("cli", None, proc.stderr[-300:])
        else:
            record("cli", json.loads(proc.stdout), None)

    def cli_writer() -> None:
        with ThreadPoolExecutor(4) as pool:  # several `brainmap save` processes at a time
            list(pool.map(cli_save, range(notes)))

    def http_writer(url: str) -> None:
        with httpx.Client(base_url=url, timeout=300) as client:
            for i in range(notes):
                r = client.post("/save", json={"title": f"http note {i}", "body": _body("http", i),
                                               "library": "example", "force": True})  # fmt: skip
                record("http", r.json() if r.status_code == 200 else None,
                       None if r.status_code == 200 else r.text[-300:])  # fmt: skip

    def mcp_writer(name: str) -> None:
        async def run() -> None:
            params = StdioServerParameters(command=sys.executable, args=["-m", "brainmap", "mcp"],
                                           env={**os.environ, "BRAINMAP_HOME": str(home)})  # fmt: skip
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for i in range(notes):
                    result = await session.call_tool("save", {
                        "title": f"{name} note {i}", "body": _body(name, i), "library": "example",
                        "force": True})  # fmt: skip
                    text = result.content[0].text  # type: ignore[union-attr]
                    record(name, None if result.is_error else json.loads(text),
                           text if result.is_error else None)  # fmt: skip

        anyio.run(run)

    with serving(home) as url:
        threads = [
            threading.Thread(target=cli_writer),
            threading.Thread(target=http_writer, args=(url,)),
        ]
        threads += [threading.Thread(target=mcp_writer, args=(name,)) for name in ("mcp1", "mcp2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert errors == [], errors[:5]
    assert {writer: len(saved) for writer, saved in results.items()} == dict.fromkeys(
        ("cli", "http", "mcp1", "mcp2"), notes
    )
    saved = [s for writer in results.values() for s in writer]
    assert all(s["status"] == "saved" for s in saved)
    ids = {str(s["id"]) for s in saved}
    assert len(ids) == 4 * notes  # no note lost or saved twice
    after = ops.Brain(home)
    assert after.store.counts()["entries"] == entries_before + 4 * notes  # each indexed once
    for s in saved:
        assert Path(str(s["file"])).is_file()
    hits = after.searcher.search(f"mcp2 wrote note {notes - 1}", mode="bm25", limit=1).hits
    assert hits[0].title == f"mcp2 note {notes - 1}"
    assert after.store.vectors.pending_count(after.searcher.model) == 0
    assert after.store.integrity() == []
    after.close()


_SAVE_ONE = """
import json, sys
from brainmap import ops
brain = ops.Brain(sys.argv[1])
kw = json.loads(sys.argv[2])
print(json.dumps(ops.to_jsonable(ops.save(brain, ops.SaveInput(**kw)))))
"""


def _in_processes(home: Path, inputs: list[dict[str, object]]) -> list[dict[str, object]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVE_ONE, str(home), json.dumps(kw)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kw in inputs
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in outputs]
    return [json.loads(out) for out, _ in outputs]


def test_same_note_saved_by_four_processes_at_once_is_written_once(
    brain: ops.Brain, home: Path, library: Path
) -> None:
    brain.close()
    note = {"title": "Rotate the signing key", "body": "Every 90 days, with `make rotate`.",
            "library": "example"}  # fmt: skip
    results = _in_processes(home, [note] * 4)
    assert sorted(r["status"] for r in results) == ["duplicate"] * 3 + ["saved"]
    assert len(list(library.glob("rotate-the-signing-key*.md"))) == 1


def test_four_processes_merging_into_one_entry_lose_nothing(
    brain: ops.Brain, home: Path, library: Path
) -> None:
    target = brain.store.entries.find_entry("example:gotchas/cron-timezone.md")
    assert target is not None
    brain.close()
    inputs = [
        {"title": f"Update {i}", "body": f"merged body {i}", "merge_into": target[0]}
        for i in range(4)
    ]
    assert {r["status"] for r in _in_processes(home, inputs)} == {"merged"}
    text = (library / "gotchas" / "cron-timezone.md").read_text()
    assert all(f"merged body {i}" in text for i in range(4))
