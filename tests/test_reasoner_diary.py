"""The diary's use of the reasoner, against a real local model (SmolLM2-135M on llama.cpp):
rollup paragraphs that link only the days of their period, on top of the deterministic
rollup; a summary of each session's section written after the Stop hook has returned, by
its detached process, never twice. The model is toy quality: structure, links, calls and
tokens are asserted, never wording."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from agent_fixtures import (
    event,
    run_hook_command,
    session_lines,
    settings_commands,
    write_transcript,
)
from brainmap import config as config_mod
from brainmap import diary, ops
from brainmap.reasoner import Ledger
from conftest import free_port, run_cli, write
from model_server import reasoner_home
from test_diary import DAY
from test_project import repo

FAST = {"max_tokens": 48, "retries": 0}  # short answers: a call takes seconds on one thread
LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
DAYS = {"2026-11-02": "Fix the pool timeout", "2026-11-04": "Add retries to the client",
        "2026-11-10": "Write the docs"}  # fmt: skip


def _home(tmp_path: Path, url: str | None = None, **settings: object) -> Path:
    home = tmp_path / "home"
    ops.Brain(home).close()  # a home with its global brain
    if url is not None:
        reasoner_home(home, url, **{**FAST, **settings})
    base = home / "brain" / "diary" / "web"
    for day, asked in DAYS.items():
        d = dt.date.fromisoformat(day)
        write(base / f"{d:%Y/%m/%d}.md", DAY.format(day=day, session=f"s{d.day:02d}", asked=asked))
    return home


def _paragraph(text: str) -> str | None:
    lines = text.split("\n")
    if diary.SUMMARY_HEADING not in lines:
        return None
    at = lines.index(diary.SUMMARY_HEADING)
    assert lines[at + 1] == "" and lines[at + 2] and lines[at + 3] == ""
    return lines[at + 2]


def _deterministic(home: Path, label: str) -> str:
    """The rollup as brainmap renders it without a reasoner."""
    base = home / "brain" / "diary" / "web"
    kind = "week" if "-W" in label else "month"
    members = [m for m in diary.days_of(base) if diary.Period.of(kind, m[0]).label == label]
    period = diary.Period.of(kind, members[0][0])
    digest = diary.days_digest(members)
    return diary.render_rollup("web", period, members, digest, root=home / "brain")


def test_the_models_text_keeps_only_links_to_the_days_of_its_period() -> None:
    days = {"2026/11/02.md": "2026-11-02", "2026/11/04.md": "2026-11-04"}
    raw = (
        "## Summary:\n[Monday](2026/11/02.md) fixed the pool; see [this](https://evil.example/x) "
        "and [[2026-11-04|Wednesday]] and ![img](javascript:alert(1)) <script>x</script> "
        "[other day](2026/11/20.md) on 2026-11-20, then 2026-11-04 again. <!-- hidden "
        "[ref]: http://x.example token ghp_" + "Q" * 36 + " " + "word " * 400
    )
    out = diary.clean_prose(raw, limit=diary.PROSE_CHARS, sentences=8, days=days)
    assert "\n" not in out and len(out) <= diary.PROSE_CHARS
    assert {target for _, target in LINK.findall(out)} <= set(days)
    assert "[2026-11-02](2026/11/02.md) fixed the pool" in out  # the link kept, as a date
    assert "[2026-11-04](2026/11/04.md)" in out  # a bare date of the period becomes a link
    assert "2026-11-20" in out and "2026/11/20.md" not in out  # another day: its text only
    assert "evil.example" not in out and "<" not in out and "ghp_" not in out
    assert not out.startswith(("#", "Summary")) and out.endswith("…")
    assert diary.valid_prose(out, days)
    # a paragraph that links no day is given the period's first and last
    plain = diary.clean_prose("The team worked on the pool.", limit=200, sentences=4, days=days)
    assert plain.endswith("([2026-11-02](2026/11/02.md) to [2026-11-04](2026/11/04.md))")
    assert diary.valid_prose(plain, days) and not diary.valid_prose(plain, {})
    assert diary.clean_prose("## - ", limit=200, sentences=4, days=days) == ""
    summary = diary.clean_prose("One. Two is here. Three! Four? Five.", limit=600, sentences=4)
    assert summary == "One. Two is here. Three! Four?"


def test_a_rollup_gets_a_paragraph_linking_only_its_days(tmp_path: Path, llm_url: str) -> None:
    home = _home(tmp_path, llm_url)
    base = home / "brain" / "diary" / "web"
    brain = ops.Brain(home)
    try:
        report = ops.diary_rollup(brain, ops.DiaryRollupInput(period="week", project="web"))
        assert sorted(report.written) == [
            "brain:diary/web/2026-W45.md",
            "brain:diary/web/2026-W46.md",
        ]
        spent = report.reasoner
        assert spent is not None and spent.model == "smollm2" and spent.skipped == []
        assert (
            spent.calls == 2 and spent.prompt_tokens > 0 and 0 < spent.completion_tokens <= 2 * 48
        )
        ledger = Ledger(brain.cfg.reasoner_usage_path, brain.cfg.reasoner.daily_token_budget)
        assert ledger.today()["tokens"] == spent.tokens  # what the op reports is what was counted
        for label, dates in (
            ("2026-W45", {"2026-11-02", "2026-11-04"}),
            ("2026-W46", {"2026-11-10"}),
        ):
            text = (base / f"{label}.md").read_text()
            paragraph = _paragraph(text)
            assert paragraph is not None and len(paragraph) <= diary.PROSE_CHARS + diary.PROSE_SLACK
            links = LINK.findall(paragraph)
            assert links and {(d, f"{d.replace('-', '/')}.md") for d in dates} >= set(links)
            # the deterministic rollup is all there, the paragraph added before its sections
            kept = text.replace(f"\n{diary.SUMMARY_HEADING}\n\n{paragraph}\n", "")
            assert kept == _deterministic(home, label)
            assert text.index(diary.SUMMARY_HEADING) < text.index("## Sessions")
        found = ops.search(
            brain, ops.SearchInput(query="week 2026-W45", mode="bm25", type=["diary"])
        )
        assert any(h.path == "diary/web/2026-W45.md" for h in found.hits)  # indexed
        # again: every rollup has its paragraph, nothing is asked or written
        stamp = (base / "2026-W45.md").read_bytes()
        again = ops.diary_rollup(brain, ops.DiaryRollupInput(period="week", project="web"))
        assert again.written == [] and again.reasoner is not None and again.reasoner.calls == 0
        # the deterministic path (reindex, SessionStart) keeps the paragraph while its days stay
        assert diary.roll_up(brain.cfg, today=dt.date(2026, 12, 1)) != []  # the months
        assert (base / "2026-W45.md").read_bytes() == stamp
        # a day changes: the rollup is rendered again without it, and the op writes a new one
        day = base / "2026/11/04.md"
        day.write_text(day.read_text() + "- Edited: `docs/new.md`\n")
        written = diary.roll_up(brain.cfg, kinds=("week",), today=dt.date(2026, 12, 1))
        assert [w.path for w in written] == ["diary/web/2026-W45.md"]
        assert _paragraph((base / "2026-W45.md").read_text()) is None
        third = ops.diary_rollup(brain, ops.DiaryRollupInput(period="week", project="web"))
        assert third.written == ["brain:diary/web/2026-W45.md"] and third.reasoner is not None
        assert third.reasoner.calls == 1 and _paragraph((base / "2026-W45.md").read_text())
    finally:
        brain.close()


def test_a_reasoner_that_is_down_leaves_the_rollups_as_they_were(tmp_path: Path) -> None:
    home = _home(tmp_path, f"http://127.0.0.1:{free_port()}/v1", timeout_s=3)  # nobody listens
    out = run_cli(home, "diary", "rollup", "--week", "--project", "web").stdout
    assert "wrote brain:diary/web/2026-W45.md" in out
    skipped = [line for line in out.splitlines() if line.startswith("reasoner skipped: ")]
    assert len(skipped) == 1 and "gave no answer" in skipped[0]  # the first failure ends it
    assert "call(s)" not in out
    week = (home / "brain" / "diary" / "web" / "2026-W45.md").read_text()
    assert _paragraph(week) is None and week == _deterministic(home, "2026-W45")
    report = json.loads(run_cli(home, "diary", "rollup", "--week", "--json").stdout)
    assert report["written"] == [] and report["reasoner"]["calls"] == 0
    assert len(report["reasoner"]["skipped"]) == 1


def test_without_a_reasoner_the_diary_is_what_it_was(tmp_path: Path) -> None:
    home = _home(tmp_path)
    out = run_cli(home, "diary", "rollup").stdout
    assert "reasoner" not in out and out.count("wrote ") == 3
    for label in ("2026-W45", "2026-W46", "2026-11"):
        text = (home / "brain" / "diary" / "web" / f"{label}.md").read_text()
        assert text == _deterministic(home, label)
    report = json.loads(run_cli(home, "diary", "rollup", "--json").stdout)
    assert report["reasoner"] is None
    out = run_cli(home, "diary", "summarize", "--project", "web").stdout
    assert "no reasoner for the diary" in out
    # the diary use switched off is no reasoner for the diary
    reasoner_home(home, "http://127.0.0.1:9/v1", diary=False)
    assert json.loads(run_cli(home, "diary", "rollup", "--json").stdout)["reasoner"] is None


# --- the Stop hook ----------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, home: Path) -> Path:
    """A git repository with the hooks installed, in a home that embeds nothing afterwards."""
    root = repo(tmp_path / "webapp")
    ops.Brain(home).close()
    cfg = config_mod.load(home)
    cfg.hooks.background_embed = False  # no embedding process outliving the test
    config_mod.save(cfg)
    run_cli(home, "hooks", "install", "--project", str(root), cwd=root)
    return root


def _stop(project: Path, session: str) -> tuple[float, dict[str, object]]:
    """Run the installed Stop hook on a new session's transcript; its wall time."""
    command = next(c for _, c in settings_commands(project / ".claude" / "settings.json")["Stop"])
    data = event("Stop", project, session=session, last_assistant_message="Fixed it.")
    write_transcript(Path(str(data["transcript_path"])), session_lines(project))
    started = time.monotonic()
    proc = run_hook_command(command, data, project)
    took = time.monotonic() - started
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    return took, data


