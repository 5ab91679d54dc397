"""The agent-hook op: one event of an agent's session in, the context to inject out.

Every hook is a new process on the agent's hot path, so this module stays off the pydantic
operations table (its input comes from the agent, parsed by the ``brainmap hook`` command),
loads neither the embedding model nor numpy, and imports per event only what it uses.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainmap.keys import EntryRef
from brainmap.ops.brain import Brain
from brainmap.project import Project, identify

EVENTS = ("SessionStart", "PreToolUse", "UserPromptSubmit", "Stop", "SessionEnd")
PROBE = "brainmap-status-probe"  # the session id `hooks status` checks the hooks with
ROLLUP_LOCK_S = 1.0  # SessionStart rolls up only when the diary is free; reindex waits
READ_TOOLS = ("Read",)
WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


@dataclass
class HookEvent:
    """What an agent tells a hook (Claude Code's hook input, already parsed)."""

    event: str
    session_id: str
    cwd: Path
    transcript: Path | None = None
    source: str | None = None  # SessionStart: startup, resume, clear, compact
    tool: str | None = None  # PreToolUse
    tool_input: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None  # UserPromptSubmit
    stop_hook_active: bool = False  # Stop: already continuing because of a stop hook
    last_message: str | None = None  # Stop: the text of the agent's final answer


@dataclass
class HookReply:
    """The context to give the agent ("" for none) and what the hook wrote."""

    context: str = ""
    diary: str | None = None  # library:path of the diary day appended to
    rollups: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what went wrong but did not stop it


def hook(brain: Brain, event: HookEvent) -> HookReply:
    """Run one hook event: SessionStart, PreToolUse (Read, or a write), UserPromptSubmit,
    Stop or SessionEnd; the ``[hooks]`` settings turn each off."""
    # each event imports what it needs only: a Read must not pay for the diary's writer
    from brainmap import hooks

    settings = brain.cfg.hooks
    if not event.cwd.is_absolute() or not event.cwd.is_dir():
        return HookReply(problems=[f"ignored: cwd {str(event.cwd)!r} is not a folder"])
    project = identify(brain.cfg, event.cwd)
    probe = event.session_id == PROBE  # `hooks status`: everything is read, nothing written
    if event.event == "SessionStart":
        from brainmap import diary

        reply = HookReply()
        if event.session_id and not probe:
            try:
                diary.start_session(brain.cfg, event.session_id, event.transcript)
            except OSError as exc:  # the context matters more than the cursor
                reply.problems.append(f"session start not recorded: {exc}")
        if not settings.session_start:
            return reply
        if not probe:
            _roll_up(brain, reply)
        served: list[tuple[str, str, str]] = []
        reply.context = hooks.session_context(brain.cfg, brain.store, project, served=served)
        _record_served(brain, served, "SessionStart", probe)
        return reply
    if event.event == "PreToolUse":
        served = []
        context = _file_context(brain, project, event, served)
        target = event.tool_input.get("file_path") or event.tool_input.get("notebook_path")
        _record_served(brain, served, f"{event.tool} {target}", probe)
        return HookReply(context)
    if event.event == "UserPromptSubmit":
        if not settings.prompt or not event.prompt:
            return HookReply()
        served = []
        context = hooks.prompt_context(brain.cfg, brain.store, project, event.prompt, served)
        _record_served(brain, served, event.prompt, probe)
        return HookReply(context)
    if event.event in ("Stop", "SessionEnd"):
        if not settings.stop or event.stop_hook_active or not event.session_id:
            return HookReply()
        if probe:
            from brainmap import diary

            diary.diary_library(brain.cfg)  # a misconfigured diary is what a probe reveals
            return HookReply()
        return HookReply(diary=record_session(brain, project, event))
    return HookReply()


def _record_served(
    brain: Brain, served: list[tuple[str, str, str]], query: str, probe: bool
) -> None:
    """Record the entries a hook injected, written now: a hook process ends with
    ``os._exit`` (no exit flush), and it never waits long for a busy ``usage.db``."""
    if not served or probe or not brain.cfg.usage.enabled:
        return
    from brainmap import usage

    usage.served(brain.cfg, served, query, "hook")
    usage.flush(brain.cfg)


def _file_context(
    brain: Brain, project: Project, event: HookEvent, served: list[tuple[str, str, str]]
) -> str:
    from brainmap import hooks

    args = event.tool_input
    raw = args.get("file_path") or args.get("notebook_path")
    if not isinstance(raw, str) or not raw:
        return ""
    path = Path(raw) if os.path.isabs(raw) else event.cwd / raw
    if event.tool in READ_TOOLS and brain.cfg.hooks.pre_read:
        return hooks.file_context(
            brain.cfg, brain.store, project, path, writing=False, served=served
        )
    if event.tool in WRITE_TOOLS and brain.cfg.hooks.pre_write:
        return hooks.file_context(
            brain.cfg, brain.store, project, path, writing=True, new_text=written_text(args),
            served=served,
        )  # fmt: skip
    return ""


def written_text(args: dict[str, Any]) -> str:
    """The text a write tool puts into the file (and the text it replaces)."""
    parts = [args.get(key) for key in ("content", "new_string", "old_string", "new_source")]
    for edit in args.get("edits") or []:  # MultiEdit, in older agents
        if isinstance(edit, dict):
            parts += [edit.get("new_string"), edit.get("old_string")]
    return "\n".join(p for p in parts if isinstance(p, str))


def record_session(brain: Brain, project: Project, event: HookEvent) -> str | None:
    """Append the session's new turns to the diary and index the day (text only; the
    vectors are made later, in a detached process, or by the next reindex)."""
    from brainmap import diary
    from brainmap.indexer import index_files

    appended = diary.append_session(
        brain.cfg, project.name, project.root, event.session_id, event.transcript,
        event.last_message,
    )  # fmt: skip
    if appended.path is None:
        return None
    lib = brain.cfg.library(appended.library)
    index_files(brain.cfg, brain.store, lib, [appended.path], embed=False)
    brain.changed([lib.name], embed=False)
    reasoner = brain.cfg.reasoner
    if reasoner.enabled and reasoner.diary:
        # the summary is the model's: never on the hook's time (that run embeds afterwards)
        summarize_later(brain, project.name, event.session_id, appended.path)
    elif brain.cfg.hooks.background_embed:
        embed_later(brain, lib.name)
    return f"{lib.name}:{appended.path}"


def _roll_up(brain: Brain, reply: HookReply) -> None:
    """Completed periods' rollups, when the diary is free: best effort, the context comes
    first (the next SessionStart or reindex rolls up what was left)."""
    from brainmap import derive

    try:
        reply.rollups = derive.roll_up_completed(
            brain.cfg, brain.store, embed=False, lock_timeout_s=ROLLUP_LOCK_S
        )
    except Exception as exc:
        reply.problems.append(f"rollups left for later: {type(exc).__name__}: {exc}")
        return
    libraries = list(dict.fromkeys(EntryRef.parse(w).library for w in reply.rollups))
    if libraries:
        brain.changed(libraries, embed=False)


def embed_later(brain: Brain, library: str) -> None:
    """Embed what a hook indexed, in a detached process (it outlives the hook and never
    holds the agent's pipes): ``brainmap reindex LIBRARY``, one at a time (a running one
    embeds what later turns add too, as the reindex it does covers them)."""
    pid_file = brain.home / "state" / "embed-later.pid"
    if _alive(pid_file):
        return
    pid = _detached(brain, ["reindex", library])
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(str(pid))


def summarize_later(brain: Brain, project: str, session: str, day_path: str) -> None:
    """Have the reasoner summarise the session's new section, in a detached process that
    starts after the hook has appended it and outlives the hook: ``brainmap diary
    summarize`` (then the background embedding, when ``background_embed``). One per Stop:
    runs for one session take turns, and each writes only the summaries still missing."""
    year, month, name = day_path.rsplit("/", 3)[1:]
    args = ["diary", "summarize", f"--project={project}", f"--session={session}",
            f"--day={year}-{month}-{name.removesuffix('.md')}", "--after-stop"]  # fmt: skip
    _detached(brain, args)


def _detached(brain: Brain, args: list[str]) -> int:
    """Start ``brainmap --home HOME ARGS`` in a process of its own session (it never holds
    the agent's pipes), its output going to ``logs/background.log``; returns its pid."""
    import subprocess

    log_path = brain.home / "logs" / "background.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "brainmap", "--home", str(brain.home), *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True,
        )  # fmt: skip
    return child.pid


def _alive(pid_file: Path) -> bool:
    """Whether the process a pid file names still runs (a reused pid errs on the side of
    skipping one background run: the next reindex embeds what it would have)."""
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True
