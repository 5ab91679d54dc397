"""Ops that set an agent up with brainmap: the Claude Code hooks (install, uninstall,
status), the plugin folder, and the diary rollups.

``hooks install`` merges brainmap's entries into a Claude Code settings file and keeps every
other key and hook; the file is written atomically and only when its bytes change. The
first install keeps the file's original bytes in the home, so that ``hooks uninstall``
gives the user's file back byte for byte when nothing else changed meanwhile.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from brainmap import diary
from brainmap.errors import UserError
from brainmap.indexer import index_files
from brainmap.ops.core import Brain, _Input, op
from brainmap.ops.hook import EVENTS, embed_later
from brainmap.reasoner import Reasoner, Spent
from brainmap.safefile import atomic_write, read_regular, slugify

# (event, matcher, seconds): what `hooks install` writes. Claude Code's SessionEnd has a
# budget of its own (1.5 s unless a timeout raises it); the others default to minutes.
HOOKS: tuple[tuple[str, str | None, int], ...] = (
    ("SessionStart", "startup|resume|clear|compact", 10),
    ("PreToolUse", "Read", 5),
    ("PreToolUse", "Write|Edit|MultiEdit|NotebookEdit", 5),
    ("UserPromptSubmit", None, 5),  # only with --prompt
    ("Stop", None, 10),
    ("SessionEnd", None, 5),
)
MCP_NAME = "brainmap"
MAX_SETTINGS = 5_000_000


def brainmap_command(home: Path | None) -> list[str]:
    """The command that runs brainmap from anywhere: this installation's own script (an
    agent's PATH may not hold it), and the home when it is not the default one."""
    script = Path(sys.executable).parent / "brainmap"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "brainmap"]
    if home is not None:
        argv += ["--home", str(home)]
    return argv


def _hook_command(base: list[str], event: str) -> str:
    return " ".join(shlex.quote(part) for part in [*base, "hook", event])