def _day(home: Path) -> Path:
    days = sorted((home / "brain" / "diary" / "webapp").rglob("[0-9][0-9].md"))
    assert len(days) == 1
    return days[0]


def _summaries(path: Path, session: str) -> list[str]:
    """The summary lines of a session's sections, section by section."""
    out, mine = [], False
    for line in path.read_text().split("\n"):
        if line.startswith("## "):
            mine = f" session {diary.short_session(session)}" in line
        elif mine and line.startswith("- Summary: "):
            out.append(line)
    return out


def _wait_for(condition: object, timeout_s: float) -> float:
    started = time.monotonic()
    while not condition():  # type: ignore[operator]
        assert time.monotonic() - started < timeout_s, "timed out"
        time.sleep(0.2)
    return time.monotonic() - started


def test_the_session_summary_is_written_after_the_stop_hook_returns(
    project: Path, home: Path, llm_url: str
) -> None:
    plain, _ = _stop(project, "plain-0001")  # no reasoner yet: the hook as it always was
    reasoner_home(home, llm_url, **FAST)
    took, data = _stop(project, "3f2a9c0d-2222")
    day = _day(home)
    waited = _wait_for(lambda: _summaries(day, "3f2a9c0d-2222"), 180)
    print(
        f"Stop hook: {plain:.3f} s without a reasoner, {took:.3f} s with; summary after {waited:.1f} s"
    )
    assert took < max(2.0, 2 * plain + 0.5)  # no model call inside the hook
    (line,) = _summaries(day, "3f2a9c0d-2222")
    assert len(line) <= len("- Summary: ") + diary.SESSION_SUMMARY_CHARS
    assert _summaries(day, "plain-0001") == []  # only the session that was asked about
    text = day.read_text()
    assert text.index("session 3f2a9c0d") < text.index(line)  # inside its own section
    sections = diary.parse_day(dt.date.today(), text)
    mine = [s for s in sections if s.session == "3f2a9c0d"]
    assert len(mine) == 1 and mine[0].items["summary"] == [line.removeprefix("- Summary: ")]
    assert "- Agent: Fixed it." in text  # the section's own lines are all there
    ledger = Ledger(home / "reasoner-usage.json", 200_000)
    calls = ledger.today()["calls"]
    assert calls == 1  # one call, made after the hook had returned
    # a run again (by hand, or a later Stop's) writes no second summary and asks nothing
    out = json.loads(run_cli(home, "diary", "summarize", "--project", "webapp",
                             "--session", "3f2a9c0d-2222", "--json").stdout)  # fmt: skip
    assert out["written"] == [] and out["reasoner"]["calls"] == 0
    assert _summaries(day, "3f2a9c0d-2222") == [line] and ledger.today()["calls"] == calls
    # the next turn: its continued section gets its own summary, the first keeps its one
    transcript = Path(str(data["transcript_path"]))
    write_transcript(transcript, [{"type": "user", "timestamp": "2026-11-30T11:00:00Z",
                                   "message": {"role": "user", "content": "Now the docs"}}])  # fmt: skip
    command = next(c for _, c in settings_commands(project / ".claude" / "settings.json")["Stop"])
    assert run_hook_command(command, data, project).returncode == 0
    _wait_for(lambda: len(_summaries(day, "3f2a9c0d-2222")) == 2, 180)
    assert _summaries(day, "3f2a9c0d-2222")[0] == line


class _Held(http.server.BaseHTTPRequestHandler):
    """A stand-in endpoint that holds each request until the test lets it go, then fails
    (what a real server cannot do on demand)."""

    seen: ClassVar[list[float]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.seen.append(time.monotonic())
        self.release.wait(60)
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def held() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Held)
    _Held.seen, _Held.release = [], threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        _Held.release.set()
        server.shutdown()


def test_the_stop_hook_never_waits_for_the_model(project: Path, home: Path, held: str) -> None:
    reasoner_home(home, held, **FAST)
    took, _ = _stop(project, "held-0001")
    returned = time.monotonic()
    assert took < 5  # the model holds every call for 60 s
    _wait_for(lambda: _Held.seen, 60)  # the summary's call: made afterwards, in the background
    assert _Held.seen[0] > returned - 0.05  # it came after the hook had returned
    _Held.release.set()  # the model fails: the day stays as the hook wrote it
    log = home / "logs" / "background.log"
    _wait_for(lambda: log.exists() and "reasoner skipped: diary: " in log.read_text(), 60)
    assert "HTTP 500" in log.read_text()
    assert _summaries(_day(home), "held-0001") == []
