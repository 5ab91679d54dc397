"""Pruning: entries unused or judged not useful within the period, and stale ones, listed
with their reasons; --archive moves them into archive/ of their library (git sees a rename),
the index follows, and nothing is ever deleted."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest

from brainmap import config as config_mod
from brainmap import ops, prune, usage
from brainmap.safefile import UnsafePathError, move
from brainmap.store import UsageEvent, UsageStore, indexed_entries
from conftest import run_cli, write

TODAY = dt.date(2026, 12, 1)
PLANTED = "notes/old-deploy-checklist.md"
OLD_NOTE = """---
title: Deploy checklist for the 2019 cluster
type: note
created: 2019-03-04
---
# Deploy checklist for the 2019 cluster

Drain the nodes of the old cluster one by one, then flip the DNS record.
"""


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env
    ).stdout


def _use_all_but(brain: ops.Brain, home: Path, *unused: str) -> None:
    """Every entry but ``unused`` served recently, and a record that reaches back a year."""
    at = f"{TODAY - dt.timedelta(days=3)}T10:00:00.000Z"
    events = [
        UsageEvent(at, "hit", e.id, e.library, e.path, "cli", "q", 1)
        for e in indexed_entries(brain.store)
        if e.path not in unused
    ]
    events.append(UsageEvent("2025-12-01T09:00:00.000Z", "get", events[0].entry_id,
                             events[0].library, events[0].path, "cli"))  # fmt: skip
    store = UsageStore(home / "usage.db")
    try:
        store.add(events)
    finally:
        store.close()


def _plan(brain: ops.Brain, months: int = 6) -> prune.PruneReport:
    return prune.plan(brain.cfg, brain.store, None, months, TODAY)


def test_lists_the_unused_the_not_useful_and_the_stale_with_reasons(
    brain: ops.Brain, home: Path, library: Path
) -> None:
    write(library / PLANTED, OLD_NOTE)
    write(library / "notes" / "fresh.md", "---\ntitle: Fresh\ncreated: 2026-11-20\n---\nNew.\n")
    ops.reindex(brain, ops.ReindexInput())
    _use_all_but(brain, home, PLANTED, "notes/fresh.md")
    for _ in range(2):
        ops.feedback(brain, ops.FeedbackInput(ref="example:gotchas/cron-timezone.md", useful=False))
    ops.feedback(brain, ops.FeedbackInput(ref="example:gotchas/cron-timezone.md", useful=True))
    report = _plan(brain)
    assert report.since == "2026-06-01" and report.warnings == []
    found = {item.path: item for item in report.items}
    old = found[PLANTED]
    assert old.kinds == ["unused"] and old.archive
    assert old.reasons == ["not served nor opened since 2026-06-01 (never used)"]
    assert "notes/fresh.md" not in found  # newer than the period: not unused
    cron = found["gotchas/cron-timezone.md"]
    assert (
        cron.kinds == ["not_useful"] and cron.archive and (cron.useful, cron.not_useful) == (1, 2)
    )
    assert cron.reasons == ["2 not-useful against 1 useful feedback since 2026-06-01"]
    # last_verified 2026-10-20 is recent; a used entry verified long ago is stale, kept
    assert all(item.path != "gotchas/sqlite-database-is-locked.md" for item in report.items)
    assert all(not item.path.startswith("diary/") for item in report.items)
    assert report.counts == {"unused": 1, "not_useful": 1}


def test_a_stale_entry_still_used_is_listed_but_never_archived(
    brain: ops.Brain, home: Path, library: Path
) -> None:
    write(library / "notes" / "verified.md",
          "---\ntitle: Verified long ago\nlast_verified: 2024-01-02\n---\nStill true?\n")  # fmt: skip
    ops.reindex(brain, ops.ReindexInput())
    _use_all_but(brain, home)
    (item,) = _plan(brain).items
    assert item.kinds == ["stale"] and not item.archive
    assert item.reasons[0].startswith("last verified 2024-01-02, more than 180 days ago")
    assert "verify it" in item.reasons[0]


def test_no_entry_is_unused_before_the_record_covers_the_period(
    brain: ops.Brain, library: Path
) -> None:
    write(library / PLANTED, OLD_NOTE)
    ops.reindex(brain, ops.ReindexInput())
    ops.search(brain, ops.SearchInput(query="database is locked"))  # the record starts now
    report = prune.plan(brain.cfg, brain.store, None, 6, dt.date.today())
    assert not [i for i in report.items if "unused" in i.kinds]
    assert "less than the 6 months asked" in report.warnings[0]
    brain.cfg.usage.enabled = False
    off = prune.plan(brain.cfg, brain.store, None, 6, dt.date.today())
    assert "usage telemetry is off" in off.warnings[0]


def test_archive_moves_into_archive_with_a_rename_git_sees_and_deletes_nothing(
    brain: ops.Brain, home: Path, library: Path
) -> None:
    write(library / PLANTED, OLD_NOTE)
    _git(library, "init", "-q", "-b", "main")
    _git(library, "add", "-A")
    _git(library, "commit", "-q", "-m", "notes")
    ops.reindex(brain, ops.ReindexInput())
    found = brain.store.entries.find_entry(f"example:{PLANTED}")  # (a get would count as a use)
    assert found is not None
    old_id = found[0]
    _use_all_but(brain, home, PLANTED)
    before = sorted(p.read_bytes() for p in library.rglob("*.md"))
    brain.close()
    # the CLI uses today's date: the planted note is from 2019, the others are all used
    listed = json.loads(run_cli(home, "prune", "--json").stdout)
    assert [(i["path"], i["kinds"]) for i in listed["items"]] == [(PLANTED, ["unused"])]
    assert (library / PLANTED).exists()  # listing moves nothing
    text = run_cli(home, "prune").stdout
    assert f"unused  example:{PLANTED}" in text and "never used" in text
    moved = json.loads(run_cli(home, "prune", "--archive", "--json").stdout)
    assert moved["archived"] == 1 and moved["items"][0]["moved_to"] == f"archive/{PLANTED}"
    assert not (library / PLANTED).exists()
    assert (library / "archive" / PLANTED).read_text(encoding="utf-8") == OLD_NOTE
    assert sorted(p.read_bytes() for p in library.rglob("*.md")) == before  # nothing deleted
    _git(library, "add", "-A")
    assert _git(library, "status", "--porcelain").splitlines() == [
        f"R  {PLANTED} -> archive/{PLANTED}"
    ]
    # the index followed: the old path is gone, the archived one is indexed
    after = ops.Brain(home)
    try:
        assert after.store.entries.find_entry(old_id) is None
        archived = ops.get(after, ops.GetInput(ref=f"example:archive/{PLANTED}"))
        assert archived.title == "Deploy checklist for the 2019 cluster"
        assert not [i for i in _plan(after).items if i.path.startswith("archive/")]
    finally:
        after.close()
    # a second one of the same name goes beside it, never over it
    write(library / PLANTED, OLD_NOTE.replace("DNS record", "DNS record again"))
    run_cli(home, "reindex")
    again = json.loads(run_cli(home, "prune", "--archive", "--json").stdout)
    assert again["items"][0]["moved_to"] == "archive/notes/old-deploy-checklist-2.md"
    assert (library / "archive" / PLANTED).read_text(encoding="utf-8") == OLD_NOTE


def test_prune_refuses_an_unknown_library_and_bad_months(brain: ops.Brain, home: Path) -> None:
    brain.close()
    assert run_cli(home, "prune", "-l", "nope", check=False).returncode == 1
    assert run_cli(home, "prune", "--months", "0", check=False).returncode == 2


def test_move_never_overwrites_nor_follows_a_symlink(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    source = write(root / "a" / "note.md", "one")
    taken = write(root / "archive" / "a" / "note.md", "older")
    got = move(root, source, [taken, root / "archive" / "a" / "note-2.md"])
    assert got == root / "archive" / "a" / "note-2.md" and got.read_text() == "one"
    assert not source.exists() and taken.read_text() == "older"
    outside = write(tmp_path / "outside.md", "secret")
    (root / "link.md").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        move(root, root / "link.md", [root / "archive" / "link.md"])
    (root / "via").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(OSError):
        move(root, root / "via" / "outside.md", [root / "archive" / "x.md"])
    with pytest.raises(UnsafePathError):
        move(root, write(root / "b.md", "b"), [tmp_path / "escaped.md"])
    assert outside.read_text() == "secret" and (root / "b.md").exists()
    with pytest.raises(FileExistsError):
        move(root, root / "b.md", [taken])
    assert (root / "b.md").read_text() == "b"


def test_months_before_keeps_to_the_calendar() -> None:
    assert prune.months_before(dt.date(2026, 3, 31), 1) == dt.date(2026, 2, 28)
    assert prune.months_before(dt.date(2026, 12, 1), 6) == dt.date(2026, 6, 1)
    assert prune.months_before(dt.date(2026, 1, 15), 13) == dt.date(2024, 12, 15)


def test_turned_off_usage_lists_only_stale(brain: ops.Brain, home: Path) -> None:
    brain.close()
    cfg = config_mod.load(home)
    cfg.usage.enabled = False
    config_mod.save(cfg)
    out = run_cli(home, "prune", "--json").stdout
    assert "usage telemetry is off" in json.loads(out)["warnings"][0]
    assert usage.flush()
