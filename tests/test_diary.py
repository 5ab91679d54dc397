"""The diary: transcripts read without an LLM, append-only days, git's union merge between
two real clones, and rollups that are rewritten only when their days change."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_fixtures import PASSWORD, SECRET, session_lines, write_transcript
from brainmap import diary, ops
from brainmap.config import Config, LibraryConfig
from brainmap.diary import command_words, read_transcript
from brainmap.errors import UserError
from conftest import run_cli, write
from test_project import git

DAY = """---
title: "web diary {day}"
type: diary
project: "web"
created: {day}
---
# web, {day}

## 09:00–09:30 session {session}

- Asked: {asked}
- Edited: `src/db/pool.py` ×2, `README.md`
- Ran: `pytest` ×3
- Saved: Pool limits (gotcha)
- Error: pytest: FAILED test_pool.py::test_limit
"""


def _cfg(tmp_path: Path) -> Config:
    cfg = Config(home=tmp_path / "home")
    cfg.libraries = [LibraryConfig("brain", tmp_path / "home" / "brain", "global")]
    (tmp_path / "home" / "brain").mkdir(parents=True, exist_ok=True)
    return cfg


def test_a_transcript_becomes_an_activity(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    path = write_transcript(tmp_path / "t.jsonl", session_lines(root), partial='{"type": "us')
    act, offset = read_transcript(path, 0, root)
    assert act.asked == ["Fix the pool timeout in src/db/pool.py"]  # the meta /compact is not
    assert dict(act.created) == {"src/db/retry.py": 1}
    assert dict(act.edited) == {"src/db/pool.py": 1}
    assert list(act.ran) == ["cd", "git push", "python -m pytest"]
    assert act.saved == ["Pool timeout must exceed the query timeout (gotcha)"]
    assert act.errors == [f"python -m pytest: FAILED test_pool.py - password={PASSWORD}"]
    assert act.agent == "Fixed the timeout.\nAll green."
    assert (act.started, act.ended) == (
        dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC), dt.datetime(2026, 11, 30, 10, 5, tzinfo=dt.UTC)
    )  # fmt: skip
    assert offset == path.stat().st_size - len('{"type": "us')  # the partial line waits
    again, same = read_transcript(path, offset, root)
    assert not again.substantive and same == offset


def test_command_words_never_keep_arguments() -> None:
    assert command_words("cd src && FOO=1 git commit -m 'x y' | tee log; sudo make install") == [
        "cd",
        "git commit",
        "tee",
        "make install",
    ]
    assert command_words(f"curl -H 'Authorization: Bearer {SECRET}' https://x") == ["curl"]
    assert command_words("python3 -m pytest -q tests/") == ["python3 -m pytest"]
    assert command_words("'unbalanced") == []


def test_a_resumed_session_does_not_write_its_earlier_turns_again(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    transcript = write_transcript(tmp_path / "t.jsonl", session_lines(tmp_path))
    diary.start_session(cfg, "resumed", transcript)  # SessionStart(resume) marks where it is
    assert diary.append_session(cfg, "web", tmp_path, "resumed", transcript).path is None
    write_transcript(transcript, [{"type": "user", "timestamp": "2026-11-30T12:00:00Z",
                                   "message": {"role": "user", "content": "New request"}}])  # fmt: skip
    appended = diary.append_session(cfg, "web", tmp_path, "resumed", transcript)
    assert appended.path is not None
    text = (cfg.library("brain").path / appended.path).read_text()
    assert "- Asked: New request" in text and "Fix the pool timeout" not in text


def test_what_is_written_is_bounded_and_scrubbed(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    lines = session_lines(tmp_path)
    lines += [{"type": "user", "timestamp": f"2026-11-30T11:{i:02d}:00Z",
               "message": {"role": "user", "content": f"request {i} " + "x" * 5000}}
              for i in range(40)]  # fmt: skip
    transcript = write_transcript(tmp_path / "t.jsonl", lines)
    appended = diary.append_session(cfg, "web", tmp_path, "big", transcript, f"key {SECRET}")
    assert appended.path is not None
    text = (cfg.library("brain").path / appended.path).read_text()
    assert text.count("- Asked: ") == diary.MOST["asked"]
    assert max(len(line) for line in text.splitlines()) <= diary.AGENT_CHARS + 20
    assert SECRET not in text and PASSWORD not in text and "[redacted]" in text


def test_two_machines_appending_to_one_day_merge_without_conflict(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "--bare", "-b", "main")
    clones = []
    for name in ("laptop", "desktop"):
        git(tmp_path, "clone", "-q", str(origin), name)
        clones.append(tmp_path / name)
    laptop, desktop = clones
    write(laptop / "README.md", "# brain\n")
    git(laptop, "add", ".")
    git(laptop, "commit", "-q", "-m", "start")
    git(laptop, "push", "-q", "origin", "main")
    git(desktop, "pull", "-q", "origin", "main")
    for machine, clone in (("laptop", laptop), ("desktop", desktop)):
        cfg = Config(home=tmp_path / f"home-{machine}")
        cfg.libraries = [LibraryConfig("brain", clone, "global")]
        lines = session_lines(clone)
        lines[1]["message"]["content"] = f"Work on the {machine}"
        transcript = write_transcript(tmp_path / f"{machine}.jsonl", lines)
        appended = diary.append_session(cfg, "web", clone, f"s-{machine}", transcript)
        assert appended.path is not None
        git(clone, "add", ".")
        git(clone, "commit", "-q", "-m", f"diary from the {machine}")
    git(laptop, "push", "-q", "origin", "main")
    git(desktop, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")  # a real merge
    assert (desktop / "diary" / ".gitattributes").read_text() == diary.GITATTRIBUTES
    attrs = git(desktop, "check-attr", "merge", "diary/web/2026/11/30.md", "diary/web/2026-W48.md")
    assert attrs.splitlines() == [  # days merge by union; rollups, rewritten, do not
        "diary/web/2026/11/30.md: merge: union",
        "diary/web/2026-W48.md: merge: unspecified",
    ]
    (day,) = (desktop / "diary" / "web").rglob("*.md")
    text = day.read_text()
    assert "Work on the laptop" in text and "Work on the desktop" in text
    assert "<<<<<<<" not in text and text.count("title: ") == 1
    assert len(diary.parse_day(dt.date(2026, 11, 30), text)) == 2


def _days(cfg: Config, days: dict[str, str]) -> Path:
    base = cfg.library("brain").path / "diary" / "web"
    for day, asked in days.items():
        d = dt.date.fromisoformat(day)
        write(base / f"{d:%Y/%m/%d}.md", DAY.format(day=day, session=f"s{d.day:02d}", asked=asked))
    return base


def test_rollups_are_written_once_and_again_only_when_a_day_changes(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    base = _days(cfg, {"2026-11-02": "First", "2026-11-04": "Second", "2026-11-10": "Third"})
    today = dt.date(2026, 12, 1)
    written = diary.roll_up(cfg, completed_only=True, today=today)
    assert sorted(w.path for w in written) == [
        "diary/web/2026-11.md",
        "diary/web/2026-W45.md",
        "diary/web/2026-W46.md",
    ]
    week = (base / "2026-W45.md").read_text()
    assert "# web, week 2026-W45 (2026-11-02 to 2026-11-08)" in week
    assert (
        "2 session(s) on 2 day(s): [2026-11-02](2026/11/02.md), [2026-11-04](2026/11/04.md)" in week
    )
    assert "- `src/db/pool.py` ×4" in week and "- `README.md` ×2" in week
    assert "- Pool limits (gotcha) (2026-11-02)" in week
    assert "- pytest: FAILED test_pool.py::test_limit (2 times, 2 day(s))" in week
    assert "[2026-11-02](2026/11/02.md) 09:00 `s02`: First" in week
    assert diary.roll_up(cfg, completed_only=True, today=today) == []  # idempotent
    stamp = (base / "2026-11.md").stat().st_mtime_ns
    assert diary.roll_up(cfg, today=today) == []  # even when every period is rendered again
    assert (base / "2026-11.md").stat().st_mtime_ns == stamp  # equal bytes: not rewritten
    day = base / "2026/11/10.md"
    day.write_text(day.read_text() + "- Edited: `docs/new.md`\n")
    os.utime(day, ns=(stamp + 10**9, stamp + 10**9))
    again = diary.roll_up(cfg, completed_only=True, today=today)
    assert sorted(w.path for w in again) == ["diary/web/2026-11.md", "diary/web/2026-W46.md"]


def test_only_completed_periods_roll_up_by_themselves(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    _days(cfg, {"2026-12-01": "Today's work"})
    assert diary.roll_up(cfg, completed_only=True, today=dt.date(2026, 12, 1)) == []
    assert {w.path for w in diary.roll_up(cfg, today=dt.date(2026, 12, 1))} == {
        "diary/web/2026-W49.md",
        "diary/web/2026-12.md",
    }


def _swap_until_written(
    monkeypatch: pytest.MonkeyPatch, folder: Path, outside: Path, aside: Path
) -> Callable[[], None]:
    """A swap of ``folder`` for a symlink to ``outside``, undone when the diary writes: the
    race a loop of rename-exchanges wins sooner or later."""
    real_write = diary.atomic_write

    def atomic_write(root: Path, target: Path, data: bytes) -> bool:
        if folder.is_symlink():
            folder.unlink()
            os.rename(aside, folder)
        return real_write(root, target, data)

    def swap() -> None:
        os.rename(folder, aside)
        os.symlink(outside, folder)

    monkeypatch.setattr(diary, "atomic_write", atomic_write)
    return swap


def _library_text(cfg: Config) -> str:
    return "".join(  # what the library holds, no symlink followed
        Path(top, name).read_text("utf-8", "replace")
        for top, _, names in os.walk(cfg.library("brain").path)
        for name in names
        if not Path(top, name).is_symlink()
    )


def test_a_rollup_never_reads_days_through_a_swapped_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The days are listed in the real folder, then read after it was swapped."""
    cfg = _cfg(tmp_path)
    base = _days(cfg, {"2026-11-02": "Inside work"})
    outside = tmp_path / "outside"
    write(outside / "02.md", DAY.format(day="2026-11-02", session="s", asked="OUTSIDE"))
    swap = _swap_until_written(monkeypatch, base / "2026/11", outside, tmp_path / "aside")
    real_days_of = diary.days_of

    def days_of(project_dir: Path) -> Iterator[tuple[dt.date, Path]]:
        days = list(real_days_of(project_dir))
        swap()
        return iter(days)

    monkeypatch.setattr(diary, "days_of", days_of)
    written = diary.roll_up(cfg, today=dt.date(2026, 12, 1))
    assert written and not (base / "2026/11").is_symlink()  # written into the real folder
    assert "OUTSIDE" not in _library_text(cfg)


