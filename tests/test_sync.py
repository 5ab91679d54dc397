"""`brainmap sync`: two machines' global brains, a bare remote, real git (the binary and
pygit2): notes and diary days merge, offline keeps the commit, a conflicting note stops the
sync with both versions kept and a doctor item, a library that is no repository is refused."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_fixtures import session_lines, write_transcript
from brainmap import diary, ops
from brainmap.errors import UserError
from brainmap.notes import SaveResult
from brainmap.ops.health import Check
from brainmap.ops.library import SyncResult
from conftest import run_cli, write
from test_project import git

BACKENDS = ["git", "pygit2"]


def _remote(tmp_path: Path) -> Path:
    """A bare remote holding one commit, as made once when the brain got a remote."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    write(seed / "README.md", "# brain\n\nThe global brain, shared by my machines.\n")
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "start")
    git(seed, "push", "-q", "origin", "HEAD:main")
    return origin


def _machine(tmp_path: Path, name: str, origin: Path) -> ops.Brain:
    """A machine: a home whose global library is a clone of the remote."""
    home = tmp_path / f"home-{name}"
    git(tmp_path, "clone", "-q", str(origin), str(home / "brain"))
    return ops.Brain(home)


def _append_diary(brain: ops.Brain, machine: str, tmp_path: Path) -> Path:
    lines = session_lines(tmp_path)
    lines[1]["message"]["content"] = f"Work on the {machine}"
    transcript = write_transcript(tmp_path / f"{machine}.jsonl", lines)
    appended = diary.append_session(brain.cfg, "web", tmp_path, f"s-{machine}", transcript)
    assert appended.path is not None
    return brain.cfg.library("brain").path / appended.path


def _save(brain: ops.Brain, title: str, body: str, tag: str) -> SaveResult:
    saved = ops.save(brain, ops.SaveInput(title=title, body=body, type="gotcha", tags=[tag]))
    assert saved.status == "saved" and saved.path
    return saved


def _sync(brain: ops.Brain, backend: str) -> SyncResult:
    return ops.sync(brain, ops.SyncInput(embed=False, backend=backend))


def _found(brain: ops.Brain, query: str) -> list[str]:
    hits = ops.search(brain, ops.SearchInput(query=query, mode="bm25")).hits
    return [hit.path for hit in hits]


def _doctor_sync(brain: ops.Brain) -> Check:
    return next(c for c in ops.doctor(brain, ops.NoInput()).checks if c.name == "sync")


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_machines_sync_notes_and_diary_days(tmp_path: Path, backend: str) -> None:
    origin = _remote(tmp_path)
    a, b = _machine(tmp_path, "a", origin), _machine(tmp_path, "b", origin)
    saved = _save(a, "Rotate the deploy keys", "Rotate them every quarter with vault.", "keys")
    day_a = _append_diary(a, "laptop", tmp_path)
    day_b = _append_diary(b, "desktop", tmp_path)
    assert day_a.relative_to(a.cfg.library("brain").path) == day_b.relative_to(
        b.cfg.library("brain").path
    )  # one day file on both machines

    first = _sync(a, backend)
    assert first.backend == backend and first.pushed and not first.offline
    assert saved.path in first.committed and "diary/.gitattributes" in first.committed
    assert first.pulled_commits == 0 and not first.conflicts
    log = git(a.cfg.library("brain").path, "log", "--format=%s").splitlines()
    # with the rollup of the day's month when the month is over (a sync rolls up first)
    assert re.fullmatch(r"brainmap sync: 1 save, 1 diary day(, 1 rollup)? \(.+\)", log[0])

    second = _sync(b, backend)  # a real merge: both appended to the same day
    assert second.pushed and not second.conflicts and second.pulled_commits >= 1
    assert saved.path in second.pulled_files
    third = _sync(a, backend)  # B's commit and its merge
    # what it commits are rollups the reindex of the last sync rendered (of a month done)
    assert third.pulled_commits >= 2 and third.pushed == bool(third.committed), third.committed
    assert all(p.startswith("diary/web/20") and p.count("/") == 2 for p in third.committed)
    _sync(b, backend)

    for brain in (a, b):
        rel = day_a.relative_to(a.cfg.library("brain").path)
        day = (brain.cfg.library("brain").path / rel).read_text(encoding="utf-8")
        assert "Work on the laptop" in day and "Work on the desktop" in day
        assert "<<<<<<<" not in day and day.count("title: ") == 1
        assert _found(brain, "rotate deploy keys vault")[:1] == [saved.path]
        status = git(brain.cfg.library("brain").path, "status", "--porcelain")
        assert status == ""
        assert _doctor_sync(brain).ok
    assert git(a.cfg.library("brain").path, "rev-parse", "HEAD") == git(
        b.cfg.library("brain").path, "rev-parse", "HEAD"
    )
    again = _sync(b, backend)
    assert again.message == "nothing to commit; nothing to pull; nothing to push"


