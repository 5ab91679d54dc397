"""The evergreen validator: volatile content that rots in agent instruction files.

CLAUDE.md, AGENTS.md, GEMINI.md and ``.cursor/rules`` are read by an agent at the start of
every session, so whatever they say must stay true while the code changes: a rule ("run
``pytest -q`` before committing"), not a figure ("598 tests pass"). This module finds the
figures: line references, counts, test counts, percentages, dated claims, version numbers in
prose, absolute home paths, long pasted code or logs, and files over a size budget.

Pure text in, findings out: no store, no network. A bound is a rule, not a figure, so
"keep modules under 700 lines", "coverage above 90%" and "Python 3.11+" are never flagged;
neither is anything in fenced code (except home paths and logs) or in a command written as
inline code. A line ending in ``<!-- brainmap: allow -->`` (or ``<!-- brainmap: allow
rule-id ... -->``) is left alone; on a fence line it covers the whole block.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from brainmap.config import LINT_RULES, LintSettings

SAVE_IT = "save it in the brain (`brainmap save`) and link it"

# What each rule is about, and what to do instead (the README's rules table says the same).
RULES: dict[str, tuple[str, str]] = {
    "line-ref": (
        "line number reference",
        "name the function, class or heading instead: line numbers move with every edit",
    ),
    "count": ("line or file count", "state the rule, not the figure"),
    "test-count": (
        "test count",
        "say how to run the tests (the command), not how many there are or passed",
    ),
    "percent": (
        "percentage or coverage figure",
        "state the rule (a threshold) or the command that measures it, not the figure",
    ),
    "dated": ("dated claim", f"state what stays true without a date, or {SAVE_IT}"),
    "version": (
        "version number in prose",
        "state a minimum as a rule (`Python 3.11+`) or point to the file that pins it",
    ),
    "home-path": (
        "absolute home path",
        "use a path relative to the project root, or ~",
    ),
    "long-code": ("long pasted code", f"{SAVE_IT} (or keep it in a file of the repository)"),
    "log": ("pasted log or traceback", f"keep the lesson, not the log: {SAVE_IT}"),
    "size": ("file over the size budget", f"keep the file short: move the detail out, {SAVE_IT}"),
}
assert tuple(RULES) == LINT_RULES  # config validates [lint] rules against the same ids


@dataclass(frozen=True)
class Finding:
    """One volatile thing: where it is, which rule, what matched, and what to do instead."""

    file: str
    line: int
    rule: str
    text: str
    message: str
    suggestion: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- patterns ---------------------------------------------------------------------------------

_EXT = (
    "py|pyi|ipynb|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|kts|scala|c|h|cc|cpp|cxx|hpp|cs|swift|rb|"
    "php|lua|pl|r|sql|sh|bash|zsh|fish|ps1|tf|ya?ml|toml|ini|cfg|conf|json|jsonl|xml|html?|css|"
    "scss|vue|svelte|ex|exs|erl|hs|clj|el|vim|md|mdx|rst|txt|lock|gradle|dart|zig|nim|jl|m|mm"
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE = (
    rf"(?:\d{{4}}(?:[-/.]\d{{1,2}}(?:[-/.]\d{{1,2}})?)?\b|{_MONTH}\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?"
    rf"\d{{4}}\b|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\s+\d{{4}}\b|q[1-4]\s+\d{{4}}\b)"
)
# a bound before a figure makes it a rule: "under 700 lines", "at least 90%", "the first 10"
_BOUND = re.compile(
    r"(?:\b(?:under|over|below|above|within|beyond|exceed(?:s|ing)?|max(?:imum)?|min(?:imum)?|"
    r"at\s+(?:most|least)|(?:less|more|fewer|greater|lower|higher)\s+than|up\s+to|no\s+more\s+than|"
    r"first|last|top|every|each|per|threshold|target|limit|budget)|[<>≤≥]=?|=)\s*(?:of\s+)?"
    r"(?:(?:~|about|around|roughly|approximately|some)\s*)?$",
    re.IGNORECASE,
)
_NUMBER = r"(?<![\w.,])\d{1,3}(?:[,_]\d{3})+(?![\d.])|(?<![\w.,])\d+(?![\w.,]*\d)"


@functools.cache
def _patterns() -> dict[str, list[re.Pattern[str]]]:
    """Compiled on first use: importing the module (config does) costs nothing."""
    i = re.IGNORECASE
    return {
        "line-ref": [
            re.compile(rf"(?<![\w/.-])[\w./\\-]*\w\.(?:{_EXT}):\d+(?:[-:]\d+)?\b"),
            re.compile(r"#L\d+(?:-L?\d+)?\b"),
            re.compile(r"\blines?\s+\d+(?:\s*(?:-|–|to|and|through)\s*\d+)?\b", i),
        ],
        "count": [
            re.compile(
                rf"(?:{_NUMBER})\s+(?:lines(?:\s+of\s+code)?|loc|sloc|files|modules|packages|"
                r"classes|functions|methods|endpoints|tables|commits|dependencies|components|"
                r"services|crates)\b",
                i,
            )
        ],
        "test-count": [
            re.compile(rf"(?:{_NUMBER})\s+(?:tests?|test\s+cases|specs)\b", i),
            re.compile(rf"(?:{_NUMBER})\s+(?:passed|passing|failed|failing|skipped|xfailed)\b", i),
        ],
        "percent": [re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|percent\b)", i)],
        "dated": [
            re.compile(rf"\bas\s+(?:of|at)\s+(?:{_DATE}|today|now|writing|this\s+\w+)", i),
            re.compile(
                rf"\b(?:currently|now|today|at\s+(?:the\s+moment|present)|right\s+now|"
                rf"presently)\s*[(\[,]\s*(?:{_DATE})[)\]]?",
                i,
            ),
            re.compile(
                rf"\b(?:last\s+)?(?:updated|checked|verified|reviewed|measured)\s*(?:on|in)?:?\s+"
                rf"(?:{_DATE})",
                i,
            ),
        ],
        "version": [
            re.compile(r"(?<![\w.])v\d+(?:\.\d+)+(?:[-+][\w.]+)?\b"),
            re.compile(r"\bversion\s+v?\d+(?:\.\d+)+\b", i),
            re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?!\.?\d)(?:[-+][\w.]+)?\b"),
        ],
        "home-path": [
            re.compile(r"(?<![\w~])/(?:home|Users)/(?!\$|<|\{)[\w.-]+(?:/[^\s`'\")\]]*)?"),
            re.compile(r"\b[A-Za-z]:[\\/]+Users[\\/]+[^\s`'\"\\/]+[^\s`'\")\]]*", i),
        ],
    }


# a version that is a minimum ("3.11+", ">= 1.2.0", "1.2.0 or later") is a rule
_MINIMUM_AFTER = re.compile(
    r"^(?:\+|\.x\b|\s*(?:or|and)\s+(?:later|newer|higher|above|up)\b)", re.I
)
_MINIMUM_BEFORE = re.compile(
    r"(?:>=?|≥|\^|~=?|\bat\s+least|\bminimum|\bmin\.?|\brequires?|\bsince)\s*(?:\w+\s+)?$", re.I
)
_ALLOW = re.compile(r"<!--\s*brainmap:\s*allow\b([^>]*?)-->\s*$", re.IGNORECASE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_INLINE = re.compile(r"(`+)(.+?)\1")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
# a command or a pinned spec written as inline code: its versions are what it runs
_COMMAND = re.compile(r"\s|==|>=|<=|~=|@|\^")

_LOG_LINE = re.compile(
    r"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\[?\d{2}:\d{2}:\d{2}[.,\]\s]|"
    r"\[?(?:ERROR|WARN|WARNING|INFO|DEBUG|TRACE|FATAL|CRITICAL|NOTICE)\b[\]:]|"
    r"File \".*\", line \d+|at [\w.$<>]+\(.*:\d+(?::\d+)?\)|"
    r"(?:[A-Z]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning): |E\s{2,}\S)"
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")


def _allowed(line: str) -> tuple[str, set[str] | None]:
    """The line without its allow comment, and the rules it allows (None: none; empty: all)."""
    match = _ALLOW.search(line)
    if match is None:
        return line, None
    rules = {r for r in re.split(r"[\s,]+", match.group(1).strip()) if r}
    return line[: match.start()], rules


def _mask(text: str, pattern: re.Pattern[str], keep: Any = None) -> str:
    """``text`` with every match of ``pattern`` blanked (same length: columns stay)."""

    def blank(m: re.Match[str]) -> str:
        return m.group(0) if keep is not None and keep(m) else " " * len(m.group(0))

    return pattern.sub(blank, text)


def _is_command(span: re.Match[str]) -> bool:
    return bool(_COMMAND.search(span.group(2).strip()))


def _bounded(text: str, start: int) -> bool:
    return _BOUND.search(text[max(0, start - 40) : start]) is not None


@dataclass
class _Line:
    number: int
    text: str  # without the allow comment
    allow: set[str] | None
    fenced: bool  # inside a fenced block (a fence line itself is not)


def _closes(match: re.Match[str], char: str, length: int) -> bool:
    """A fence line closes the open block: the same character, as long or longer, no info."""
    fence = match.group(1)
    return fence[0] == char and len(fence) >= length and not match.group(2).strip()


def _lines(text: str) -> Iterator[tuple[_Line, tuple[int, int, set[str] | None] | None]]:
    """Every line, with the block it opens: (first content line, last content line, allow)."""
    raw = text.splitlines()
    fence: tuple[str, int, int, set[str] | None] | None = None  # (char, length, start, allow)
    blocks: dict[int, tuple[int, int, set[str] | None]] = {}
    out: list[_Line] = []
    for number, line in enumerate(raw, start=1):
        body, allow = _allowed(line)
        match = _FENCE.match(body)
        if fence is None and match:
            fence = (match.group(1)[0], len(match.group(1)), number, allow)
            out.append(_Line(number, body, allow, False))
            continue
        if fence is not None and match and _closes(match, fence[0], fence[1]):
            blocks[fence[2]] = (fence[2] + 1, number - 1, fence[3])
            fence = None
            out.append(_Line(number, body, allow, False))
            continue
        out.append(_Line(number, body, allow, fence is not None))
    if fence is not None:  # never closed: the block runs to the end
        blocks[fence[2]] = (fence[2] + 1, len(raw), fence[3])
    for item in out:
        yield item, blocks.get(item.number)


def lint_text(
    text: str, settings: LintSettings | None = None, file: str = "<text>"
) -> list[Finding]:
    """The findings of one file's text, by line (see the module docstring)."""
    settings = settings or LintSettings()
    enabled = set(settings.rules)
    found: list[Finding] = []
    lines = list(_lines(text))
    by_number = {line.number: line for line, _ in lines}
    block_allow: dict[int, set[str] | None] = {}  # line -> the allow of its block's fence
    for _, block in lines:
        if block is not None:
            for n in range(block[0], block[1] + 1):
                block_allow[n] = block[2]

    def add(number: int, rule: str, matched: str, message: str | None = None) -> None:
        if rule not in enabled:
            return
        for allow in (by_number[number].allow if number in by_number else None,
                      block_allow.get(number)):  # fmt: skip
            if allow is not None and (not allow or rule in allow):
                return
        what, suggestion = RULES[rule]
        found.append(Finding(file, number, rule, matched.strip(), message or what, suggestion))

    logged = _logs(lines, settings.max_log_lines, add)
    for line, block in lines:
        if block is not None and block[1] - block[0] + 1 > settings.max_code_lines:
            size = block[1] - block[0] + 1
            add(line.number, "long-code", line.text.strip()[:80] or "```",
                f"a fenced block of {size} lines, more than {settings.max_code_lines}")  # fmt: skip
        if line.number in logged:
            continue
        for pattern in _patterns()["home-path"]:
            for m in pattern.finditer(line.text):
                add(line.number, "home-path", m.group(0).rstrip(".,;:"))
        if line.fenced:
            continue
        _prose(line, add)
    _size(text, settings, add)
    found.sort(key=lambda f: (f.line, LINT_RULES.index(f.rule)))
    return found


