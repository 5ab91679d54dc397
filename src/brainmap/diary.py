"""The diary: what each agent session did, one markdown file per project and day, and the
weekly and monthly rollups derived from the days.

``<library>/<folder>/<project>/YYYY/MM/DD.md`` (the global brain's ``diary/`` by default) is
append-only: a session's turns are read from its Claude Code transcript (JSONL) without an
LLM, from where the last append stopped, and appended as a section; earlier bytes never
change, so two machines' appends merge cleanly under git's ``merge=union``. Everything is
scrubbed of secrets before it is written, and bounded in size.

Rollups (``YYYY-Www.md``, ``YYYY-MM.md`` beside the year folders) are extractive: sessions,
most-touched files, notes saved, errors that recurred, links to the days. A rollup depends on
its days only and is written only when its bytes change.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brainmap.analysis import one_line
from brainmap.collectors.secrets import redact
from brainmap.config import Config, LibraryConfig
from brainmap.errors import UserError
from brainmap.markdown import cut
from brainmap.safefile import (
    LockTimeout,
    atomic_write,
    file_lock,
    library_lock,
    read_beneath,
    read_regular,
    safe_folder,
    slugify,
)

if TYPE_CHECKING:
    from brainmap.reasoner import Reasoner

MAX_TRANSCRIPT_READ = 64 * 1024 * 1024  # one append reads at most this much of a transcript
MAX_DAY_BYTES = 8 * 1024 * 1024
LINE_CHARS = 200  # each item of a section
MOST = {"asked": 10, "created": 20, "edited": 20, "ran": 12, "saved": 10, "error": 5}
AGENT_LINES, AGENT_CHARS = 3, 400
STATE_DAYS = 30  # session cursors older than this are dropped
MIN_YEAR, MAX_YEAR = 1970, 9000  # times outside are not believed
LOCK_WAIT_S = 3.0  # a hook waits this long for another session's append, then leaves it
# Days are append-only, so git's union merge keeps both machines' sections; rollups are
# rewritten, so they merge (or conflict) as usual and are rendered again from the days.
GITATTRIBUTES = "*/[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9].md merge=union\n"
# Tools with subcommands: "git commit" says more than "git".
_SUBCOMMANDS = {
    "git", "gh", "docker", "podman", "kubectl", "helm", "npm", "pnpm", "yarn", "bun", "cargo",
    "go", "pip", "pip3", "uv", "poetry", "brew", "apt", "apt-get", "systemctl", "make", "just",
    "terraform", "dotnet", "mvn", "gradle", "brainmap", "claude", "conda", "nix", "rustup",
}  # fmt: skip
_WRAPPERS = {"sudo", "env", "time", "nohup", "nice", "exec", "command", "xargs"}
MAX_COMMAND = 4096  # of a command line (a heredoc can be megabytes) and of an error read
MAX_PATH = 1024
_EXIT_CODE = re.compile(r"Exit code -?\d+")
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_PLAIN_WORD = re.compile(r"[a-z][a-z0-9:_-]{0,30}")
_SYNTHETIC = re.compile(r"^\s*<(local-command|command-|task-notification|system-reminder|bash-)")
_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]{1,80})\s*</command-name>")
_HEADING = re.compile(
    r"^## (?P<start>\d\d:\d\d)[–-](?P<end>\d\d:\d\d) session (?P<id>\S+)(?P<cont> \(continued\))?$"
)
_ITEM = re.compile(
    r"^- (?P<field>Asked|Created|Edited|Ran|Saved|Error|Agent|Summary): (?P<text>.*)$"
)
_QUOTED = re.compile(r"`(?P<item>[^`]+)`(?: ×(?P<count>\d+))?")
_FIELDS = {"Asked": "asked", "Created": "created", "Edited": "edited", "Ran": "ran",
           "Saved": "saved", "Error": "error", "Agent": "agent", "Summary": "summary"}  # fmt: skip


# --- a session's activity, read from its transcript ---------------------------------------


@dataclass
class Activity:
    """What one span of a session did (one append)."""

    started: dt.datetime | None = None
    ended: dt.datetime | None = None
    asked: list[str] = field(default_factory=list)
    created: Counter[str] = field(default_factory=Counter)
    edited: Counter[str] = field(default_factory=Counter)
    ran: Counter[str] = field(default_factory=Counter)
    saved: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    agent: str = ""

    @property
    def substantive(self) -> bool:
        """Worth a section: something was asked, changed, run, saved or went wrong."""
        return bool(self.asked or self.created or self.edited or self.ran or self.saved
                    or self.errors)  # fmt: skip


def read_transcript(path: Path, offset: int, root: Path | None) -> tuple[Activity, int]:
    """The activity in a transcript from byte ``offset`` on, and the offset after the last
    complete line (a line still being written is read next time). Paths inside ``root``
    are shown relative to it. Unknown or malformed lines are skipped."""
    try:
        if os.stat(path).st_size < offset:  # replaced or truncated: read it from the start
            offset = 0
        data = read_regular(path, MAX_TRANSCRIPT_READ, offset)
    except OSError:  # gone, unreadable, or not a regular file (a FIFO must not hang a hook)
        return Activity(), offset
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) == MAX_TRANSCRIPT_READ:
        return Activity(), offset + len(data)  # one line longer than the window: skip it
    reader = _Reader(root)
    for raw in data[:end].split(b"\n"):
        try:
            item = json.loads(raw)
        except (ValueError, RecursionError):  # malformed, or nested beyond any real line
            continue
        if isinstance(item, dict):
            reader.line(item)
    return reader.activity, offset + end


class _Reader:
    """Folds transcript lines into an :class:`Activity`."""

    def __init__(self, root: Path | None) -> None:
        self.activity = Activity()
        self.root = root
        # tool_use id -> (label, the file it writes or edits, which counter counts it)
        self.tools: dict[str, tuple[str, str, str]] = {}
        self.home = str(Path.home())

    def line(self, item: dict[str, Any]) -> None:
        """Fold one transcript line in (only the main thread's user and assistant lines)."""
        if item.get("isSidechain") or item.get("type") not in ("user", "assistant"):
            return
        when = _timestamp(item.get("timestamp"))
        if when is not None:
            act = self.activity
            act.started = act.started or when
            act.ended = when
        message = item.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if item["type"] == "assistant":
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict):
                    self._assistant(block)
            return
        if item.get("isMeta"):
            return
        if isinstance(content, str):
            self._request(content)
            return
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                self._request(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                self._result(block, item.get("toolUseResult"))

    def _request(self, text: str) -> None:
        command = _COMMAND_NAME.search(text)
        if command:  # a slash command: its name is the request
            text = command.group(1)
        elif _SYNTHETIC.match(text) or text.startswith("Caveat:"):
            return
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if first and len(self.activity.asked) < MOST["asked"]:
            self.activity.asked.append(first)

    def _assistant(self, block: dict[str, Any]) -> None:
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            self.activity.agent = str(block["text"])
            return
        if kind != "tool_use":
            return
        name, args = str(block.get("name", "")), block.get("input")
        args = args if isinstance(args, dict) else {}
        label, written, counter = name, "", ""
        if name in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
            raw = args.get("file_path") or args.get("notebook_path") or ""
            written = self.shown(str(raw)[:MAX_PATH])
            counter = "created" if name == "Write" else "edited"
            if written and counter == "edited":
                self.activity.edited[written] += 1  # taken back if its result is an error
            label = f"{name} {written}"
        elif name == "Bash":
            command = str(args.get("command", ""))[:MAX_COMMAND]
            words = command_words(command)
            for word in words:
                self.activity.ran[word] += 1
            label = words[-1] if words else "Bash"  # `cd x && pytest` fails in pytest
            self._saved_by_cli(command)
        elif re.fullmatch(r"mcp__.*brainmap.*__(save|ingest)", name):
            title = str(args.get("title") or args.get("text") or "").strip()
            if title:
                self._saved(title.splitlines()[0], str(args.get("type") or "note"))
        self.tools[str(block.get("id", ""))] = (label, written, counter)

    def _result(self, block: dict[str, Any], result: Any) -> None:
        label, written, counter = self.tools.get(str(block.get("tool_use_id", "")),
                                                 ("tool", "", ""))  # fmt: skip
        if block.get("is_error"):
            if written and counter == "edited":
                self.activity.edited[written] -= 1
                if self.activity.edited[written] <= 0:
                    del self.activity.edited[written]
            lines = _result_text(block.get("content"))[:MAX_COMMAND].splitlines()
            # a failed command's output starts with "Exit code N": the reason comes after
            said = [line.strip() for line in lines if line.strip()]
            said = [line for line in said if not _EXIT_CODE.fullmatch(line)] or said or ["error"]
            if len(self.activity.errors) < MOST["error"]:
                self.activity.errors.append(f"{label}: {said[0]}")
            return
        if written and counter == "created":  # a Write that succeeded, unless it replaced a file
            updated = isinstance(result, dict) and result.get("type") == "update"
            (self.activity.edited if updated else self.activity.created)[written] += 1

    def _saved_by_cli(self, command: str) -> None:
        for words in simple_commands(command):
            if len(words) >= 3 and Path(words[0]).name == "brainmap" and words[1] == "save":
                kind = "note"
                for i, word in enumerate(words[:-1]):
                    if word in ("-t", "--type"):
                        kind = words[i + 1]
                self._saved(words[2], kind)

    def _saved(self, title: str, kind: str) -> None:
        item = f"{title} ({kind})" if kind and kind != "note" else title
        if item not in self.activity.saved and len(self.activity.saved) < MOST["saved"]:
            self.activity.saved.append(item)

    def shown(self, path: str) -> str:
        """A path as the diary shows it: relative to the project, else with ``~``."""
        if not path:
            return ""
        if self.root is not None:
            try:
                return Path(path).relative_to(self.root).as_posix()
            except ValueError:
                pass
        return "~" + path[len(self.home) :] if path.startswith(self.home + os.sep) else path


def _timestamp(value: Any) -> dt.datetime | None:
    """An ISO time of a transcript line (None unless it is one, in a year a diary can file:
    the days around it must exist in every time zone)."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if not MIN_YEAR <= when.year <= MAX_YEAR:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("text")
        )
    return ""


_SEPARATORS = {";", ";;", "&", "&&", "|", "||", "|&", "\n", "(", ")"}
_COMMAND = re.compile(r"[a-z0-9_][a-z0-9_.+-]{0,23}")  # what an executable is called


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command of a shell line, as the shell splits them: quotes
    kept whole, the bodies of heredocs and the targets of redirections left out. A line the
    shell could not parse gives none (an argument must never pass for a command)."""
    lines: list[str] = []
    until: str | None = None
    for line in command[:MAX_COMMAND].split("\n"):
        if until is not None:
            if line.strip() == until:
                until = None
            continue
        heredoc = _HEREDOC.search(line)
        until = heredoc.group(1) if heredoc else None
        lines.append(line)
    lexer = shlex.shlex("\n".join(lines), posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace, lexer.whitespace_split = " \t\r", True
    out: list[list[str]] = [[]]
    skip = False
    try:
        for token in lexer:
            if skip:
                skip = False
            elif token in _SEPARATORS:
                out.append([])
            elif token and set(token) <= set("<>&"):  # a redirection: the next word is its file
                skip = True
            else:
                out[-1].append(token)
    except ValueError:  # unbalanced quotes
        return []
    return [words for words in out if words]


def command_words(command: str) -> list[str]:
    """The first words of each command in a shell line: ``cd x && git commit -m y | tee``
    gives ``cd``, ``git commit``, ``tee``. Never an argument (they may hold secrets)."""
    out = []
    for simple in simple_commands(command):
        words = [w for w in simple if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
        while words and words[0] in _WRAPPERS:
            words = words[1:]
        if not words:
            continue
        first = Path(words[0]).name
        if not _COMMAND.fullmatch(first):
            continue
        if first in _SUBCOMMANDS and len(words) > 1 and _PLAIN_WORD.fullmatch(words[1]):
            first = f"{first} {words[1]}"
        elif first.startswith("python") and len(words) > 2 and words[1] == "-m":
            module = words[2]
            first = f"{first} -m {module}" if _COMMAND.fullmatch(module) else first
        out.append(first)
    return out


# --- writing a day --------------------------------------------------------------------------


@dataclass
class Appended:
    """Where a session's span went (None when there was nothing to write)."""

    library: str
    path: str | None
    sections: int  # sections this session has written so far


def diary_library(cfg: Config) -> LibraryConfig:
    """The library the diary is written into (``[diary] library``)."""
    lib = cfg.library(cfg.diary.library)
    if not lib.path.is_dir():
        raise UserError(f"diary library {lib.name!r}: {lib.path} is not a folder")
    return lib


def project_folder(cfg: Config, project: str) -> str:
    """``<folder>/<project slug>``, relative to the diary library."""
    return (safe_folder(cfg.diary.folder) / slugify(project)).as_posix()


def day_path(cfg: Config, project: str, day: dt.date) -> str:
    """``<folder>/<project>/YYYY/MM/DD.md``, relative to the diary library."""
    return f"{project_folder(cfg, project)}/{day:%Y/%m/%d}.md"


def day_header(project: str, day: dt.date) -> str:
    """The first lines of a day file: the same on every machine, so that two machines that
    both start the day merge to one header."""
    title = json.dumps(f"{project} diary {day.isoformat()}", ensure_ascii=False)
    return (
        f"---\ntitle: {title}\ntype: diary\nproject: {json.dumps(project, ensure_ascii=False)}\n"
        f"created: {day.isoformat()}\n---\n# {_line(project)}, {day.isoformat()}\n"
    )


def _line(text: str, limit: int = LINE_CHARS) -> str:
    """One bounded line of plain text, secrets removed. The scrubber reads a window well past
    the limit, so that a secret that starts before the cut is still seen whole."""
    text = redact(one_line(text[: limit * 8]))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _items(counts: Counter[str], most: int) -> str:
    shown = [
        "`" + _line(name).replace("`", "'") + "`" + (f" ×{n}" if n > 1 else "")
        for name, n in counts.most_common(most)
    ]
    if len(counts) > most:
        shown.append(f"and {len(counts) - most} more")
    return ", ".join(shown)


def short_session(session: str) -> str:
    """A session id as its section headings show it."""
    return re.sub(r"[^A-Za-z0-9_-]", "", session)[:8] or "unknown"


def render_section(session: str, act: Activity, *, continued: bool, zone: dt.tzinfo | None) -> str:
    """The markdown section of one span of a session."""
    start = (act.started or act.ended or dt.datetime.now(dt.UTC)).astimezone(zone)
    end = (act.ended or start).astimezone(zone)
    short = short_session(session)
    lines = [
        f"## {start:%H:%M}–{end:%H:%M} session {short}" + (" (continued)" if continued else "")
    ]
    lines.append("")
    lines += [f"- Asked: {_line(text)}" for text in act.asked]
    if act.created:
        lines.append(f"- Created: {_items(act.created, MOST['created'])}")
    if act.edited:
        lines.append(f"- Edited: {_items(act.edited, MOST['edited'])}")
    if act.ran:
        lines.append(f"- Ran: {_items(act.ran, MOST['ran'])}")
    lines += [f"- Saved: {_line(title)}" for title in act.saved]
    lines += [f"- Error: {_line(error)}" for error in act.errors]
    # each line scrubbed apart: joined, "KEY\n= value" would no longer read as an assignment
    agent = [_line(line, AGENT_CHARS) for line in act.agent[: AGENT_CHARS * 8].splitlines()]
    agent = [line for line in agent if line][:AGENT_LINES]
    if agent:
        lines.append(f"- Agent: {cut(' / '.join(agent), AGENT_CHARS)}")
    return "\n".join(lines) + "\n"


@dataclass
class _Cursor:
    offset: int = 0
    sections: int = 0


def _cursor_path(home: Path, session: str) -> Path:
    """One file per session id: readable, and distinct for ids that read alike."""
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", session)[:80]
    return home / "state" / "sessions" / f"{name}-{digest}.json"


def _read_cursor(home: Path, session: str) -> _Cursor | None:
    try:
        data = json.loads(read_regular(_cursor_path(home, session), 4096))
        return _Cursor(int(data["offset"]), int(data.get("sections", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cursor(home: Path, session: str, cursor: _Cursor) -> None:
    path = _cursor_path(home, session)
    data = json.dumps({"offset": cursor.offset, "sections": cursor.sections}).encode()
    atomic_write(home, path, data)


def start_session(cfg: Config, session: str, transcript: Path | None) -> None:
    """Remember where a session starts in its transcript, so that a resumed conversation's
    earlier turns are not written again (a session seen before keeps its cursor)."""
    if _read_cursor(cfg.home, session) is not None:
        return
    try:
        offset = os.stat(transcript).st_size if transcript else 0
    except OSError:
        offset = 0
    _write_cursor(cfg.home, session, _Cursor(offset, 0))
    _prune_cursors(cfg.home)


def _prune_cursors(home: Path) -> None:
    folder = home / "state" / "sessions"
    limit = dt.datetime.now().timestamp() - STATE_DAYS * 86400
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for item in entries:
        try:
            if item.is_file(follow_symlinks=False) and item.stat().st_mtime < limit:
                os.unlink(item.path)
        except OSError:
            continue


def append_session(
    cfg: Config,
    project: str,
    root: Path | None,
    session: str,
    transcript: Path | None,
    last_message: str | None = None,
) -> Appended:
    """Append what the session did since its last append to the project's diary of the day
    its span ended (local time). The transcript is read first; the write happens under the
    diary library's lock (waited for at most ``LOCK_WAIT_S``), so that concurrent sessions
    both land: the file is rewritten atomically with its old bytes unchanged and the section
    added at the end. A day over ``MAX_DAY_BYTES`` is not appended to."""
    lib = diary_library(cfg)
    cursor = _read_cursor(cfg.home, session) or _Cursor()
    act, offset = _read_span(transcript, cursor, root)
    with library_lock(cfg.home, lib.name, timeout_s=LOCK_WAIT_S):
        now = _read_cursor(cfg.home, session) or _Cursor()
        if now != cursor:  # another hook of this session appended meanwhile: read from there
            cursor = now
            act, offset = _read_span(transcript, cursor, root)
        if last_message and act.substantive:
            act.agent = last_message  # the transcript may not hold the final message yet
        if not act.substantive:
            if offset != cursor.offset:
                _write_cursor(cfg.home, session, _Cursor(offset, cursor.sections))
            return Appended(lib.name, None, cursor.sections)
        zone = dt.datetime.now().astimezone().tzinfo
        day = (act.ended or dt.datetime.now(dt.UTC)).astimezone(zone).date()
        rel = day_path(cfg, project, day)
        path = lib.path / rel
        try:
            # no symlink followed on the way: a folder swapped for one must not pour an
            # outside file into the day that is written back
            old = read_beneath(lib.path, rel, MAX_DAY_BYTES + 1)
        except FileNotFoundError:
            old = b""
        except OSError as exc:
            raise UserError(f"cannot read the diary {path}: {exc}") from exc
        if len(old) > MAX_DAY_BYTES:
            raise UserError(
                f"the diary day {path} is over {MAX_DAY_BYTES // 2**20} MB: not appended"
            )
        if not old:
            _ensure_gitattributes(cfg, lib)
        data = old or day_header(project, day).encode("utf-8")
        if not data.endswith(b"\n"):
            data += b"\n"
        section = render_section(session, act, continued=cursor.sections > 0, zone=zone)
        # bytes, not text: what was there stays exactly as it was, whatever its encoding
        atomic_write(lib.path, path, data + b"\n" + section.encode("utf-8"))
        # a crash right here writes this span again next time: a duplicate, never a loss
        _write_cursor(cfg.home, session, _Cursor(offset, cursor.sections + 1))
        return Appended(lib.name, rel, cursor.sections + 1)


def _read_span(transcript: Path | None, cursor: _Cursor, root: Path | None) -> tuple[Activity, int]:
    if transcript is None:
        return Activity(), cursor.offset
    return read_transcript(transcript, cursor.offset, root)


def _ensure_gitattributes(cfg: Config, lib: LibraryConfig) -> None:
    """``<folder>/.gitattributes`` with ``merge=union``: two machines' appends to one day
    merge line by line, without a conflict. Written once; a user's own file is kept."""
    path = lib.path / safe_folder(cfg.diary.folder) / ".gitattributes"
    if not path.exists():
        atomic_write(lib.path, path, GITATTRIBUTES.encode())


# --- reading days back, and rollups ---------------------------------------------------------


@dataclass
class Section:
    """One section of a day file, read back."""

    day: dt.date
    start: str
    session: str
    continued: bool
    items: dict[str, list[str]]


def parse_day(day: dt.date, text: str) -> list[Section]:
    """The sections of a day file (lines that are not the diary's own format are ignored).
    Lines end at newlines only: no other character can start a forged section."""
    out: list[Section] = []
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            out.append(Section(day, heading["start"], heading["id"], bool(heading["cont"]), {}))
            continue
        item = _ITEM.match(line)
        if item and out:
            out[-1].items.setdefault(_FIELDS[item["field"]], []).append(item["text"])
    return out


def _counted(texts: Iterable[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts:
        for match in _QUOTED.finditer(text):
            counts[match["item"]] += int(match["count"] or 1)
    return counts


@dataclass
class Period:
    """A week (``2026-W49``) or month (``2026-12``) of one project's diary."""

    kind: str  # "week" or "month"
    label: str
    first: dt.date
    last: dt.date

    @classmethod
    def of(cls, kind: str, day: dt.date) -> Period:
        """The week (ISO, Monday to Sunday) or month holding ``day``."""
        if kind == "week":
            year, week, weekday = day.isocalendar()
            first = day - dt.timedelta(days=weekday - 1)
            return cls(kind, f"{year}-W{week:02d}", first, first + dt.timedelta(days=6))
        first = day.replace(day=1)
        following = (first + dt.timedelta(days=32)).replace(day=1)
        return cls(kind, f"{day:%Y-%m}", first, following - dt.timedelta(days=1))


@dataclass
class Written:
    """A rollup file that was written."""

    library: str
    path: str
    project: str


def read_in(root: Path, path: Path, limit: int = MAX_DAY_BYTES) -> bytes:
    """At most ``limit`` bytes of a diary file at ``path`` inside the library at ``root``,
    reached without following a symlink (as the scan reads): what it shows or rolls up is
    never a file outside the library that a swapped folder leads to."""
    return read_beneath(root, path.relative_to(root).as_posix(), limit)


def days_of(project_dir: Path) -> Iterator[tuple[dt.date, Path]]:
    """The day files under a project's diary folder, by date."""
    try:
        years = sorted(e.name for e in os.scandir(project_dir) if e.is_dir(follow_symlinks=False))
    except OSError:
        return
    for year in years:
        if not re.fullmatch(r"\d{4}", year):
            continue
        try:
            months = sorted(e.name for e in os.scandir(project_dir / year)
                            if e.is_dir(follow_symlinks=False))  # fmt: skip
        except OSError:
            continue
        for month in months:
            try:
                files = sorted(e.name for e in os.scandir(project_dir / year / month)
                               if e.is_file(follow_symlinks=False))  # fmt: skip
            except OSError:
                continue
            for name in files:
                match = re.fullmatch(r"(\d\d)\.md", name)
                if not match or not re.fullmatch(r"\d\d", month):
                    continue
                try:
                    day = dt.date(int(year), int(month), int(match[1]))
                except ValueError:
                    continue
                if not MIN_YEAR <= day.year <= MAX_YEAR:
                    continue  # a file put there by hand: its week or month may not exist
                yield day, project_dir / year / month / name


def projects(cfg: Config) -> list[str]:
    """The project folders of the diary: those named by their slug (the diary's own; a
    hand-made ``My Proj`` folder is no project the diary writes or reads)."""
    try:
        lib = diary_library(cfg)
    except UserError:
        return []
    base = lib.path / safe_folder(cfg.diary.folder)
    try:
        return sorted(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False)
                      and not e.name.startswith(".") and e.name == slugify(e.name))  # fmt: skip
    except OSError:
        return []


def roll_up(
    cfg: Config,
    *,
    completed_only: bool = False,
    kinds: tuple[str, ...] = ("week", "month"),
    project: str | None = None,
    today: dt.date | None = None,
    lock_timeout_s: float | None = None,
) -> list[Written]:
    """Write the rollups whose days changed: every period with days, or (``completed_only``,
    as reindex and SessionStart do) the periods that ended before today. Cheap when nothing
    changed: one stat per day file. Returns the files written (the caller indexes them)."""
    today = today or dt.date.today()
    try:
        lib = diary_library(cfg)
    except UserError:
        return []
    written: list[Written] = []
    slugs = [slugify(project)] if project else projects(cfg)
    with library_lock(cfg.home, lib.name, timeout_s=lock_timeout_s):
        for slug in slugs:
            base = lib.path / safe_folder(cfg.diary.folder) / slug
            days = list(days_of(base))
            for kind in kinds:
                periods: dict[str, tuple[Period, list[tuple[dt.date, Path]]]] = {}
                for day, path in days:
                    period = Period.of(kind, day)
                    periods.setdefault(period.label, (period, []))[1].append((day, path))
                for period, members in periods.values():
                    if completed_only and period.last >= today:
                        continue
                    target = base / f"{period.label}.md"
                    digest = days_digest(members)
                    made_from = _made_from(lib.path, target)
                    if completed_only and made_from == digest:
                        continue
                    # the reasoner's paragraph stays while the days it was written from do
                    kept = _kept_summary(lib.path, target, members) if made_from == digest else None
                    text = render_rollup(slug, period, members, digest, root=lib.path, summary=kept)
                    if atomic_write(lib.path, target, text.encode("utf-8")):
                        rel = target.relative_to(lib.path).as_posix()
                        written.append(Written(lib.name, rel, slug))
    return written


def days_digest(members: list[tuple[dt.date, Path]]) -> str:
    """What a rollup is made from, by stat alone: each day's date and size (days are
    append-only, and sizes, unlike times, are the same on every machine after a git pull)."""
    parts = []
    for day, path in sorted(members):
        try:
            parts.append(f"{day.isoformat()}:{path.stat().st_size}")
        except OSError:
            parts.append(f"{day.isoformat()}:-")
    return hashlib.sha256(" ".join(parts).encode()).hexdigest()[:16]


def _made_from(root: Path, target: Path) -> str | None:
    """The days digest a rollup says it was made from (None when missing or unreadable,
    as after a merge that mixed two versions)."""
    try:
        head = read_in(root, target, 1024).decode("utf-8", "replace")
    except OSError:
        return None
    found = re.findall(r"^days: ([0-9a-f]{16})$", head, re.MULTILINE)
    return found[0] if len(found) == 1 else None


def _project_of(text: str, fallback: str) -> str:
    match = re.search(r"^project: (.+)$", text, re.MULTILINE)
    if match:
        try:
            value = json.loads(match[1])
            if isinstance(value, str):
                return value
        except ValueError:
            return match[1].strip()
    return fallback


def render_rollup(
    slug: str,
    period: Period,
    members: list[tuple[dt.date, Path]],
    digest: str,
    *,
    root: Path | None = None,
    summary: str | None = None,
) -> str:
    """The rollup of one period from its day files (deterministic: same days, same bytes);
    ``digest`` (:func:`days_digest`) is written into its frontmatter. With ``root``, the
    library the days are in, they are read as :func:`read_in` reads. ``summary``, the
    reasoner's paragraph (:func:`clean_prose` already applied), goes under ``## Summary``
    before the deterministic sections, which it never replaces."""
    sections: list[Section] = []
    project = slug
    for day, path in sorted(members):
        try:
            data = read_regular(path, MAX_DAY_BYTES) if root is None else read_in(root, path)
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        project = _project_of(text, project)
        sections += parse_day(day, text)
    sessions: dict[str, list[Section]] = {}
    for section in sections:
        sessions.setdefault(section.session, []).append(section)
    files = _counted(t for s in sections for f in ("created", "edited") for t in s.items.get(f, []))
    saved = list(dict.fromkeys(
        f"{t} ({s.day.isoformat()})" for s in sections for t in s.items.get("saved", [])
    ))  # fmt: skip
    errors: dict[str, set[tuple[dt.date, str]]] = {}
    for s in sections:
        for text in s.items.get("error", []):
            errors.setdefault(text, set()).add((s.day, s.session))
    recurring = sorted(
        ((text, seen) for text, seen in errors.items() if len(seen) > 1),
        key=lambda item: (-len(item[1]), item[0]),
    )
    name = "week" if period.kind == "week" else "month"
    title = json.dumps(f"{project} diary, {name} {period.label}", ensure_ascii=False)
    lines = [
        "---",
        f"title: {title}",
        "type: diary",
        f"project: {json.dumps(project, ensure_ascii=False)}",
        f"created: {period.last.isoformat()}",
        f"period: {period.label}",
        f"days: {digest}",
        "---",
        f"# {_line(project)}, {name} {period.label} ({period.first} to {period.last})",
        "",
    ]
    day_links = [f"[{d.isoformat()}]({d:%Y/%m/%d}.md)" for d in sorted({d for d, _ in members})]
    lines.append(f"{len(sessions)} session(s) on {len(day_links)} day(s): {', '.join(day_links)}.")
    if summary:
        lines += ["", SUMMARY_HEADING, "", summary]
    lines += ["", "## Sessions", ""]
    for session, parts in sessions.items():
        first = parts[0]
        asked = next((t for p in parts for t in p.items.get("asked", [])), "")
        turns = f" ({len(parts)} turns)" if len(parts) > 1 else ""
        link = f"[{first.day.isoformat()}]({first.day:%Y/%m/%d}.md)"
        lines.append(f"- {link} {first.start} `{session}`{turns}" + (f": {asked}" if asked else ""))
    if files:
        lines += ["", "## Most-touched files", ""]
        lines += [f"- `{name}` ×{n}" for name, n in files.most_common(15)]
    if saved:
        lines += ["", "## Notes and decisions saved", ""]
        lines += [f"- {text}" for text in saved[:30]]
    if recurring:
        lines += ["", "## Errors that recurred", ""]
        for text, seen in recurring[:10]:
            days = sorted({d for d, _ in seen})
            lines.append(f"- {text} ({len(seen)} times, {len(days)} day(s))")
    return "\n".join(lines) + "\n"


# --- prose by the reasoner (optional) -------------------------------------------------------
#
# With a reasoner whose diary use is on, each section of a day gets a "- Summary:" line and
# each rollup a paragraph under "## Summary", written by the model. Never on a hook's time:
# the Stop hook's detached process and the rollup op write them, outside every lock while
# the model answers. The deterministic rollups that reindex and SessionStart write keep a
# paragraph while the days it was written from are unchanged. What the model writes is one
# line, scrubbed of secrets, bounded, and links nothing but the days of its period.

SUMMARY_HEADING = "## Summary"
SUMMARY_ITEM = b"- Summary: "
SESSION_SUMMARY_CHARS, SESSION_SUMMARY_SENTENCES = 600, 4
PROSE_CHARS, PROSE_SENTENCES = 1200, 8
PROSE_SLACK = 80  # the days' link a paragraph that linked none is given, past PROSE_CHARS
SECTION_INPUT_CHARS = 2500  # of one section, as the model reads it
ROLLUP_INPUT_CHARS = 6000  # of a period's sections, as the model reads them
SESSION_SUMMARY_TOKENS, PROSE_TOKENS = 160, 300
MAX_PROSE_CALLS = 12  # model calls in one run; the next run writes what is left
SUMMARY_LOCK_S = 120.0  # one session's summaries are written by one process at a time
PROSE_LOCK_S = 30.0  # the diary library's lock, held for a read and a write only

_SESSION_SYSTEM = (
    "You summarise one section of a software agent's work diary. Write 2 to 4 short plain "
    "sentences: what was asked, what was changed or run, and how it ended. No lists, no "
    "headings, no links, no preamble."
)
_ROLLUP_SYSTEM = (
    "You write the summary paragraph of a software project's work diary for one {name}. "
    "Write one paragraph of 3 to 6 plain sentences: the main threads of work, the notes and "
    "decisions saved, the problems that came back. When you mention a day, write its link "
    "exactly as given, like {example}. No headings, no lists."
)
_MD_LINK = re.compile(r"!?\[([^\[\]]*)\]\(\s*<?([^()<>\s]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_WIKI_LINK = re.compile(r"!?\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
_URL = re.compile(
    r"<?\b(?:[a-z][a-z0-9+.-]*://|www\.|(?:mailto|javascript|data|file|vbscript):)\S*"
    r"|(?<![\w/])//\S+"  # scheme-relative
    r"|\b(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|app|ai|co|me|info|xyz|example)(?:/\S*)?\b",  # bare host
    re.I,
)
_TAG = re.compile(r"<!--|-->|<[^<>]*>")
_ISO_DAY = re.compile(r"(?<![\w/-])\d{4}-\d\d-\d\d(?![\w/-])")
_LEAD = re.compile(r"^(?:summary\s*:|[-#>*+|`~=_:\s]|\d+[.)](?=\s))+", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_MARK = "\ue000"  # stands for a kept link while the text is cleaned (dropped from any input)
_KEPT = re.compile(_MARK + r"(\d+)" + _MARK)


def day_links(members: Iterable[tuple[dt.date, Path]]) -> dict[str, str]:
    """The link target of each day of a period, as its rollup writes it -> the date."""
    return {f"{d:%Y/%m/%d}.md": d.isoformat() for d, _ in sorted(members)}


def clean_prose(
    text: str, *, limit: int, sentences: int, days: dict[str, str] | None = None
) -> str:
    """The reasoner's ``text`` as one line safe to put into a diary file: scrubbed of secrets;
    no markup that could start a block; no link but a markdown link to one of ``days``
    (:func:`day_links`; their bare dates become links too, other links their text, URLs and
    HTML are dropped; a paragraph that links no day is given the period's, within
    :data:`PROSE_SLACK`); at most ``sentences`` sentences and ``limit`` characters, cut at a
    word. "" when less than three words are left."""
    days = days or {}
    by_date = {date: target for target, date in days.items()}
    text = redact(one_line(text[: limit * 8].replace(_MARK, " ")))
    kept: list[str] = []

    def keep(date: str) -> str:
        kept.append(f"[{date}]({by_date[date]})")
        return f"{_MARK}{len(kept) - 1}{_MARK}"

    def wiki(match: re.Match[str]) -> str:
        return (match[2] or match[1]).strip()

    def link(match: re.Match[str]) -> str:
        target = match[2]
        return keep(days[target]) if target in days else match[1].strip()

    def date(match: re.Match[str]) -> str:
        return keep(match[0]) if match[0] in by_date else match[0]

    text = _MD_LINK.sub(link, _WIKI_LINK.sub(wiki, text))
    # no tag, closed or not: an unclosed "<script ..." still opens an HTML block in markdown
    text = _TAG.sub(" ", _URL.sub(" ", text)).replace("<", " ").replace(">", " ")
    text = _ISO_DAY.sub(date, text.replace("[", " ").replace("]", " "))
    text = " ".join(_LEAD.sub("", text).split())
    text = " ".join(_SENTENCE_END.split(text)[:sentences])

    def shown(words: list[str]) -> str:
        return _KEPT.sub(lambda m: kept[int(m[1])], " ".join(words))

    words = text.split(" ")
    if len(shown(words)) > limit:
        while words and len(shown(words)) > limit - 1:
            words.pop()
        words[-1:] = [words[-1].rstrip(",;:") + "…"] if words else []
    out = shown(words).strip()
    if len(re.findall(r"\w+", _KEPT.sub(" ", " ".join(words)))) < 3:
        return ""
    if days and not any(f"]({target})" in out for target in days):
        dates = sorted(by_date)
        span = [f"[{d}]({by_date[d]})" for d in dict.fromkeys((dates[0], dates[-1]))]
        out += f" ({' to '.join(span)})"
    return out


def valid_prose(line: str, days: dict[str, str], limit: int = PROSE_CHARS) -> bool:
    """Whether a rollup's summary paragraph is one that :func:`clean_prose` could write:
    one bounded line, no leading markup, no URL or HTML, no link but to one of ``days``."""
    if not line or line != one_line(line) or len(line) > limit + PROSE_SLACK:
        return False
    if _LEAD.match(line) or _URL.search(line) or _TAG.search(line) or _MARK in line:
        return False
    if "<" in line or ">" in line:
        return False
    rest = _MD_LINK.sub(lambda m: "" if days.get(m[2]) == m[1] else "[", line)
    return "[" not in rest and "]" not in rest


def _kept_summary(root: Path, target: Path, members: list[tuple[dt.date, Path]]) -> str | None:
    """The summary paragraph of a rollup on disk, when it is one :func:`valid_prose` accepts
    for these days (a paragraph edited into something else is written again)."""
    try:
        lines = read_in(root, target, 256 * 1024).decode("utf-8", "replace").split("\n")
    except OSError:
        return None
    try:
        start = lines.index(SUMMARY_HEADING)
    except ValueError:
        return None
    following = [line for line in lines[start + 1 :] if line.strip()]
    if not following or following[0].startswith("#"):
        return None
    return following[0] if valid_prose(following[0], day_links(members)) else None


def _periods(
    kind: str, days: Iterable[tuple[dt.date, Path]]
) -> list[tuple[Period, list[tuple[dt.date, Path]]]]:
    periods: dict[str, tuple[Period, list[tuple[dt.date, Path]]]] = {}
    for day, path in days:
        period = Period.of(kind, day)
        periods.setdefault(period.label, (period, []))[1].append((day, path))
    return list(periods.values())


def _rollup_prompt(
    project: str, period: Period, members: list[tuple[dt.date, Path]], root: Path
) -> tuple[str, str]:
    """What the model reads to write a rollup's paragraph: each day's sections in a few
    words (their summaries when they have them), bounded to :data:`ROLLUP_INPUT_CHARS`."""
    share = max(300, ROLLUP_INPUT_CHARS // max(1, len(members)))
    blocks = []
    for day, path in sorted(members):
        try:
            text = read_in(root, path).decode("utf-8", "replace")
        except OSError:
            continue
        lines = [f"Day {day.isoformat()}, link [{day.isoformat()}]({day:%Y/%m/%d}.md):"]
        for section in parse_day(day, text):
            items = section.items
            said = items.get("summary", [])[:1] or [
                f"{label}: {text}" for key, label in (
                    ("asked", "Asked"), ("created", "Created"), ("edited", "Edited"),
                    ("saved", "Saved"), ("error", "Error"), ("agent", "Agent"))
                for text in items.get(key, [])[:2]
            ]  # fmt: skip
            lines.append(
                cut(f"- {section.start} session {section.session}: {'; '.join(said)}", 400)
            )
        while len(lines) > 2 and sum(len(line) + 1 for line in lines) > share:
            lines.pop()  # a day's first sessions, as many as its share holds
        blocks.append("\n".join(lines))
    name = "week" if period.kind == "week" else "month"
    example = f"[{period.first.isoformat()}]({period.first:%Y/%m/%d}.md)"
    user = f"Project {project}, {name} {period.label} ({period.first} to {period.last}).\n\n"
    return _ROLLUP_SYSTEM.format(name=name, example=example), user + "\n\n".join(blocks)


def write_rollup_prose(
    cfg: Config,
    reasoner: Reasoner,
    *,
    project: str | None = None,
    kinds: tuple[str, ...] = ("week", "month"),
    completed_only: bool = False,
    today: dt.date | None = None,
) -> list[Written]:
    """Give each up-to-date rollup that has no summary paragraph one, written by the model
    (at most :data:`MAX_PROSE_CALLS` calls of ``reasoner`` in all). A rollup whose days
    changed is left to :func:`roll_up`. The model is asked outside every lock; the rollup is
    rendered again under the diary's lock only if its days are still the same. Why a rollup
    got no paragraph goes to ``reasoner.spent.skipped``; the first failure of the reasoner
    ends the run."""
    from brainmap.reasoner import ReasonerUnavailable

    today = today or dt.date.today()
    try:
        lib = diary_library(cfg)
    except UserError:
        return []
    written: list[Written] = []
    skipped = reasoner.spent.skipped
    left = 0
    slugs = [slugify(project)] if project else projects(cfg)
    tried = set(_tried(cfg))
    try:
        # one writer of paragraphs at a time: another run is writing these very ones
        with file_lock(cfg.home / "locks" / "diary-prose.lock", timeout_s=0):
            for slug in slugs:
                base = lib.path / safe_folder(cfg.diary.folder) / slug
                days = list(days_of(base))
                for kind in kinds:
                    for period, members in _periods(kind, days):
                        if completed_only and period.last >= today:
                            continue
                        target = base / f"{period.label}.md"
                        digest = days_digest(members)
                        if _made_from(lib.path, target) != digest:
                            continue  # missing or out of date: roll_up renders it first
                        if _kept_summary(lib.path, target, members) is not None:
                            continue
                        if reasoner.spent.calls >= MAX_PROSE_CALLS:
                            left += 1
                            continue
                        key = _prose_key(f"rollup\0{slug}\0{period.label}\0{digest}")
                        if key in tried:
                            continue  # asked before for these very days, nothing usable came
                        system, user = _rollup_prompt(slug, period, members, lib.path)
                        answer = reasoner.text(system, user, max_tokens=PROSE_TOKENS)
                        prose = clean_prose(answer, limit=PROSE_CHARS, sentences=PROSE_SENTENCES,
                                            days=day_links(members))  # fmt: skip
                        if not prose:
                            _mark_tried(cfg, key)
                            skipped.append(
                                f"diary: the paragraph for {slug} {period.label} was empty"
                            )
                            continue
                        with library_lock(cfg.home, lib.name, timeout_s=PROSE_LOCK_S):
                            now = [m for m in days_of(base) if Period.of(kind, m[0]) == period]
                            if days_digest(now) != digest or _made_from(lib.path, target) != digest:
                                continue  # a day changed meanwhile: the next run writes it
                            text = render_rollup(slug, period, now, digest, root=lib.path,
                                                 summary=prose)  # fmt: skip
                            if atomic_write(lib.path, target, text.encode("utf-8")):
                                rel = target.relative_to(lib.path).as_posix()
                                written.append(Written(lib.name, rel, slug))
    except LockTimeout:
        skipped.append("diary: another process is writing the rollups' paragraphs")
    except ReasonerUnavailable as exc:
        skipped.append(f"diary: {exc.message}")
    if left:
        skipped.append(f"diary: {left} rollup(s) left without a paragraph (at most "
                       f"{MAX_PROSE_CALLS} calls a run; run `brainmap diary rollup` again)")  # fmt: skip
    return written


def _day_sections(lines: list[bytes]) -> list[tuple[int, int]]:
    """``(heading, end)`` line indexes of each section of a day file's lines."""
    starts = [i for i, line in enumerate(lines) if _HEADING.match(line.decode("utf-8", "replace"))]
    return list(zip(starts, [*starts[1:], len(lines)], strict=True))


MAX_TRIED = 500  # prose asks remembered as having given nothing usable


def _tried_path(cfg: Config) -> Path:
    return cfg.home / "state" / "diary-prose-tried.json"


def _tried(cfg: Config) -> list[str]:
    """What the model was asked for and answered with nothing usable: not asked again (a
    weak model would otherwise spend calls on the same section after every turn)."""
    try:
        keys = json.loads(_tried_path(cfg).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def _mark_tried(cfg: Config, key: str) -> None:
    kept = [k for k in _tried(cfg) if k != key][-(MAX_TRIED - 1) :]
    keys = [*kept, key]
    path = _tried_path(cfg)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cfg.home, path, json.dumps(keys).encode())
    except OSError:
        pass  # the worst case is one more call next time


def _prose_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:24]


def _unsummarised(data: bytes, short: str | None) -> list[tuple[bytes, int, str]]:
    """The sections of a day (of one session, by its short id) that have no summary:
    ``(heading, how many identical headings come before it, the text the model reads)``."""
    lines = data.split(b"\n")
    out = []
    seen: Counter[bytes] = Counter()
    for first, end in _day_sections(lines):
        heading = lines[first]
        nth = seen[heading]
        seen[heading] += 1
        match = _HEADING.match(heading.decode("utf-8", "replace"))
        if match is None or (short is not None and match["id"] != short):
            continue
        body = [line for line in lines[first + 1 : end] if line.strip()]
        if any(line.startswith(SUMMARY_ITEM) for line in body):
            continue
        text = f"Session {match['id']}, {match['start']} to {match['end']}:\n" + "\n".join(
            line.decode("utf-8", "replace") for line in body
        )
        out.append((heading, nth, text[:SECTION_INPUT_CHARS]))
    return out


def _insert_summary(cfg: Config, lib: LibraryConfig, rel: str, heading: bytes, nth: int,
                    summary: str) -> bool:  # fmt: skip
    """Put ``- Summary: ...`` at the end of the ``nth`` section headed ``heading`` of a day,
    under the diary's lock, unless it has one by now. Every other byte stays as it was (the
    section is usually the day's last, so this is an append)."""
    with library_lock(cfg.home, lib.name, timeout_s=PROSE_LOCK_S):
        data = read_beneath(lib.path, rel, MAX_DAY_BYTES + 1)
        lines = data.split(b"\n")
        same = [s for s in _day_sections(lines) if lines[s[0]] == heading]
        if nth >= len(same):
            return False
        first, end = same[nth]
        if any(line.startswith(SUMMARY_ITEM) for line in lines[first + 1 : end]):
            return False  # written meanwhile (another run, another machine's merge)
        last = max(i for i in range(first, end) if lines[i].strip())
        item = SUMMARY_ITEM + summary.encode("utf-8")
        out = b"\n".join([*lines[: last + 1], item, *lines[last + 1 :]])
        if len(out) > MAX_DAY_BYTES:
            return False
        return atomic_write(lib.path, lib.path / rel, out)


def summarize_section(reasoner: Reasoner, text: str) -> str:
    """The reasoner's 2-4 sentence summary of one diary section, cleaned (:func:`clean_prose`);
    empty when nothing usable is left. The bake-off's summary task asks through here."""
    answer = reasoner.text(
        _SESSION_SYSTEM, text[:SECTION_INPUT_CHARS], max_tokens=SESSION_SUMMARY_TOKENS
    )
    return clean_prose(answer, limit=SESSION_SUMMARY_CHARS, sentences=SESSION_SUMMARY_SENTENCES)


def summarize_sessions(
    cfg: Config, reasoner: Reasoner, project: str, days: Iterable[dt.date],
    session: str | None = None,
) -> list[Written]:  # fmt: skip
    """Give each section of the project's ``days`` (of one ``session``, or all) that has no
    summary a ``- Summary:`` line of 2 to 4 sentences by the model (newest first, at most
    :data:`MAX_PROSE_CALLS` calls of ``reasoner`` in all). A section that has one is never
    given another. Runs for one session take turns (the later one finds what the earlier
    wrote); the model is asked outside the diary's lock. Why a section got none goes to
    ``reasoner.spent.skipped``; the first failure of the reasoner ends the run."""
    from brainmap.reasoner import ReasonerUnavailable

    lib = diary_library(cfg)
    short = short_session(session) if session is not None else None
    key = hashlib.sha256(f"{slugify(project)}\0{short or ''}".encode()).hexdigest()[:16]
    written: list[Written] = []
    skipped = reasoner.spent.skipped
    left = 0
    tried = set(_tried(cfg))
    try:
        with file_lock(cfg.home / "locks" / f"diary-summary-{key}.lock", SUMMARY_LOCK_S):
            for day in sorted(set(days), reverse=True):
                rel = day_path(cfg, project, day)
                try:
                    data = read_beneath(lib.path, rel, MAX_DAY_BYTES + 1)
                except OSError:
                    continue
                if len(data) > MAX_DAY_BYTES:
                    continue
                for heading, nth, text in reversed(_unsummarised(data, short)):
                    key = _prose_key(f"section\0{text}")
                    if key in tried:
                        continue  # asked before for this very text, nothing usable came
                    if reasoner.spent.calls >= MAX_PROSE_CALLS:
                        left += 1
                        continue
                    summary = summarize_section(reasoner, text)
                    if not summary:
                        _mark_tried(cfg, key)
                        skipped.append(
                            f"diary: the summary of {rel} {heading.decode(errors='replace')[3:]} was empty"
                        )
                        continue
                    if _insert_summary(cfg, lib, rel, heading, nth, summary) and not any(
                        w.path == rel for w in written
                    ):
                        written.append(Written(lib.name, rel, slugify(project)))
    except LockTimeout:
        skipped.append("diary: another process is still writing this session's summaries")
    except ReasonerUnavailable as exc:
        skipped.append(f"diary: {exc.message}")
    if left:
        skipped.append(f"diary: {left} section(s) left without a summary (at most "
                       f"{MAX_PROSE_CALLS} calls a run)")  # fmt: skip
    return written