@pytest.mark.parametrize("backend", BACKENDS)
def test_offline_commits_locally_and_a_later_sync_pushes(tmp_path: Path, backend: str) -> None:
    origin = _remote(tmp_path)
    a = _machine(tmp_path, "a", origin)
    saved = _save(a, "Offline note", "Written on a train.", "travel")
    away = tmp_path / "away.git"
    origin.rename(away)  # the remote cannot be reached
    offline = _sync(a, backend)
    assert offline.offline and not offline.pushed and offline.commit
    assert offline.message.startswith("offline: committed locally, will push next time (")
    assert saved.path in offline.committed
    lib = a.cfg.library("brain").path
    assert git(lib, "status", "--porcelain") == ""  # nothing lost: it is in the local commit
    assert git(lib, "log", "-1", "--format=%H").strip() == offline.commit
    away.rename(origin)
    online = _sync(a, backend)
    assert online.pushed and not online.offline and online.commit is None
    pushed = git(tmp_path, "--git-dir", str(origin), "log", "-1", "--format=%H", "main")
    assert pushed.strip() == offline.commit


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_conflicting_note_stops_the_sync_keeping_both_versions(
    tmp_path: Path, backend: str
) -> None:
    origin = _remote(tmp_path)
    a, b = _machine(tmp_path, "a", origin), _machine(tmp_path, "b", origin)
    saved = _save(a, "Pool size", "The pool holds 10 connections.", "db")
    _sync(a, backend)
    _sync(b, backend)
    note_a = a.cfg.library("brain").path / saved.path
    note_b = b.cfg.library("brain").path / saved.path
    note_a.write_text(note_a.read_text().replace("10 connections", "20 connections (A)"))
    note_b.write_text(note_b.read_text().replace("10 connections", "30 connections (B)"))
    _append_diary(b, "desktop", tmp_path)  # the diary never conflicts
    assert _sync(a, backend).pushed

    stopped = _sync(b, backend)
    assert not stopped.pushed and [c.path for c in stopped.conflicts] == [saved.path]
    assert stopped.message.startswith("stopped: 1 conflicting note(s)")
    conflict = stopped.conflicts[0]
    # the library is as it was here (committed), the remote's version beside it, in the home
    lib_b = b.cfg.library("brain").path
    assert "30 connections (B)" in note_b.read_text() and "<<<<<<<" not in note_b.read_text()
    assert git(lib_b, "status", "--porcelain") == ""
    assert not (lib_b / ".git" / "MERGE_HEAD").exists()
    copy = Path(conflict.copy)
    assert copy.is_relative_to(b.home) and "20 connections (A)" in copy.read_text()
    check = _doctor_sync(b)
    assert not check.ok
    assert check.items == [f"sync conflict in brain: {saved.path} — fix: {conflict.fix}"]
    assert f"edit {note_b}" in conflict.fix and "delete the copy" in conflict.fix
    assert "run brainmap sync" in conflict.fix
    assert _found(b, "pool connections")[:1] == [saved.path]  # the copy is never indexed

    again = _sync(b, backend)  # not resolved yet: the same stop, the same copy
    assert [c.copy for c in again.conflicts] == [conflict.copy]

    # the user resolves: the note holds what they keep of both, the copy goes
    note_b.write_text(note_b.read_text().replace("30 connections (B)", "25 connections (A+B)"))
    copy.unlink()
    resolved = _sync(b, backend)
    assert not resolved.conflicts and resolved.pushed and resolved.resolved == [saved.path]
    assert "25 connections (A+B)" in note_b.read_text()
    assert _doctor_sync(b).ok and not (b.home / "sync-conflicts.json").exists()
    back = _sync(a, backend)
    assert "25 connections (A+B)" in note_a.read_text() and not back.conflicts
    assert _found(a, "25 connections")[:1] == [saved.path]


