"""Claude Code's side of the hooks, as the tests play it: hook input JSON and transcripts
(JSONL) in Claude Code's format, and the commands `brainmap hooks install` wrote."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

SECRET = "ghp_" + "Q" * 36  # a GitHub token's shape, planted in a session
PASSWORD = "hunter2-correct-horse"


def event(name: str, cwd: Path, session: str = "s-1", **fields: Any) -> dict[str, Any]:
    """A hook input as Claude Code sends it on stdin."""
    return {
        "session_id": session,
        "transcript_path": str(cwd / f".transcripts/{session}.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def _line(kind: str, when: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/x",
        "sessionId": "s-1", "version": "2.1.233", "gitBranch": "main", "type": kind,
        "message": {"role": kind, "content": content}, "uuid": f"u-{when}",
        "timestamp": when, **extra,
    }  # fmt: skip


def session_lines(root: Path) -> list[dict[str, Any]]:
    """A real-looking session: a request, an edit, a new file, commands (one failing, one
    holding secrets), a note saved over MCP, and the agent's answer."""
    pool, retry = str(root / "src" / "db" / "pool.py"), str(root / "src" / "db" / "retry.py")
    t = "2026-11-30T10:0{}:00.000Z"
    return [
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}},
        _line("user", t.format(0), "Fix the pool timeout in src/db/pool.py\nmore detail here"),
        _line("assistant", t.format(1), [
            {"type": "text", "text": "Looking at the pool."},
            {"type": "tool_use", "id": "tu1", "name": "Edit",
             "input": {"file_path": pool, "old_string": "a", "new_string": "b"}},
        ]),
        _line("user", t.format(1), [{"type": "tool_result", "tool_use_id": "tu1", "content": "ok"}]),
        _line("assistant", t.format(2), [
            {"type": "tool_use", "id": "tu2", "name": "Write",
             "input": {"file_path": retry, "content": "x = 1\n"}},
        ]),
        _line("user", t.format(2), [{"type": "tool_result", "tool_use_id": "tu2", "content": "ok"}],
              toolUseResult={"type": "create", "filePath": retry}),
        _line("assistant", t.format(3), [
            {"type": "tool_use", "id": "tu3", "name": "Bash",
             "input": {"command": f"cd src && GITHUB_TOKEN={SECRET} git push && python -m pytest -q"}},
        ]),
        _line("user", t.format(3), [{"type": "tool_result", "tool_use_id": "tu3", "is_error": True,
                                     "content": f"FAILED test_pool.py - password={PASSWORD}"}]),
        _line("assistant", t.format(4), [
            {"type": "tool_use", "id": "tu4", "name": "mcp__brainmap__save",
             "input": {"title": "Pool timeout must exceed the query timeout", "type": "gotcha"}},
        ]),
        _line("user", t.format(4), "<command-name>/compact</command-name>", isMeta=True),
        _line("assistant", t.format(5), [{"type": "text", "text": "Fixed the timeout.\nAll green."}]),
        {"type": "summary", "summary": "pool fix", "leafUuid": "u-x"},
    ]  # fmt: skip


def write_transcript(path: Path, lines: list[dict[str, Any]], partial: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
        handle.write("not json at all\n" + partial)
    return path


def settings_commands(settings: Path) -> dict[str, list[tuple[str | None, str]]]:
    """(matcher, command) of every hook handler in a settings file, by event."""
    data = json.loads(settings.read_text())
    out: dict[str, list[tuple[str | None, str]]] = {}
    for name, groups in data.get("hooks", {}).items():
        for group in groups:
            for handler in group["hooks"]:
                out.setdefault(name, []).append((group.get("matcher"), handler["command"]))
    return out


def run_hook_command(
    command: str, data: dict[str, Any] | str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a hook command the way Claude Code does: through the shell, JSON on stdin."""
    stdin = data if isinstance(data, str) else json.dumps(data)
    return subprocess.run(
        ["sh", "-c", command], input=stdin, capture_output=True, text=True, cwd=cwd,
        timeout=60, env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip
