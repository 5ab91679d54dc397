"""Usage telemetry end to end: hits served through ops, a CLI process, a real HTTP server and
a hook are recorded with their interface, as are get and feedback, in usage.db outside the
index; it survives a rebuilt index, can be turned off, and a busy usage.db fails no search."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import apsw
import httpx
import pytest

from agent_fixtures import event
from brainmap import config as config_mod
from brainmap import ops, usage
from brainmap.errors import UserError
from brainmap.store import UsageEvent, UsageStore
from conftest import run_cli, serving, write


def _events(home: Path, kind: str | None = None) -> list[UsageEvent]:
    store = UsageStore(home / "usage.db")
    try:
        return store.events(kind=kind)
    finally:
        store.close()


def _wait_for(home: Path, check: object, timeout_s: float = 15.0) -> list[UsageEvent]:
    """The events once ``check(events)`` holds (a server writes about once a second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = _events(home) if (home / "usage.db").exists() else []
        if check(found):  # type: ignore[operator]
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"usage never showed up: {found}")
        time.sleep(0.2)


def _disable(home: Path) -> None:
    cfg = config_mod.load(home)
    cfg.usage.enabled = False
    config_mod.save(cfg)


def test_ops_record_hits_gets_and_feedback_with_the_callers_interface(
    brain: ops.Brain, home: Path
) -> None:
    result = ops.search(brain, ops.SearchInput(query="database is locked"))
    assert result.hits
    ops.OPS["search"].run(brain, ops.SearchInput(query="undo the last commit"), "mcp")
    entry = ops.get(brain, ops.GetInput(ref="example:patterns/git-undo-commit.md"))
    ops.OPS["get"].run(brain, ops.GetInput(ref=entry.id), "http")
    judged = ops.feedback(brain, ops.FeedbackInput(ref=entry.id, useful=True))
    assert judged.recorded and judged.path == "patterns/git-undo-commit.md"
    ops.OPS["feedback"].run(
        brain, ops.FeedbackInput(ref="example:gotchas/cron-timezone.md", useful=False), "mcp"
    )
    assert usage.flush()  # buffered until now (or the background thread's next second)
    hits = _events(home, "hit")
    first = [h for h in hits if h.query == "database is locked"]
    # one hit per entry (its first place), in the order served
    assert [h.entry_id for h in first] == list(dict.fromkeys(h.id for h in result.hits))
    assert first[0].rank == 1 and first[0].interface == "cli"
    assert first[0].library == "example" and first[0].path == result.hits[0].path
    assert {h.interface for h in hits if h.query == "undo the last commit"} == {"mcp"}
    gets = _events(home, "get")
    assert [(g.entry_id, g.interface) for g in gets] == [(entry.id, "cli"), (entry.id, "http")]
    assert [(e.kind, e.interface) for e in _events(home) if e.kind.endswith("useful")] == [
        ("useful", "cli"), ("not_useful", "mcp"),
    ]  # fmt: skip
    with pytest.raises(Exception, match="no entry"):
        ops.feedback(brain, ops.FeedbackInput(ref="example:nope.md", useful=True))


def test_a_cli_process_records_its_hits_and_gets(brain: ops.Brain, home: Path) -> None:
    brain.close()
    run_cli(home, "search", "compose ports")
    run_cli(home, "get", "example:gotchas/compose-port-order.md")
    run_cli(home, "feedback", "example:gotchas/compose-port-order.md", "--not-useful")
    found = _events(home)
    hits = [e for e in found if e.kind == "hit"]
    assert hits and {e.interface for e in found} == {"cli"}
    assert hits[0].query == "compose ports" and hits[0].path == "gotchas/compose-port-order.md"
    assert [e.kind for e in found if e.kind != "hit"] == ["get", "not_useful"]
    refused = run_cli(home, "feedback", "example:gotchas/compose-port-order.md", check=False)
    assert refused.returncode == 2 and "--useful" in refused.stderr