def test_the_cli_syncs_warns_offline_and_refuses_a_folder_without_git(tmp_path: Path) -> None:
    origin = _remote(tmp_path)
    home = tmp_path / "home-cli"
    git(tmp_path, "clone", "-q", str(origin), str(home / "brain"))
    write(home / "brain" / "notes" / "hello.md", "# Hello\n\nA note written by hand.\n")
    done = json.loads(run_cli(home, "sync", "--no-embed", "--json").stdout)
    assert done["pushed"] and done["committed"] == ["notes/hello.md"]
    assert done["index"]["added"] >= 1 and done["backend"] == "git"

    shutil.rmtree(origin)
    write(home / "brain" / "notes" / "later.md", "# Later\n")
    offline = run_cli(home, "sync", "--no-embed")
    assert offline.returncode == 0 and "warning: brain" in offline.stderr
    assert "offline: committed locally, will push next time" in offline.stderr

    plain = tmp_path / "plain"
    plain.mkdir()
    run_cli(home, "library", "add", "plain", str(plain))
    refused = run_cli(home, "sync", "plain", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "is not a git repository" in refused.stderr
    assert (
        "git remote add origin URL" in refused.stderr or "remote add origin URL" in refused.stderr
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repository_without_a_remote_or_inside_another_is_refused(
    tmp_path: Path, backend: str
) -> None:
    brain = ops.Brain(tmp_path / "home")
    lib = brain.cfg.library("brain").path
    with pytest.raises(UserError, match="is not a git repository") as err:
        _sync(brain, backend)
    assert err.value.hint and "remote add origin URL" in err.value.hint
    git(lib, "init", "-q", "-b", "main")
    with pytest.raises(UserError, match="has no git remote") as err:
        _sync(brain, backend)
    assert err.value.hint and f"git -C {lib} remote add origin URL" in err.value.hint
    inner = lib / "docs"
    inner.mkdir()
    ops.library_add(brain, ops.LibraryAddInput(name="docs", path=str(inner)))
    with pytest.raises(UserError, match="not its top"):
        ops.sync(brain, ops.SyncInput(library="docs", embed=False, backend=backend))


def test_a_first_sync_pushes_to_an_empty_remote_and_sets_the_upstream(tmp_path: Path) -> None:
    origin = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    brain = ops.Brain(tmp_path / "home")
    lib = brain.cfg.library("brain").path
    git(lib, "init", "-q", "-b", "main")
    git(lib, "remote", "add", "origin", str(origin))
    _save(brain, "First note", "The first note of the brain.", "start")
    first = _sync(brain, "git")
    assert first.pushed and first.commit
    assert git(lib, "rev-parse", "--abbrev-ref", "main@{upstream}").strip() == "origin/main"
    log = subprocess.run(["git", "--git-dir", str(origin), "log", "--format=%s"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert log.startswith("brainmap sync: 1 save, 0 diary days (")
