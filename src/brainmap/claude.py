"""The Claude Code hook protocol: the hook's JSON on stdin, one op, the reply JSON on stdout.

``brainmap hook EVENT`` runs here. A hook never breaks the agent: malformed input, a missing
or busy home, any error inside give exit 0, no output, and one line in the home's log
(``logs/hooks.log``; on stderr when there is no home). Nothing is ever blocked: the reply
only adds context (``hookSpecificOutput.additionalContext``), and Stop and SessionEnd say
nothing (context from a Stop hook would make Claude go on).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from brainmap.config import resolve_home
from brainmap.ops.hook import EVENTS

MAX_INPUT = 16 * 1024 * 1024  # a Write of a large file arrives whole
MAX_CONTEXT = 9000  # Claude Code cuts additionalContext at 10,000 characters
HOOK_BUSY_MS = 800  # a write waits this long for another writer, then leaves it for later
_CONTEXT_EVENTS = ("SessionStart", "PreToolUse", "UserPromptSubmit")
_WRITING_EVENTS = ("SessionStart", "Stop", "SessionEnd")


def run_hook(event: str, home: Path | None, stdin: IO[bytes], stdout: IO[str]) -> int:
    """Answer one hook call; always 0 (see the module docstring)."""
    try:
        where = resolve_home(home)
    except Exception as exc:  # a home that names no folder ($BRAINMAP_HOME=~nobody/x)
        _log(Path("/nonexistent"), event, f"no brainmap home: {exc}")
        return 0
    name = next((e for e in EVENTS if e.lower() == event.lower()), None)
    if name is None:
        _log(where, event, f"unknown hook event {event!r}")
        return 0
    brain = None
    # what the after-change step logs (SessionStart, Stop) goes to the hook log, one line
    # each; a Read does not pay for importing logging
    detach = _log_to(where, name) if name in _WRITING_EVENTS else None
    try:
        data = json.loads(stdin.read(MAX_INPUT) or b"null")
        if not isinstance(data, dict) or data.get("hook_event_name") not in (None, name):
            _log(where, name, "ignored: the input is not this event's hook JSON")
            return 0
        if not data.get("hook_event_name"):
            _log(where, name, "ignored: no hook_event_name in the input")
            return 0
        if not (where / "config.toml").is_file():
            _log(where, name, f"no brainmap home at {where}: run `brainmap init`")
            return 0
        from brainmap.ops.brain import Brain
        from brainmap.ops.hook import hook

        brain = Brain(where, busy_timeout_ms=HOOK_BUSY_MS)
        reply = hook(brain, parse_event(name, data))
        for problem in reply.problems:
            _log(where, name, problem)
        text = reply.context.strip()[:MAX_CONTEXT]
        if text and name in _CONTEXT_EVENTS:
            out = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
            # ASCII JSON: valid whatever the stdout encoding, even for a lone surrogate
            stdout.write(json.dumps(out))
            stdout.flush()
    except BaseException as exc:  # never a traceback, never a block, whatever happened
        _log(where, name, f"{type(exc).__name__}: {exc}")
    finally:
        if detach is not None:
            detach()
        if brain is not None:
            try:
                brain.close()
            except Exception as exc:
                _log(where, name, f"close: {type(exc).__name__}: {exc}")
    return 0


def _log_to(home: Path, event: str) -> Callable[[], None]:
    """Write the warnings of the ``brainmap`` logger as lines of the hook log (never a
    traceback on stderr) until the function returned is called."""
    import logging

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                message += f": {type(exc).__name__}: {exc}"
            _log(home, event, message)

    logger, handler = logging.getLogger("brainmap"), Handler(logging.WARNING)
    logger.addHandler(handler)
    return lambda: logger.removeHandler(handler)


def parse_event(name: str, data: dict[str, Any]) -> Any:
    """The op's :class:`~brainmap.ops.hook.HookEvent` from Claude Code's hook input."""
    from brainmap.ops.hook import HookEvent

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    cwd = text("cwd") or os.getcwd()
    transcript = text("transcript_path")
    tool_input = data.get("tool_input")
    return HookEvent(
        event=name,
        session_id=text("session_id") or "",
        cwd=Path(cwd).expanduser(),
        transcript=Path(transcript).expanduser() if transcript else None,
        source=text("source"),
        tool=text("tool_name"),
        tool_input=tool_input if isinstance(tool_input, dict) else {},
        prompt=text("prompt"),
        stop_hook_active=data.get("stop_hook_active") is True,
        last_message=text("last_assistant_message"),
    )


def _log(home: Path, event: str, message: str) -> None:
    """One line in ``logs/hooks.log`` of the home (stderr when there is no home)."""
    line = f"{dt.datetime.now().isoformat(timespec='seconds')} {event} {message}"
    line = " ".join(line.split())[:2000] + "\n"
    try:
        if not home.is_dir():
            raise FileNotFoundError(home)
        folder = home / "logs"
        folder.mkdir(exist_ok=True)
        with open(folder / "hooks.log", "a", encoding="utf-8", errors="replace") as handle:
            handle.write(line)
    except OSError:
        with contextlib.suppress(Exception):  # no stderr either: nothing more to do
            sys.stderr.write(line)