def test_a_real_http_server_records_hits_gets_and_feedback(brain: ops.Brain, home: Path) -> None:
    brain.close()
    with serving(home) as url:
        hits = httpx.get(f"{url}/search", params={"query": "undo the last commit"}).json()["hits"]
        entry_id = hits[0]["id"]
        assert httpx.get(f"{url}/get/{entry_id}").status_code == 200
        posted = httpx.post(f"{url}/feedback", json={"ref": entry_id, "useful": True})
        assert posted.status_code == 200 and posted.json()["recorded"] is True
        missing = httpx.post(f"{url}/feedback", json={"ref": "example:nope.md", "useful": True})
        assert missing.status_code == 404
        # the server writes its buffer on a background thread, while it runs
        found = _wait_for(home, lambda evs: any(e.kind == "useful" for e in evs))
    assert {e.interface for e in found} == {"http"}
    assert [e.kind for e in found if e.entry_id == entry_id][:1] == ["hit"]
    assert {"get", "useful"} <= {e.kind for e in found if e.entry_id == entry_id}


def test_a_hook_records_the_entries_it_injects(
    brain: ops.Brain, home: Path, tmp_path: Path
) -> None:
    brain.close()
    project = tmp_path / "proj"
    code = write(project / "job.py", "# Brain: cron-timezone\nprint('nightly')\n")
    data = event("PreToolUse", project, tool_name="Read", tool_input={"file_path": str(code)})
    proc = subprocess.run(
        [sys.executable, "-m", "brainmap", "--home", str(home), "hook", "PreToolUse"],
        input=json.dumps(data), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "Nightly job ran at the wrong hour" in proc.stdout
    (hit,) = _events(home)
    assert (hit.kind, hit.interface, hit.path) == ("hit", "hook", "gotchas/cron-timezone.md")
    assert hit.query == f"Read {code}"
    # the status probe reads everything and records nothing
    probe = event("PreToolUse", project, session="brainmap-status-probe", tool_name="Read",
                  tool_input={"file_path": str(code)})  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "brainmap", "--home", str(home), "hook", "PreToolUse"],
        input=json.dumps(probe), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert len(_events(home)) == 1


def test_usage_survives_deleting_the_index_and_a_reindex(brain: ops.Brain, home: Path) -> None:
    entry = ops.get(brain, ops.GetInput(ref="example:gotchas/http-429-backoff.md"))
    ops.search(brain, ops.SearchInput(query="retry 429 backoff"))
    usage.flush()
    brain.close()
    for name in ("brain.db", "brain.db-wal", "brain.db-shm"):
        (home / name).unlink(missing_ok=True)
    rebuilt = ops.Brain(home)
    try:
        ops.reindex(rebuilt, ops.ReindexInput())
        stats = ops.stats(rebuilt, ops.NoInput())
    finally:
        rebuilt.close()
    top = stats.usage.most_used[0]
    # the entry's id comes back the same (library + path), so its usage is its own again
    assert (top.id, top.path, top.gets) == (entry.id, "gotchas/http-429-backoff.md", 1)
    assert top.hits >= 1 and top.title == entry.title
    assert stats.usage.events == len(_events(home))


def test_turned_off_nothing_is_recorded(brain: ops.Brain, home: Path) -> None:
    brain.close()
    _disable(home)
    run_cli(home, "search", "compose ports")
    out = run_cli(home, "feedback", "example:gotchas/compose-port-order.md", "--useful").stdout
    assert "not recorded" in out
    off = ops.Brain(home)
    try:
        ops.search(off, ops.SearchInput(query="database is locked"))
        ops.get(off, ops.GetInput(ref="example:gotchas/compose-port-order.md"))
        assert not ops.feedback(
            off, ops.FeedbackInput(ref="example:README.md", useful=True)
        ).recorded
        usage.flush()
        assert ops.stats(off, ops.NoInput()).usage.enabled is False
    finally:
        off.close()
    assert "usage           off" in run_cli(home, "stats").stdout
    assert not (home / "usage.db").exists()
    assert "[usage]\nenabled = false" in (home / "config.toml").read_text()