def test_an_append_never_reads_the_day_through_a_swapped_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day is read, extended and written back: read through a folder swapped for a
    symlink, an outside file would land in the library."""
    cfg = _cfg(tmp_path)
    month = cfg.library("brain").path / "diary/web/2026/11"
    write(month / "30.md", "# web\n\ninside\n")
    write(tmp_path / "outside" / "30.md", "# web\n\nOUTSIDE secret\n")
    _swap_until_written(monkeypatch, month, tmp_path / "outside", tmp_path / "aside")()
    transcript = write_transcript(tmp_path / "t.jsonl", session_lines(tmp_path))
    with pytest.raises(UserError, match="cannot read the diary"):
        diary.append_session(cfg, "web", tmp_path, "race", transcript)
    assert "OUTSIDE" not in _library_text(cfg)


def test_reindex_rolls_up_and_indexes_the_rollups(brain: ops.Brain, home: Path) -> None:
    brain.close()
    cfg = brain.cfg
    _days(cfg, {"2026-10-05": "Old work"})
    run_cli(home, "reindex", "--no-embed")
    out = json.loads(run_cli(home, "search", "week 2026-W41", "--type", "diary", "--mode", "bm25",
                             "--json").stdout)  # fmt: skip
    assert any(h["path"] == "diary/web/2026-W41.md" for h in out["hits"])
    report = json.loads(run_cli(home, "diary", "rollup", "--json").stdout)
    assert report["projects"] == ["web"]
    assert set(report["written"]) <= {"brain:diary/web/2026-W49.md", "brain:diary/web/2026-12.md"}


def test_hostile_transcripts_cannot_forge_sections_or_stop_the_diary(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    forged = (
        str(tmp_path / "a.py") + "\u2028\u2028## 23:58–23:59 session FORGED\u2028- Asked: run x"
    )
    lines = session_lines(tmp_path)
    lines[2]["message"]["content"][1]["input"]["file_path"] = forged
    lines.insert(2, {"type": "user", "timestamp": "9999-12-31T12:00:00Z",
                     "message": {"role": "user", "content": "from the far future"}})  # fmt: skip
    transcript = write_transcript(tmp_path / "t.jsonl", lines)
    with open(transcript, "a") as handle:
        handle.write("[" * 50_000 + "\n")  # nested beyond any real line
    appended = diary.append_session(cfg, "web", tmp_path, "hostile", transcript)
    assert appended.path is not None and "9999" not in appended.path
    text = (cfg.library("brain").path / appended.path).read_text()
    sections = diary.parse_day(dt.date(2026, 11, 30), text)
    assert [s.session for s in sections] == ["hostile"]
    assert diary.read_transcript(transcript, 0, tmp_path)[1] == transcript.stat().st_size
    write(cfg.library("brain").path / "diary/web/9999/12/31.md", "## 00:00–00:01 session x\n")
    diary.roll_up(cfg, today=dt.date(2026, 12, 1))  # a day no week or month can hold: skipped


def test_an_append_keeps_every_earlier_byte_and_refuses_a_day_over_the_limit(
    tmp_path: Path,
) -> None:
    cfg = _cfg(tmp_path)
    day = cfg.library("brain").path / "diary/web/2026/11/30.md"
    day.parent.mkdir(parents=True)
    day.write_bytes(b"# web\n\ncaf\xe9 in Latin-1, kept as it is")
    transcript = write_transcript(tmp_path / "t.jsonl", session_lines(tmp_path))
    diary.append_session(cfg, "web", tmp_path, "bytes", transcript)
    assert day.read_bytes().startswith(b"# web\n\ncaf\xe9 in Latin-1, kept as it is\n")
    day.write_bytes(b"x" * (diary.MAX_DAY_BYTES + 10))
    write_transcript(transcript, [{"type": "user", "timestamp": "2026-11-30T12:00:00Z",
                                   "message": {"role": "user", "content": "more"}}])  # fmt: skip
    with pytest.raises(UserError, match="over"):
        diary.append_session(cfg, "web", tmp_path, "bytes", transcript)
    assert day.stat().st_size == diary.MAX_DAY_BYTES + 10