def _prose(line: _Line, add: Any) -> None:
    """The rules of prose: everywhere outside fenced code."""
    text = line.text
    no_code = _mask(_mask(text, _INLINE), _URL)
    no_commands = _mask(_mask(text, _INLINE, keep=lambda m: not _is_command(m)), _URL)
    for pattern in _patterns()["line-ref"]:
        for m in pattern.finditer(text):
            add(line.number, "line-ref", m.group(0))
    for rule in ("count", "test-count", "percent"):
        for pattern in _patterns()[rule]:
            for m in pattern.finditer(no_code):
                if _bounded(no_code, m.start()):
                    continue
                if rule == "percent" and re.match(r"100(?:\.0+)?\s?%", m.group(0)):
                    continue  # "100% of public functions": an absolute, a rule
                if rule != "percent" and _small(m, rule):
                    continue  # "write 2 tests per bug", "split it into 3 files": instructions
                add(line.number, rule, m.group(0))
    for pattern in _patterns()["dated"]:
        for m in pattern.finditer(no_code):
            add(line.number, "dated", m.group(0))
    seen: set[tuple[int, int]] = set()
    for pattern in _patterns()["version"]:
        for m in pattern.finditer(no_commands):
            if any(s <= m.start() < e for s, e in seen):
                continue
            if _MINIMUM_AFTER.match(no_commands[m.end() :]) or _MINIMUM_BEFORE.search(
                no_commands[: m.start()]
            ):
                continue
            seen.add(m.span())
            add(line.number, "version", m.group(0).strip("`"))