def test_a_locked_or_broken_usage_db_fails_no_search(brain: ops.Brain, home: Path) -> None:
    ops.search(brain, ops.SearchInput(query="warm up"))
    assert usage.flush()
    holder = apsw.Connection(str(home / "usage.db"))
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        start = time.monotonic()
        assert ops.search(brain, ops.SearchInput(query="database is locked")).hits
        assert time.monotonic() - start < 2
        start = time.monotonic()
        # dropped after a short wait (the background thread's own try may come first)
        assert usage.flush() is False
        assert time.monotonic() - start < 2.5
        proc = run_cli(home, "search", "compose ports")
        assert "compose" in proc.stdout.lower() and proc.stderr == ""
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    before = len(_events(home))
    ops.search(brain, ops.SearchInput(query="undo the last commit"))
    assert usage.flush() and len(_events(home)) > before  # free again: recorded again
    brain.close()
    for name in ("usage.db-wal", "usage.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "usage.db").write_bytes(b"this is no database" * 100)
    assert "compose" in run_cli(home, "search", "compose ports").stdout.lower()
    assert "unreadable" in run_cli(home, "stats").stdout


def test_stats_shows_the_most_and_least_used(brain: ops.Brain, home: Path) -> None:
    for _ in range(3):
        ops.get(brain, ops.GetInput(ref="example:patterns/git-undo-commit.md"))
    ops.get(brain, ops.GetInput(ref="example:gotchas/cron-timezone.md"))
    report = ops.stats(brain, ops.NoInput()).usage
    assert report.enabled and report.events == 4 and report.since
    assert [(e.path, e.gets) for e in report.most_used] == [
        ("patterns/git-undo-commit.md", 3), ("gotchas/cron-timezone.md", 1),
    ]  # fmt: skip
    assert report.used_entries == 2 and report.never_used > 0
    least = report.least_used
    assert least and all(e.hits == e.gets == 0 for e in least)
    assert all(e.path != "diary/2026-11-01.md" for e in least)  # the diary is a log
    brain.close()
    out = run_cli(home, "stats").stdout
    assert "most used" in out and "least used" in out
    assert "3 gets" in out and "example:patterns/git-undo-commit.md" in out
    data = json.loads(run_cli(home, "stats", "--json").stdout)
    assert data["usage"]["most_used"][0]["path"] == "patterns/git-undo-commit.md"


def _logged(at: str, kind: str, entry_id: str = "e1") -> UsageEvent:
    return UsageEvent(at, kind, entry_id, "lib", f"{entry_id}.md", "http", "q", 1)


def test_hits_older_than_hit_days_leave_the_log_and_stay_in_the_sums(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "usage.db"
    now = time.time()
    old, recent = usage.stamp(now - 200 * 86400), usage.stamp(now - 86400)
    store = UsageStore(path)
    store.add([_logged(old, "hit") for _ in range(7)])
    store.add([_logged(recent, "hit"), _logged(old, "get"),
               _logged(old, "useful")])  # fmt: skip
    store.close()

    assert usage.Recorder(path, hit_days=0).forget_old_hits(now) == 0  # 0 keeps them all
    assert usage.Recorder(path, hit_days=300).forget_old_hits(now) == 0
    assert usage.Recorder(path, hit_days=90).forget_old_hits(now) == 7

    store = UsageStore(path)
    try:
        assert sorted((e.kind, e.at) for e in store.events()) == sorted(
            [("hit", recent), ("get", old), ("useful", old)]
        )
        sums = store.usage()["e1"]
        assert (sums.hits, sums.gets, sums.useful) == (8, 1, 1)  # the sums still count them
        assert store.event_count() == 10  # every event ever recorded, the dropped hits too
        store.add([_logged(old, "hit") for _ in range(5)])
    finally:
        store.close()
    monkeypatch.setattr(usage, "HIT_BATCH", 2)
    monkeypatch.setattr(usage, "HIT_PAUSE_S", 0.0)
    assert usage.Recorder(path, hit_days=90).forget_old_hits(now) == 5  # in small batches


def test_a_search_logs_its_hits_once_and_an_older_log_is_read_and_aged_out(
    tmp_path: Path,
) -> None:
    """A search is one row with its query, its hits a short row each; a file whose hits are
    events of their own (version 1) keeps them readable until they age out."""
    path = tmp_path / "usage.db"
    now = time.time()
    old, recent = usage.stamp(now - 200 * 86400), usage.stamp(now - 3600)
    store = UsageStore(path)
    store.conn.execute("DROP TABLE hit; DROP TABLE search; PRAGMA user_version = 1")
    store.add([_logged(old, "get")])
    store.conn.execute(  # a hit as version 1 logged it
        "INSERT INTO event(at, kind, entry_id, library, path, interface, query, rank) "
        "VALUES (?, 'hit', 'e1', 'lib', 'e1.md', 'cli', 'old query', 1)",
        (old,),
    )
    store.close()
    store = UsageStore(path)  # upgraded
    try:
        query = "how do I undo a commit " * 20  # recorded once, not once a hit
        served = [UsageEvent(recent, "hit", f"e{n}", "lib", f"e{n}.md", "http", query, n)
                  for n in range(1, 11)]  # fmt: skip
        store.add([*served, *served[:3]])  # two searches of the same time and query
        assert store.conn.execute("SELECT count(*) FROM search").fetchall() == [(2,)]
        assert store.conn.execute("SELECT count(*) FROM hit").fetchall() == [(13,)]
        hits = store.events(kind="hit")
        assert [(e.at, e.entry_id, e.rank) for e in hits] == [(old, "e1", 1)] + [
            (recent, e.entry_id, e.rank) for e in [*served, *served[:3]]
        ]
        assert hits[1].query == query and hits[1].library == "lib" and hits[1].path == "e1.md"
        assert store.started() == old
        assert store.usage()["e1"].hits == 2
        # hits without a rank (imported, say) are searches alone: none is lost
        unranked = [
            UsageEvent(recent, "hit", f"u{n}", "lib", f"u{n}.md", "cli", "q") for n in (1, 2)
        ]
        store.add(unranked)
        assert store.conn.execute("SELECT count(*) FROM hit").fetchall() == [(15,)]
    finally:
        store.close()
    assert usage.Recorder(path, hit_days=90).forget_old_hits(now) == 1  # the old one only
    assert usage.Recorder(path, hit_days=1).forget_old_hits(now + 2 * 86400) == 15
    store = UsageStore(path)
    try:
        assert [e.kind for e in store.events()] == ["get"]
        assert store.conn.execute("SELECT count(*) FROM search").fetchall() == [(0,)]
        assert store.usage()["e1"].hits == 2  # the sums keep them
        store.conn.execute("PRAGMA user_version = 3")  # made by a newer brainmap
    finally:
        store.close()
    store = UsageStore(path)
    try:  # read as it is, not taken back to this version
        assert store.conn.execute("PRAGMA user_version").fetchall() == [(3,)]
        assert store.usage()["e1"].hits == 2
    finally:
        store.close()


def test_a_server_drops_old_hits_from_the_log(brain: ops.Brain, home: Path) -> None:
    brain.close()
    ancient = usage.stamp(time.time() - 400 * 86400)
    store = UsageStore(home / "usage.db")
    store.add([_logged(ancient, "hit", "gone") for _ in range(3)])
    store.close()
    with serving(home) as url:
        httpx.get(f"{url}/search", params={"query": "undo the last commit"}).raise_for_status()
        found = _wait_for(home, lambda evs: evs and all(e.at != ancient for e in evs))
    assert {e.kind for e in found} == {"hit"} and all(e.interface == "http" for e in found)
    sums = UsageStore(home / "usage.db")
    try:
        assert sums.usage(["gone"])["gone"].hits == 3
    finally:
        sums.close()


def test_hit_days_must_be_a_whole_number_of_days_not_below_zero(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[usage]\nhit_days = -1\n", encoding="utf-8")
    with pytest.raises(UserError, match="hit_days"):
        config_mod.load(home)