def wanted_hooks(base: list[str], prompt: bool) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(event, matcher, handler) of every hook to install."""
    out = []
    for event, matcher, timeout in HOOKS:
        if event == "UserPromptSubmit" and not prompt:
            continue
        handler = {"type": "command", "command": _hook_command(base, event), "timeout": timeout}
        out.append((event, matcher, handler))
    return out


def is_ours(handler: Any) -> bool:
    """A hook handler that brainmap wrote: ``[python -m] brainmap [--home DIR] hook EVENT``
    and nothing else (a user's own script that mentions brainmap is not ours)."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    return _runs_brainmap(handler["command"], ["hook"], EVENTS)


def _runs_brainmap(command: str, verb: list[str], last: tuple[str, ...]) -> bool:
    """Whether ``command`` is ``brainmap [--home DIR] VERB... LAST`` (the script by any
    path, or ``PYTHON -m brainmap``)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv[:1] and Path(argv[0]).name == "brainmap":
        argv = argv[1:]
    elif len(argv) > 2 and re.fullmatch(r"python[0-9.]*", Path(argv[0]).name) and argv[1:3] == [
        "-m", "brainmap"
    ]:  # fmt: skip
        argv = argv[3:]
    else:
        return False
    if argv[:1] == ["--home"]:
        argv = argv[2:]
    return argv[: len(verb)] == verb and len(argv) == len(verb) + 1 and argv[-1] in last


# --- settings files -------------------------------------------------------------------------


def _load(path: Path) -> tuple[dict[str, Any], bytes | None]:
    """A JSON settings file (empty when missing) and its bytes."""
    try:
        raw = read_regular(path, MAX_SETTINGS)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserError(
            f"{path} is not valid JSON: {exc}", hint="fix the file, then install again"
        ) from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object", hint="fix the file first")
    return data, raw


def _dump(data: dict[str, Any], like: bytes | None) -> bytes:
    """JSON indented as the file was (two spaces by default), ending as it did."""
    indent: int | str = 2
    if like:
        found = re.search(rb"\n([ \t]+)\S", like)
        if found:
            space = found.group(1).decode()
            indent = len(space) if set(space) == {" "} else space
    try:
        text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # a number JSON cannot hold (1e400 read as infinity)
        raise UserError(f"cannot write these settings back as JSON: {exc}") from exc
    return (text + ("\n" if like is None or like.endswith(b"\n") else "")).encode("utf-8")


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """The settings with every brainmap hook handler removed (and what that left empty)."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [h for h in group["hooks"] if not is_ours(h)]
                if not handlers and group["hooks"]:
                    continue  # a group that only held ours goes with them
                group["hooks"] = handlers
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


def _with_ours(
    data: dict[str, Any], wanted: list[tuple[str, str | None, dict[str, Any]]]
) -> dict[str, Any]:
    """The settings with exactly the wanted brainmap hooks (others' hooks untouched)."""
    out = _without_ours(data)
    hooks = out.get("hooks")
    if hooks is None:
        hooks = out["hooks"] = {}
    elif not isinstance(hooks, dict):
        raise UserError('the settings key "hooks" is not an object', hint="fix the file first")
    for event, matcher, handler in wanted:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise UserError(f'the settings key "hooks.{event}" is not a list', hint="fix it")
        group: dict[str, Any] = {"matcher": matcher} if matcher is not None else {}
        group["hooks"] = [handler]
        groups.append(group)
    return out


def _backup_path(home: Path, target: Path) -> Path:
    digest = hashlib.sha256(str(target.absolute()).encode()).hexdigest()[:24]
    return home / "state" / "agent-files" / f"{digest}.json"


def _keep_original(home: Path, target: Path, raw: bytes | None) -> None:
    """Remember a file's bytes before brainmap first changes it (once)."""
    backup = _backup_path(home, target)
    if backup.exists():
        return
    record = {"path": str(target.absolute()), "existed": raw is not None,
              "bytes": raw.decode("utf-8") if raw is not None else None}  # fmt: skip
    atomic_write(home, backup, json.dumps(record).encode("utf-8"))


def _original(home: Path, target: Path) -> tuple[bool, bytes | None] | None:
    """(existed, bytes) of a file before brainmap first changed it, if remembered."""
    try:
        record = json.loads(read_regular(_backup_path(home, target), MAX_SETTINGS))
        raw = record["bytes"]
        return bool(record["existed"]), raw.encode("utf-8") if raw is not None else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass
class FileChange:
    """One file an install or uninstall changes (or, with dry_run, would change)."""

    path: str
    action: Literal["created", "updated", "removed", "unchanged"]
    before: str  # the text before ("" for none)
    after: str  # the text after ("" when removed)


def _write(target: Path, new: bytes | None, old: bytes | None, dry_run: bool) -> FileChange:
    before = old.decode("utf-8", "replace") if old is not None else ""
    after = new.decode("utf-8") if new is not None else ""
    if new == old:
        return FileChange(str(target), "unchanged", before, after)
    action: Literal["created", "updated", "removed"] = (
        "removed" if new is None else "created" if old is None else "updated"
    )
    if not dry_run:
        real = target.resolve()  # a settings file linked from a dotfiles folder stays a link
        try:
            if new is None:
                real.unlink(missing_ok=True)
            else:
                real.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(real.parent, real, new)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot write {target}: {exc}", status=409) from exc
    return FileChange(str(target), action, before, after)


def _restore(home: Path, target: Path, data: dict[str, Any], raw: bytes | None) -> bytes | None:
    """The bytes to leave once brainmap's part is gone: the original file when what is left
    equals it, no file when there was none and nothing is left, else the data re-written."""
    original = _original(home, target)
    if original is not None:
        existed, old = original
        if not existed and not data:
            return None
        if existed and old is not None:
            try:
                before = json.loads(old.decode("utf-8") or "{}")
            except ValueError:
                before = None
            # what is left equals the original without ours (its own empty "hooks": {} too)
            if isinstance(before, dict) and (before == data or _without_ours(before) == data):
                return old
    return _dump(data, raw)


# --- the ops --------------------------------------------------------------------------------


class HooksInput(_Input):
    """Where to install brainmap's hooks, and which."""

    scope: Literal["project", "user"] = Field(
        "project", description="project: DIR/.claude/settings.json; user: ~/.claude/settings.json"
    )
    project_dir: str | None = Field(None, description="The project folder (default: here).")
    prompt: bool = Field(False, description="Also the UserPromptSubmit hook (off by default).")
    mcp: bool = Field(False, description="Also register the MCP server in DIR/.mcp.json.")
    local: bool = Field(
        False, description="DIR/.claude/settings.local.json (not committed): this machine only."
    )
    dry_run: bool = Field(False, description="Show the change; write nothing.")


@dataclass
class HooksChange:
    """The files an install or uninstall changed, and the hooks now installed."""

    settings: str
    files: list[FileChange]
    hooks: list[str]  # "Event matcher" of the brainmap hooks now in the settings
    command: str  # how the hooks run brainmap
    dry_run: bool = False


def _targets(
    scope: str, project_dir: str | None, mcp: bool, local: bool = False
) -> tuple[Path, Path | None]:
    """The settings file and (for a project) its folder."""
    if scope == "user":
        home = Path(os.path.expanduser("~"))
        if not home.is_absolute() or not home.is_dir():
            raise UserError(f"no home folder for --user ({home})", hint="set $HOME")
        if mcp:
            raise UserError(
                "--mcp registers the server for a project",
                hint=f"for every project: claude mcp add --scope user {MCP_NAME} -- "
                + " ".join(shlex.quote(p) for p in brainmap_command(None))
                + " mcp",
            )
        return home / ".claude" / "settings.json", None
    folder = Path(project_dir or ".").expanduser().absolute()
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder")
    name = "settings.local.json" if local else "settings.json"
    return folder / ".claude" / name, folder


def _home_argument(brain: Brain) -> Path | None:
    default = Path(os.path.expanduser("~")) / ".brainmap"
    return None if brain.home == default.absolute() else brain.home


@op("hooks_install", HooksInput, HooksChange, writes=True)
def hooks_install(brain: Brain, inp: HooksInput) -> HooksChange:
    """Install brainmap's Claude Code hooks (SessionStart, PreToolUse on Read and on writes,
    Stop, SessionEnd; UserPromptSubmit with prompt) into a settings file, keeping every other
    key and hook; twice is the same as once."""
    target, folder = _targets(inp.scope, inp.project_dir, inp.mcp, inp.local)
    base = brainmap_command(_home_argument(brain))
    wanted = wanted_hooks(base, inp.prompt)
    data, raw = _load(target)
    new = _dump(_with_ours(data, wanted), raw)
    files = [_write_keeping_original(brain.home, target, new, raw, inp.dry_run)]
    if inp.mcp and folder is not None:
        files.append(_install_mcp(brain, folder / ".mcp.json", base, inp.dry_run))
    shown = [f"{event} {matcher or ''}".strip() for event, matcher, _ in wanted]
    return HooksChange(str(target), files, shown, " ".join(shlex.quote(p) for p in base),
                       inp.dry_run)  # fmt: skip


def _write_keeping_original(
    home: Path, target: Path, new: bytes, raw: bytes | None, dry_run: bool
) -> FileChange:
    """Write ``new``; the file's original bytes are remembered the first time (and forgotten
    again when the write fails, so that they stay the user's)."""
    first = not dry_run and new != raw and _original(home, target) is None
    if first:
        _keep_original(home, target, raw)
    try:
        return _write(target, new, raw, dry_run)
    except UserError:
        if first:
            _backup_path(home, target).unlink(missing_ok=True)
        raise


def _is_our_server(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    args = entry.get("args")
    words = [str(a) for a in args] if isinstance(args, list) else []
    return _runs_brainmap(shlex.join([entry["command"], *words]), [], ("mcp",))


def _install_mcp(brain: Brain, target: Path, base: list[str], dry_run: bool) -> FileChange:
    data, raw = _load(target)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise UserError(f'{target}: "mcpServers" is not an object', hint="fix the file first")
    if MCP_NAME in servers and not _is_our_server(servers[MCP_NAME]):
        raise UserError(f'{target} has an MCP server "{MCP_NAME}" of its own: left as it is',
                        hint="remove or rename it, or install without --mcp", status=409)  # fmt: skip
    servers[MCP_NAME] = {"command": base[0], "args": [*base[1:], "mcp"]}
    return _write_keeping_original(brain.home, target, _dump(data, raw), raw, dry_run)


class HooksRemoveInput(_Input):
    """Where to remove brainmap's hooks from (as for install)."""

    scope: Literal["project", "user"] = "project"
    project_dir: str | None = None
    local: bool = False
    dry_run: bool = False


@op("hooks_uninstall", HooksRemoveInput, HooksChange, writes=True)
def hooks_uninstall(brain: Brain, inp: HooksRemoveInput) -> HooksChange:
    """Remove brainmap's hooks (and its MCP server of the project) and nothing else; a file
    brainmap changed gets its original bytes back when nothing else changed in it."""
    target, folder = _targets(inp.scope, inp.project_dir, False, inp.local)
    data, raw = _load(target)
    files = []
    if raw is not None:
        files.append(_write(target, _restore(brain.home, target, _without_ours(data),
                                                         raw), raw, inp.dry_run))  # fmt: skip
    if folder is not None:
        mcp_path = folder / ".mcp.json"
        mcp, mcp_raw = _load(mcp_path)
        servers = mcp.get("mcpServers")
        if isinstance(servers, dict) and _is_our_server(servers.get(MCP_NAME)):
            del servers[MCP_NAME]
            if not servers:
                del mcp["mcpServers"]
            new = _restore(brain.home, mcp_path, mcp, mcp_raw)
            files.append(_write(mcp_path, new, mcp_raw, inp.dry_run))
    if not inp.dry_run:
        for path in [target] + ([folder / ".mcp.json"] if folder else []):
            _backup_path(brain.home, path).unlink(missing_ok=True)
    return HooksChange(str(target), files, [], "", inp.dry_run)


class HooksStatusInput(_Input):
    """Which project's settings to look at, and whether to run the hooks."""

    project_dir: str | None = Field(None, description="The project folder (default: here).")
    run: bool = Field(True, description="Run each hook once with an empty input to check it.")


@dataclass
class InstalledHook:
    """A brainmap hook found in a settings file, and whether it runs."""

    settings: str
    event: str
    matcher: str | None
    command: str
    runs: bool | None  # exit 0 on an empty input; None when not checked
    seconds: float | None = None
    problem: str | None = None


@dataclass
class HooksStatus:
    """The brainmap hooks installed, the .mcp.json files that register brainmap."""

    hooks: list[InstalledHook] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)  # .mcp.json files that register brainmap
    settings: list[str] = field(default_factory=list)  # the files looked at


@op("hooks_status", HooksStatusInput, HooksStatus)
def hooks_status(brain: Brain, inp: HooksStatusInput) -> HooksStatus:
    """Which brainmap hooks are installed (project, local and user settings) and whether each
    runs: its command is started once with an empty input, which a hook ignores."""
    folder = Path(inp.project_dir or ".").expanduser().absolute()
    files = [folder / ".claude" / "settings.json", folder / ".claude" / "settings.local.json",
             Path.home() / ".claude" / "settings.json"]  # fmt: skip
    status = HooksStatus(settings=[str(f) for f in files])
    for path in files:
        try:
            data, _ = _load(path)
        except UserError as exc:
            status.hooks.append(InstalledHook(str(path), "", None, "", False, None, exc.message))
            continue
        hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
        for event, groups in (hooks or {}).items():
            for group in groups if isinstance(groups, list) else []:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for handler in handlers if isinstance(handlers, list) else []:
                    if is_ours(handler):
                        found = InstalledHook(str(path), event, group.get("matcher"),
                                              handler["command"], None)  # fmt: skip
                        if inp.run:
                            _check(found, folder, brain.home)
                        status.hooks.append(found)
    mcp_path = folder / ".mcp.json"
    try:
        servers = _load(mcp_path)[0].get("mcpServers")
    except UserError:
        servers = None
    if isinstance(servers, dict) and MCP_NAME in servers:
        status.mcp.append(str(mcp_path))
    return status


def _check(found: InstalledHook, folder: Path, home: Path) -> None:
    """Run a hook as Claude Code would, on a probe event that reads and writes nothing; it
    runs when it exits 0 and logged no problem."""
    from brainmap.ops.hook import PROBE

    probe = {"hook_event_name": found.event, "session_id": PROBE, "cwd": str(folder),
             "source": "startup", "tool_name": "Read",
             "tool_input": {"file_path": str(folder / ".brainmap-status-probe")}}  # fmt: skip
    log = home / "logs" / "hooks.log"
    before = log.stat().st_size if log.exists() else 0
    shell = shutil.which("sh") or "/bin/sh"
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [shell, "-c", found.command], check=False, input=json.dumps(probe),
            capture_output=True, text=True, timeout=30, cwd=folder,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        found.runs, found.problem = False, str(exc)
        return
    found.seconds = round(time.monotonic() - started, 3)
    logged = ""
    if log.exists() and log.stat().st_size > before:
        with open(log, encoding="utf-8", errors="replace") as handle:
            handle.seek(before)
            logged = handle.read(2000).strip()
    found.runs = proc.returncode == 0 and not proc.stderr.strip() and not logged
    if not found.runs:
        found.problem = (logged or proc.stderr.strip() or f"exit {proc.returncode}")[:300]


# --- the plugin folder ----------------------------------------------------------------------


def plugin_files(command: str = "brainmap") -> dict[str, str]:
    """The Claude Code plugin (manifest, hooks, MCP server) as ``{relative path: text}``; its
    commands run ``command`` (``brainmap`` on the agent's PATH by default)."""
    from brainmap import __version__

    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UserError(f"--command {command!r} is not a command line: {exc}") from exc
    if not argv:
        raise UserError("--command is empty", hint="e.g. --command brainmap")
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, matcher, handler in wanted_hooks(argv, prompt=False):
        group: dict[str, Any] = {"matcher": matcher} if matcher is not None else {}
        group["hooks"] = [handler]
        hooks.setdefault(event, []).append(group)
    manifest = {
        "name": "brainmap",
        "version": __version__,
        "description": "A local knowledge brain: the library map and the project's gotchas at "
        "session start, notes about each file before it is read or changed, a daily diary.",
        "license": "MIT",
        "keywords": ["memory", "knowledge", "search", "mcp", "diary"],
    }
    marketplace = {
        "name": "brainmap",
        "owner": {"name": "brainmap"},
        "plugins": [{"name": "brainmap", "source": "./brainmap",
                     "description": manifest["description"]}],
    }  # fmt: skip
    mcp = {"mcpServers": {MCP_NAME: {"command": argv[0], "args": [*argv[1:], "mcp"]}}}

    def text(value: Any) -> str:
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"

    return {
        ".claude-plugin/marketplace.json": text(marketplace),
        "brainmap/.claude-plugin/plugin.json": text(manifest),
        "brainmap/hooks/hooks.json": text({"description": "brainmap hooks", "hooks": hooks}),
        "brainmap/.mcp.json": text(mcp),
    }


# --- diary rollups --------------------------------------------------------------------------


class DiaryRollupInput(_Input):
    """Which rollups to write."""

    period: Literal["week", "month", "both"] = Field("both", description="Which rollups.")
    project: str | None = Field(None, description="One project; every project when empty.")
    completed: bool = Field(
        False, description="Only periods that have ended (what reindex and SessionStart do)."
    )


@dataclass
class DiaryRollupReport:
    """The rollups written, and the projects the diary has."""

    written: list[str]  # library:path of the rollups whose bytes changed
    projects: list[str]
    reasoner: Spent | None = None  # the paragraphs' model calls; None without a reasoner


def _diary_reasoner(brain: Brain) -> Reasoner | None:
    """The reasoner for the diary's prose, or None when there is none or its use is off."""
    cfg = brain.cfg
    return Reasoner.of(cfg) if cfg.reasoner.enabled and cfg.reasoner.diary else None


def _index_written(brain: Brain, written: list[diary.Written], *, embed: bool = True) -> None:
    if written:
        lib = brain.cfg.library(written[0].library)
        index_files(brain.cfg, brain.store, lib, list(dict.fromkeys(w.path for w in written)),
                    embed=embed)  # fmt: skip
        brain.changed([lib.name], embed=embed)


@op("diary_rollup", DiaryRollupInput, DiaryRollupReport, writes=True)
def diary_rollup(brain: Brain, inp: DiaryRollupInput) -> DiaryRollupReport:
    """Write the weekly and monthly rollups of the diary (sessions, most-touched files,
    notes and decisions saved, errors that recurred, links to the days); a rollup is
    rewritten only when its days changed. With a reasoner (``[reasoner] diary``), a rollup
    without one gets a summary paragraph that links the days it summarises; the model is
    asked after the rollups are written and outside every lock, and a failure leaves the
    rollups as they are (``reasoner.skipped`` says why)."""
    if inp.project and slugify(inp.project) not in diary.projects(brain.cfg):
        raise UserError(f"the diary has no project {inp.project!r}", status=404,
                        hint="brainmap diary rollup (every project)")  # fmt: skip
    kinds = ("week", "month") if inp.period == "both" else (inp.period,)
    today = dt.date.today()
    written = diary.roll_up(
        brain.cfg, completed_only=inp.completed, kinds=kinds, project=inp.project, today=today,
    )  # fmt: skip
    spent = None
    reasoner = _diary_reasoner(brain)
    if reasoner is not None:
        with reasoner:
            written += diary.write_rollup_prose(
                brain.cfg, reasoner, project=inp.project, kinds=kinds,
                completed_only=inp.completed, today=today,
            )  # fmt: skip
        spent = reasoner.spent
    _index_written(brain, written)
    names = [inp.project] if inp.project else diary.projects(brain.cfg)
    paths = list(dict.fromkeys(f"{w.library}:{w.path}" for w in written))
    return DiaryRollupReport(paths, names, spent)


SUMMARY_DAYS = 3  # without --day, the project's last days with a section


class DiarySummarizeInput(_Input):
    """Which sections of the diary to summarise."""

    project: str = Field(..., description="The project (as the diary names it).")
    session: str | None = Field(
        None, description="One session's sections; every session's when empty."
    )
    day: dt.date | None = Field(None, description="One day; the project's last days when empty.")
    rollups: bool = Field(True, description="Also the completed rollups that have no paragraph.")
    after_stop: bool = Field(
        False, description="As the Stop hook's background run: index text only, then start the "
        "background embedding ([hooks] background_embed).",
    )  # fmt: skip


@dataclass
class DiarySummaryReport:
    """The days and rollups that got the model's prose, and what it cost."""

    written: list[str]  # library:path of the days and rollups written
    reasoner: Spent | None = None  # None without a reasoner (nothing is written then)


@op("diary_summarize", DiarySummarizeInput, DiarySummaryReport, writes=True)
def diary_summarize(brain: Brain, inp: DiarySummarizeInput) -> DiarySummaryReport:
    """Write what the diary lacks of the reasoner's prose: a 2-4 sentence ``- Summary:`` line
    at the end of each section (of a session, or all) of a project's days, and the summary
    paragraph of its completed rollups. A section or rollup that has one is left alone, so a
    run again writes nothing. The Stop hook starts this in a detached process after it has
    appended the session; without a reasoner it does nothing."""
    reasoner = _diary_reasoner(brain)
    if reasoner is None:
        return DiarySummaryReport([])
    slug = slugify(inp.project)
    if slug not in diary.projects(brain.cfg):
        raise UserError(f"the diary has no project {inp.project!r}", status=404)
    if inp.day is not None:
        days = [inp.day]
    else:
        lib = diary.diary_library(brain.cfg)
        found = diary.days_of(lib.path / diary.project_folder(brain.cfg, inp.project))
        days = [day for day, _ in list(found)[-SUMMARY_DAYS:]]
    with reasoner:
        written = diary.summarize_sessions(brain.cfg, reasoner, inp.project, days, inp.session)
        if inp.rollups:
            written += diary.write_rollup_prose(brain.cfg, reasoner, project=inp.project,
                                                completed_only=True)  # fmt: skip
    _index_written(brain, written, embed=not inp.after_stop)
    if inp.after_stop and brain.cfg.hooks.background_embed:
        lib = diary.diary_library(brain.cfg)
        embed_later(brain, lib.name)
    return DiarySummaryReport(list(dict.fromkeys(f"{w.library}:{w.path}" for w in written)),
                              reasoner.spent)  # fmt: skip


# --- reading the diary (the GUI's diary pages) ------------------------------------------------

MAX_DIARY_SHOWN = 1024 * 1024  # bytes of a day or week given back (a day file may hold 8 MB)


class DiaryIndexInput(_Input):
    """Whose days to list."""

    project: str | None = Field(
        None, max_length=200,
        description="A project of the diary; the one with the newest day when empty.",
    )  # fmt: skip


@dataclass
class DiaryDay:
    """A day of a project's diary that has a file."""

    day: str  # YYYY-MM-DD
    week: str  # its ISO week, YYYY-Www
    path: str  # in the diary's library


@dataclass
class DiaryIndex:
    """The diary's projects, and the days and weeks of one of them (newest first)."""

    library: str | None  # the diary's library; None when it is not a folder
    projects: list[str]
    project: str | None  # None: the diary has no project yet
    days: list[DiaryDay] = field(default_factory=list)
    weeks: list[str] = field(default_factory=list)


def _diary_days(brain: Brain, slug: str) -> tuple[Path, list[DiaryDay]]:
    """The diary library's folder and the days of one project, oldest first."""
    lib = diary.diary_library(brain.cfg)
    base = lib.path / diary.project_folder(brain.cfg, slug)
    days = [
        DiaryDay(day.isoformat(), diary.Period.of("week", day).label,
                 path.relative_to(lib.path).as_posix())
        for day, path in diary.days_of(base)
    ]  # fmt: skip
    return lib.path, days


def _diary_project(brain: Brain, project: str) -> str:
    """The folder of a project the diary has (404 otherwise)."""
    slug = slugify(project)
    if slug not in diary.projects(brain.cfg):
        raise UserError(f"the diary has no project {project!r}", status=404,
                        hint="pick one from the diary's projects")  # fmt: skip
    return slug


@op("diary_index", DiaryIndexInput, DiaryIndex)
def diary_index(brain: Brain, inp: DiaryIndexInput) -> DiaryIndex:
    """The projects of the diary, and the days (with a file) and weeks of one project."""
    try:
        library: str | None = diary.diary_library(brain.cfg).name
    except UserError:
        library = None
    projects = diary.projects(brain.cfg)
    if inp.project:
        slug = _diary_project(brain, inp.project)
    else:
        newest = {p: days[-1].day for p in projects if (days := _diary_days(brain, p)[1])}
        if not newest:
            return DiaryIndex(library, projects, None)
        slug = max(newest, key=lambda p: (newest[p], p))
    days = _diary_days(brain, slug)[1][::-1]
    return DiaryIndex(library, projects, slug, days, list(dict.fromkeys(d.week for d in days)))


class DiaryTextInput(_Input):
    """One day or one week of a project's diary."""

    project: str = Field(max_length=200, description="A project of the diary.")
    day: dt.date | None = Field(None, description="A day (YYYY-MM-DD).")
    week: str | None = Field(
        None, pattern=r"^[0-9]{4}-W[0-9]{2}$", description="A week (2026-W07)."
    )

    @model_validator(mode="after")
    def _one_period(self) -> DiaryTextInput:
        if (self.day is None) == (self.week is None):
            raise ValueError("give a day or a week")
        return self


@dataclass
class DiaryText:
    """The text of one day (its file) or week (its rollup; before it is written, its days one
    after another), with the days it covers and its neighbours."""

    project: str
    kind: Literal["day", "week"]
    label: str  # the date or the week
    first: str  # the days the period spans
    last: str
    days: list[DiaryDay]  # the days of the period with a file
    text: str
    path: str | None  # the file shown; None: a week without its rollup yet (its days shown)
    truncated: bool  # the text was longer than what is given back
    previous: str | None  # the label of the period before with a day, and after
    next: str | None


@op("diary_text", DiaryTextInput, DiaryText)
def diary_text(brain: Brain, inp: DiaryTextInput) -> DiaryText:
    """One day of a project's diary, or one week: its rollup file, or its days before the
    rollup is written. At most 1 MB of text (``truncated`` says when it was cut)."""
    slug = _diary_project(brain, inp.project)
    root, days = _diary_days(brain, slug)
    kind: Literal["day", "week"] = "day" if inp.day is not None else "week"
    if inp.day is not None:
        label = inp.day.isoformat()
        labels = [d.day for d in days]
        members = [d for d in days if d.day == label]
    else:
        label = str(inp.week)
        labels = list(dict.fromkeys(d.week for d in days))
        members = [d for d in days if d.week == label]
    if not members:
        raise UserError(f"the diary of {slug!r} has no {kind} {label}", status=404,
                        hint="pick one from the diary's days and weeks")  # fmt: skip
    path: str | None = members[0].path
    first = last = members[0].day
    if kind == "week":
        period = diary.Period.of("week", dt.date.fromisoformat(first))
        first, last = period.first.isoformat(), period.last.isoformat()
        rollup = f"{diary.project_folder(brain.cfg, slug)}/{label}.md"
        found = root / rollup
        path = rollup if found.is_file() and not found.is_symlink() else None
    parts = [path] if path else [d.path for d in members]
    try:
        data = b"\n".join(diary.read_in(root, root / p, MAX_DIARY_SHOWN + 1) for p in parts)
    except OSError as exc:  # a file swapped for a symlink or a folder since it was listed
        raise UserError(
            f"the diary's {kind} {label} cannot be read ({type(exc).__name__})",
            status=409,
            hint="reload the page: a diary file changed while it was read",
        ) from exc
    at = labels.index(label)
    return DiaryText(
        slug, kind, label, first, last, members,
        data[:MAX_DIARY_SHOWN].decode("utf-8", "replace"), path, len(data) > MAX_DIARY_SHOWN,
        labels[at - 1] if at > 0 else None, labels[at + 1] if at + 1 < len(labels) else None,
    )  # fmt: skip