def _small(m: re.Match[str], rule: str) -> bool:
    """A count under 10 is an instruction's number more often than a figure; a test result
    ("3 failed") is a figure whatever its size."""
    number = re.match(r"[\d,_]+", m.group(0))
    if rule == "test-count" and re.search(r"(?:pass|fail|skip)", m.group(0), re.IGNORECASE):
        return False
    return number is not None and int(re.sub(r"\D", "", number.group(0))) < 10


def _logs(lines: list[tuple[_Line, Any]], run_min: int, add: Any) -> set[int]:
    """Flag pasted logs: a traceback, or ``run_min`` log-looking lines in a row. Returns the
    lines they cover (no other rule is reported inside a log)."""
    covered: set[int] = set()
    i = 0
    while i < len(lines):
        line = lines[i][0]
        if _TRACEBACK.match(line.text):
            j = i + 1
            while j < len(lines) and (
                lines[j][0].text.startswith((" ", "\t")) or _LOG_LINE.match(lines[j][0].text)
            ):
                j += 1
            if j < len(lines) and re.match(r"^\w[\w.]*(?::|$)", lines[j][0].text):
                j += 1  # the exception line that ends a traceback
            add(line.number, "log", line.text.strip(), f"a traceback of {j - i} lines")
            covered.update(lines[k][0].number for k in range(i, j))
            i = j
            continue
        if _LOG_LINE.match(line.text):
            j = i
            while j < len(lines) and _LOG_LINE.match(lines[j][0].text):
                j += 1
            if j - i >= run_min:
                add(line.number, "log", line.text.strip()[:120], f"{j - i} log lines")
                covered.update(lines[k][0].number for k in range(i, j))
            i = max(j, i + 1)
            continue
        i += 1
    return covered


def _size(text: str, settings: LintSettings, add: Any) -> None:
    lines = len(text.splitlines())
    size = len(text.encode("utf-8"))
    if lines > settings.max_lines or size > settings.max_bytes:
        budget = f"{settings.max_lines:,} lines, {settings.max_bytes:,} bytes"
        add(1, "size", f"{lines:,} lines, {size:,} bytes", f"over the size budget ({budget})")


def default_files(root: Path, globs: Iterable[str]) -> list[Path]:
    """The instruction files under ``root`` that ``globs`` name (``dir/**``: every file under
    ``dir``), in a stable order; hidden folders are searched only when a glob names them."""
    out: dict[Path, None] = {}
    for glob in globs:
        pattern = f"{glob[:-3]}/**/*" if glob.endswith("/**") else glob
        for path in sorted(root.glob(pattern)):
            if path.is_file():
                out[path] = None
    return list(out)


def expand(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a folder stands for every file under it."""
    out: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            out.update((p, None) for p in sorted(path.rglob("*")) if p.is_file())
        else:
            out[path] = None
    return list(out)


def lint_file(
    path: Path, settings: LintSettings | None = None, name: str | None = None
) -> list[Finding]:
    """The findings of one file (read as UTF-8, undecodable bytes replaced)."""
    text = path.read_bytes().decode("utf-8", "replace")
    return lint_text(text, settings, name or str(path))
