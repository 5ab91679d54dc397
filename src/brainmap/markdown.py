"""Markdown entries: decoding, YAML frontmatter, heading-aware chunks with line ranges, wiki
links and typed relations; ``Brain:`` breadcrumbs in code files.

A line scanner rather than a full CommonMark parser: it only needs headings (ATX and setext),
fenced code blocks and blank lines, and it is about 50x faster than markdown-it-py on the tldr
pages (0.01 ms against 0.5 ms a page), which matters at 40k files.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from brainmap.analysis import estimate_tokens, one_line

DEFAULT_CHUNK_TOKENS = 300
DEFAULT_TURN_TOKENS = 450  # units of a text written one line per turn (a dialogue, a diary)
DEFAULT_TYPE = "note"

# the opening of an ATX heading; the rest of the line is read by _atx_title (a regex for the
# closing #s took time quadratic in a run of spaces: minutes for one 40 kB line)
_ATX_OPEN_RE = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
# a heading is a name: a longer line keeps its text in the chunk, and is cut in the title and
# heading path that every hit and chunk of its section repeat
MAX_HEADING_CHARS = 300
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_OR_INDENT, _ATX_OR_INDENT, _SETEXT_OR_INDENT = " `~", " #", " =-"  # first characters
_NOT_PARAGRAPH_RE = re.compile(r"^(?: {4}|\t| {0,3}(?:[-*+]\s|\d{1,9}[.)]\s|>|\||#|`{3}|~{3}))")


# a target is a name, not a paragraph: longer ones are not links
_WIKI_RE = re.compile(r"\[\[([^\[\]\n|#]{1,300})(?:#[^\[\]\n|]*)?(?:\|[^\[\]\n]*)?\]\]")
# "- depends_on [[Postgres]]": a list item whose first word is the predicate of its links
_RELATION_RE = re.compile(r"^\s{0,3}[-*+]\s+([A-Za-z][\w-]{0,63}):?\s+\[\[")
_CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINKS_TO = "links_to"
# "Brain: slug" after any comment marker: # // -- /* * ; % <!-- REM
_BREADCRUMB_RE = re.compile(
    r"(?:#|//|--|/\*|^\s*\*|;|%|<!--|\bREM\b)[ \t]*Brain:[ \t]*"
    r"([A-Za-z0-9][\w./:@+-]{0,199})(?![\w./:@+-])"  # a slug, not a 10 kB token
)


class DecodeError(ValueError):
    """The bytes are not text we can index (binary data)."""


@dataclass(frozen=True)
class Chunk:
    """A heading-aware slice of an entry; lines are 1-based and inclusive. A line too long
    for one unit is cut into several chunks, each with that line as start and end."""

    ord: int
    heading: str
    line_start: int
    line_end: int
    text: str


@dataclass(frozen=True)
class Link:
    """A typed link from an entry to a named target (``links_to`` for plain wiki links)."""

    predicate: str
    target: str
    line: int  # 1-based line in the file


@dataclass
class Entry:
    """A parsed markdown entry: normalised metadata plus its chunks."""

    title: str
    type: str = DEFAULT_TYPE
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    project: str | None = None
    created: str | None = None
    last_verified: str | None = None
    observed_at: str | None = None  # when the content was seen at its source (ingested leaves)
    retired: bool = False  # `status: retired`
    supersedes: list[str] = field(default_factory=list)  # slugs (or library:slug) it replaces
    superseded_by: list[str] = field(default_factory=list)  # and what replaced it
    meta: dict[str, Any] = field(default_factory=dict)
    chunks: list[Chunk] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    body_start: int = 0  # index of the first line after the frontmatter
    fences: list[tuple[int, int]] = field(default_factory=list)  # code blocks: [start, end)


_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13))
# in a label every control character is dropped, C1 too (U+0085 NEL, U+009B CSI, ...)
_LABEL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_label(text: str) -> str:
    """A one-line label (title, tag, project): control characters dropped, each run of
    whitespace one space. Labels are shown in lists and offered to other notes as tags."""
    return " ".join(_LABEL_CONTROL.sub("", text).split())


def decode(data: bytes) -> tuple[str, str | None]:
    """Decode file bytes; return ``(text, warning)``.

    UTF-8 (BOM allowed) and UTF-16 with a BOM are read as they are; damaged UTF-8 has its bad
    bytes replaced; other 8-bit text is read as Windows-1252, with a warning. Binary data
    (NUL or many control bytes) raises :class:`DecodeError`.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), None
        except UnicodeDecodeError as exc:
            raise DecodeError("invalid UTF-16") from exc
    head = data[:8192]
    if b"\x00" in head or len(head.translate(None, _CONTROL)) < len(head) * 0.9:
        raise DecodeError("binary file")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    # valid multi-byte sequences mean damaged UTF-8; none at all means a legacy 8-bit file
    if any(ch > "\x7f" and ch != "\ufffd" for ch in text):
        return text, f"{text.count(chr(0xFFFD))} invalid UTF-8 byte sequence(s) replaced"
    return data.decode("cp1252", errors="replace"), "not UTF-8; read as Windows-1252"


def parse(
    text: str,
    *,
    fallback_title: str,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    turn_tokens: int = DEFAULT_TURN_TOKENS,
) -> Entry:
    """Parse an entry: frontmatter, title, heading-aware chunks. Never raises on content."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    meta, body_start, warnings = _frontmatter(lines)
    sections = _sections(lines, body_start)
    entry = Entry(title=fallback_title, meta=meta, warnings=warnings, body_start=body_start)
    entry.fences = [f for section in sections for f in section.fences]
    _apply_meta(entry, meta)
    if "title" not in meta or not entry.title:
        entry.title = _first_heading(sections) or fallback_title
    entry.chunks = _chunks(lines, sections, max(chunk_tokens, 16), max(turn_tokens, 16))
    entry.links = _frontmatter_relations(meta, lines, body_start) + _body_links(
        lines, sections, body_start
    )
    return entry


# --- links ---------------------------------------------------------------------------------


def predicate_name(raw: str) -> str:
    """Predicates are snake_case words: ``Depends-On`` -> ``depends_on``."""
    return re.sub(r"[^0-9a-z]+", "_", raw.lower()).strip("_")[:64]


def _body_links(lines: list[str], sections: list[_Section], start: int) -> list[Link]:
    fenced = {i for s in sections for a, b in s.fences for i in range(a, b)}
    links: list[Link] = []
    for i in range(start, len(lines)):
        line = lines[i]
        if "[[" not in line or i in fenced:
            continue
        line = _CODE_SPAN_RE.sub("", line)
        relation = _RELATION_RE.match(line)
        predicate = predicate_name(relation.group(1)) if relation else LINKS_TO
        for match in _WIKI_RE.finditer(line):
            target = " ".join(match.group(1).split())
            if target:
                links.append(Link(predicate or LINKS_TO, target, i + 1))
    return links


def _frontmatter_relations(meta: dict[str, Any], lines: list[str], body_start: int) -> list[Link]:
    """``relations: {depends_on: [Postgres, "[[Redis]]"]}`` in the frontmatter."""
    relations = meta.get("relations")
    if not isinstance(relations, dict):
        return []
    links: list[Link] = []
    for raw_predicate, targets in relations.items():
        predicate = predicate_name(str(raw_predicate))
        if not predicate:
            continue
        line = next(
            (
                i + 1
                for i in range(1, body_start)
                if lines[i].lstrip().startswith(f"{raw_predicate}:")
            ),
            1,
        )
        # YAML reads `depends_on: [[Redis]]` as a list in a list: flatten one level
        items = targets if isinstance(targets, list) else [targets]
        flat = [t for item in items for t in (item if isinstance(item, list) else [item])]
        for target in flat:
            if isinstance(target, str | int | float):
                name = " ".join(str(target).strip().removeprefix("[[").removesuffix("]]").split())
                if name:
                    links.append(Link(predicate, name, line))
    return links


def breadcrumbs(text: str) -> list[tuple[str, int]]:
    """``(slug, line)`` of each ``Brain: slug`` comment in a code file."""
    found: list[tuple[str, int]] = []
    for number, line in enumerate(text.split("\n"), 1):
        if "Brain:" not in line:
            continue
        for match in _BREADCRUMB_RE.finditer(line):
            slug = match.group(1).rstrip(".,:;*/-")
            if slug:
                found.append((slug, number))
    return found


# --- frontmatter ---------------------------------------------------------------------------


def _frontmatter(lines: list[str]) -> tuple[dict[str, Any], int, list[str]]:
    if not lines or lines[0].rstrip() != "---":
        return {}, 0, []
    import yaml  # only files with frontmatter pay for it

    # the C loader is ten times faster; PyYAML built without libyaml lacks it
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for i in range(1, min(len(lines), 2000)):
        if lines[i].rstrip() in ("---", "..."):
            block = "\n".join(lines[1:i])
            # a block that is not a YAML mapping is indexed as text, with a warning
            try:
                data = yaml.load(block, Loader=loader) if block.strip() else {}
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                # file line of the problem, within the frontmatter (line 1 is the opening ---)
                where = f" at line {min(mark.line + 2, i)}" if mark is not None else ""
                return {}, 0, [f"broken frontmatter{where}: {_first_line(exc)}; read as text"]
            if data is None:
                data = {}
            if not isinstance(data, dict):
                return {}, 0, ["frontmatter is not a mapping; read as text"]
            try:
                return _jsonable(data, _Budget()), i + 1, []
            except _TooComplex:
                return {}, i + 1, ["frontmatter too large or self-referencing; ignored"]
    return {}, 0, ["frontmatter opened with --- but never closed; read as text"]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class _TooComplex(ValueError):
    pass


class _Budget:
    """Bounds the copy of YAML data: aliases can make it self-referencing or exponential."""

    MAX_NODES = 10_000
    MAX_DEPTH = 32

    def __init__(self) -> None:
        self.nodes = 0

    def spend(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > self.MAX_NODES or depth > self.MAX_DEPTH:
            raise _TooComplex


def _jsonable(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """Convert YAML values (dates, sets, odd keys) into plain JSON-compatible data."""
    budget.spend(depth)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v, budget, depth + 1) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, float) and math.isnan(value):  # NaN is not JSON
            return None
        return value
    return str(value)


def _apply_meta(entry: Entry, meta: dict[str, Any]) -> None:
    title = meta.get("title")
    if isinstance(title, str | int | float) and str(title).strip():
        entry.title = str(title).strip()
        if len(entry.title) > MAX_HEADING_CHARS:  # every hit repeats it, as it does headings
            entry.title = cut(entry.title, MAX_HEADING_CHARS)
    kind = meta.get("type")
    if isinstance(kind, str) and kind.strip():
        entry.type = kind.strip().lower()
    entry.tags = _string_list(meta.get("tags"), lower=True)
    entry.aliases = _string_list(meta.get("aliases"))
    project = meta.get("project")
    if isinstance(project, str | int) and clean_label(str(project)):
        entry.project = clean_label(str(project))
    status = meta.get("status")
    entry.retired = isinstance(status, str) and status.strip().lower() == "retired"
    # a list, or one name (a comma inside a name is not a separator: slugs have none)
    for key in ("supersedes", "superseded_by"):
        raw = meta.get(key)
        items = raw if isinstance(raw, list) else [raw] if raw is not None else []
        names = [clean_label(str(v)) for v in items if isinstance(v, str | int | float)]
        setattr(entry, key, list(dict.fromkeys(n for n in names if n)))
    for key in ("created", "last_verified", "observed_at"):
        raw = meta.get(key)
        if raw is None:
            continue
        value = _iso_date(raw)
        if value is None:
            entry.warnings.append(f"frontmatter {key}: {raw!r} is not a date; ignored")
        setattr(entry, key, value)


def _string_list(value: Any, *, lower: bool = False) -> list[str]:
    if isinstance(value, str):
        items = re.split(r"[,\s]+", value)
    elif isinstance(value, list):
        items = [str(v) for v in value if isinstance(v, str | int | float)]
    else:
        return []
    out: list[str] = []
    for raw in items:
        item = clean_label(raw).lstrip("#").strip()
        if lower:
            item = item.lower()
        if item and item not in out:
            out.append(item)
    return out


def _iso_date(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) == 10:
        try:
            return dt.date.fromisoformat(text).isoformat()
        except ValueError:
            return None
    for candidate in (text, text.replace("Z", "+00:00")):
        try:
            return dt.datetime.fromisoformat(candidate).isoformat()
        except ValueError:
            pass
    try:
        return dt.date.fromisoformat(text[:10]).isoformat()
    except ValueError:
        return None


# --- sections and chunks -------------------------------------------------------------------


@dataclass
class _Section:
    level: int  # 0 for the preamble before the first heading
    title: str
    path: str
    start: int  # index of the first line (the heading line, if any)
    end: int  # exclusive
    heading_lines: int = 0  # 1 for ATX, 2 for setext
    fences: list[tuple[int, int]] = field(default_factory=list)


def _sections(lines: list[str], start: int) -> list[_Section]:
    sections = [_Section(0, "", "", start, len(lines))]
    stack: list[tuple[int, str]] = []
    fence: tuple[str, int, int] | None = None  # (char, length, start line)
    prev_paragraph = False
    for i in range(start, len(lines)):
        line = lines[i]
        if fence is not None:
            stripped = line.strip()
            closes = stripped and set(stripped) == {fence[0]} and len(stripped) >= fence[1]
            if closes and len(line) - len(line.lstrip(" ")) <= 3:
                sections[-1].fences.append((fence[2], i + 1))
                fence = None
            continue
        first = line[:1]  # most lines cannot open a fence or a heading: no regex for them
        opened = _FENCE_RE.match(line) if first in _FENCE_OR_INDENT else None
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            fence = (opened.group(1)[0], len(opened.group(1)), i)
            prev_paragraph = False
            continue
        level, title = 0, ""
        atx = _ATX_OPEN_RE.match(line) if first in _ATX_OR_INDENT else None
        if atx:
            level, title = len(atx.group(1)), _atx_title(line[atx.end() :])
            heading_start = i
        elif prev_paragraph and first in _SETEXT_OR_INDENT and _SETEXT_RE.match(line):
            level = 1 if line.strip()[0] == "=" else 2
            title, heading_start = lines[i - 1].strip(), i - 1
        if level:
            if len(title) > MAX_HEADING_CHARS:
                title = cut(title, MAX_HEADING_CHARS)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            sections[-1].end = heading_start
            path = " > ".join(t for _, t in stack if t)
            sections.append(
                _Section(level, title, path, heading_start, len(lines), i + 1 - heading_start)
            )
            prev_paragraph = False
            continue
        prev_paragraph = bool(line.strip()) and not _NOT_PARAGRAPH_RE.match(line)
    if fence is not None:  # an unclosed fence runs to the end of the document
        sections[-1].fences.append((fence[2], len(lines)))
    return sections


def _atx_title(rest: str) -> str:
    """The title of an ATX heading from what follows its opening #s: without the closing
    sequence (#s after a space or tab) and the spaces around it."""
    title = rest.strip(" \t")
    bare = title.rstrip("#")
    if bare != title and bare[-1:] in (" ", "\t"):
        title = bare.rstrip(" \t")
    return title.strip()


def _first_heading(sections: list[_Section]) -> str:
    titled = [s for s in sections if s.level and s.title]
    if not titled:
        return ""
    top = min(s.level for s in titled)
    return next(s.title for s in titled if s.level == top)


def _blocks(lines: list[str], section: _Section) -> list[tuple[int, int, bool]]:
    """Split a section into ``(start, end, atomic)`` blocks at blank lines; fences are atomic."""
    blocks: list[tuple[int, int, bool]] = []
    fences = iter(section.fences)
    next_fence = next(fences, None)
    i, block_start = section.start, None
    while i < section.end:
        if next_fence is not None and i == next_fence[0]:
            if block_start is not None:
                blocks.append((block_start, i, False))
                block_start = None
            end = min(next_fence[1], section.end)
            blocks.append((i, end, True))
            i = end
            next_fence = next(fences, None)
            continue
        if lines[i].strip():
            if block_start is None:
                block_start = i
        elif block_start is not None:
            blocks.append((block_start, i, False))
            block_start = None
        i += 1
    if block_start is not None:
        blocks.append((block_start, section.end, False))
    return blocks


def _chunks(lines: list[str], sections: list[_Section], limit: int, turn_limit: int) -> list[Chunk]:
    spans: list[tuple[int, int, str]] = []  # (start, end exclusive, heading path)
    pending_start: int | None = None  # a heading-only section waiting for its content
    long: dict[int, int] = {}  # lines over their unit's budget on their own -> that budget
    for section in sections:
        blocks = _blocks(lines, section)
        if not blocks:
            continue
        start = pending_start if pending_start is not None else blocks[0][0]
        if len(blocks) == 1 and blocks[0][1] - blocks[0][0] == section.heading_lines:
            if pending_start is None:
                pending_start = start
            continue
        pending_start = None
        heading_end = section.start + section.heading_lines
        for piece_start, piece_end, caption in _pack(
            lines, blocks, limit, start, turn_limit, long, heading_end
        ):
            path = " > ".join(p for p in (section.path, caption) if p)
            spans.append((piece_start, piece_end, path))
    if pending_start is not None:  # trailing headings with no content still get indexed
        spans.append((pending_start, _last_nonblank(lines, len(lines)), sections[-1].path))
    # no unit is larger than this, however its lines run: a code block is kept whole up to
    # a few units, and so are runs of headings without text; beyond, they are cut too
    most = _BLOCK_UNITS * _CHARS_PER_TOKEN * max(limit, turn_limit)
    chunks: list[Chunk] = []
    for start, stop, path in spans:
        end = _last_nonblank(lines, stop)
        if end <= start:
            continue
        text = "\n".join(lines[start:end])
        if len(text) > most or (long and any(start <= i < end for i in long)):
            for first, last, part in _bounded(lines, start, end, limit, long):
                chunks.append(Chunk(len(chunks), path, first + 1, last, part))
            continue
        chunks.append(Chunk(len(chunks), path, start + 1, end, text))
    return chunks


_BLOCK_UNITS = 4
_CHARS_PER_TOKEN = 3  # at most, as estimate_tokens counts (CJK characters count more)


def _bounded(
    lines: list[str], start: int, end: int, limit: int, long: dict[int, int]
) -> Iterator[tuple[int, int, str]]:
    """``(first line, end line exclusive, text)`` pieces of ``lines[start:end]`` within
    budget: lines packed up to ``limit`` tokens, a line over its budget cut on its own."""
    first, tokens = -1, 0
    for i in range(start, end):
        line = lines[i]
        size = estimate_tokens(line)
        cap = long.get(i, limit)
        if size > cap:
            if first >= 0:
                last = _last_nonblank(lines, i)
                yield first, last, "\n".join(lines[first:last])
                first, tokens = -1, 0
            for part in _cut_line(line, cap):
                yield i, i + 1, part
            continue
        if first < 0:
            if not line.strip():
                continue  # a piece starts with text
            first = i
        elif tokens + size > limit and line.strip():
            last = _last_nonblank(lines, i)
            yield first, last, "\n".join(lines[first:last])
            first, tokens = i, 0
        tokens += size
    if first >= 0:
        last = _last_nonblank(lines, end)
        yield first, last, "\n".join(lines[first:last])


def _cut_line(line: str, cap: int) -> Iterator[str]:
    """A line too long for one unit in pieces of at most ``cap`` tokens, each cut after a
    space in its second half, else (base64, minified code) where the budget ends."""
    pos, size = 0, len(line)
    while pos < size:
        end = min(size, pos + _CHARS_PER_TOKEN * cap - 1)
        while (tokens := estimate_tokens(line[pos:end])) > cap and end - pos > 1:
            end = min(end - 1, pos + max(1, (end - pos) * cap // tokens))  # CJK: fewer chars
        if end < size:
            space = max(line.rfind(" ", pos + (end - pos) // 2, end),
                        line.rfind("\t", pos + (end - pos) // 2, end))  # fmt: skip
            if space > pos:
                end = space + 1
        part = line[pos:end].strip()
        if part:
            yield part
        pos = end


def _last_nonblank(lines: list[str], end: int) -> int:
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    return end


def _pack(
    lines: list[str],
    blocks: list[tuple[int, int, bool]],
    limit: int,
    first_start: int,
    turn_limit: int,
    long: dict[int, int],
    heading_end: int,
) -> list[tuple[int, int, str]]:
    """Greedily pack consecutive blocks into ``(start, end, caption)`` pieces of at most
    ``limit`` tokens. A block of one line per turn (a dialogue, a log, a diary) that does not
    fit gets pieces of its own, of at most ``turn_limit`` tokens, cut between turns only; its
    first piece keeps the headings before it (up to ``heading_end``: "## Session 2, 10 March"
    is no unit alone). A line alone before a run of turns, or first among them, that is no
    turn ("Session 2 - 27 June 2023", :func:`_caption`) captions them: it stays in their first
    piece and is the ``caption`` of every piece of them, and of the runs after them, until
    the next caption; a run it captions is one even when short. Within a run, a line that is
    no turn and begins as its caption does ("Session 3 - ...") cuts a piece and captions the
    turns after it. A line over its budget alone gets a piece of its own, and is noted in
    ``long`` (with that budget) to be cut."""
    pieces: list[tuple[int, int, str]] = []
    blocks = _with_directions(lines, blocks)
    start, tokens = first_start, 0
    cursor = first_start
    after_turns = False
    caption = ""  # what captions the runs of turns from here on
    # the block before, when it is one line alone (after the headings, a run of turns or
    # nothing) that could caption turns: decided by the turns, whatever the budget
    lone_line: int | None = None
    after_break = True  # the next block follows the headings, a run of turns or nothing
    for b_start, b_end, atomic in blocks:
        if after_turns:  # a new piece starts at the block, not at the blank line before it
            start, after_turns = b_start, False
        size = estimate_tokens("\n".join(lines[b_start:b_end]))
        first = max(b_start, heading_end)  # the block's first line past the headings
        while first < b_end - 1 and (
            not lines[first].strip() or _STAGE_DIRECTION_RE.match(lines[first])
        ):  # and past the stage directions joined to it
            first += 1
        big = size > min(turn_limit, limit)
        # who speaks matters to a block too big for one unit, or after a possible caption
        looked = not atomic and (big or lone_line is not None)
        speakers = _speakers(lines, first, b_end) if looked else None
        turns = speakers is not None and big
        captioned = False  # by the line alone before the block
        if (
            speakers is not None
            and lone_line is not None
            and (named := _caption(lines[lone_line], speakers))
        ):
            caption, captioned, turns = named, True, True
        if turns and not captioned and speakers is not None:
            caption = _caption(lines[first], speakers) or caption
        with_turns = turns and (cursor <= heading_end or captioned)  # headings or a caption
        if tokens and (turns or tokens + size > limit) and not with_turns:
            pieces.append((start, cursor, ""))
            start, tokens = b_start, 0
        single = not atomic and first == b_end - 1
        lone_line = first if after_break and single and _caption(lines[first]) else None
        after_break = turns or b_end <= heading_end
        if turns or (size > limit and not atomic):
            # a huge paragraph or list: cut between lines
            cap = turn_limit if turns else limit
            lead = _first_word(caption)
            for line_no in range(b_start, b_end):
                line_size = estimate_tokens(lines[line_no])
                if turns and lead and line_no > first and speakers is not None:
                    named = _caption(lines[line_no], speakers)
                    if named and _first_word(named) == lead:
                        if tokens:  # the next session: a piece of its own, under its caption
                            pieces.append((start, line_no, caption))
                            start, tokens = line_no, 0
                        caption = named
                if tokens and tokens + line_size > cap:
                    pieces.append((start, line_no, caption if turns else ""))
                    start, tokens = line_no, 0
                if line_size > cap:
                    long[line_no] = cap
                tokens += line_size
            if turns:  # what follows the turns starts a piece of its own
                pieces.append((start, b_end, caption))
                start, tokens, after_turns = b_end, 0, True
        else:
            tokens += size
        cursor = b_end
    if cursor > start:
        pieces.append((start, cursor, ""))
    return pieces


def _with_directions(
    lines: list[str], blocks: list[tuple[int, int, bool]]
) -> list[tuple[int, int, bool]]:
    """``blocks`` with each one-line stage direction ("(Laughter)", "[Music]") joined to
    the block after it: a transcript's aside between turns is part of their run (what
    :func:`_pack` reads of a block, its speakers and caption, starts past it)."""
    out: list[tuple[int, int, bool]] = []
    pending: int | None = None  # where a direction waiting for the next block starts
    for b_start, b_end, atomic in blocks:
        if not atomic and b_end - b_start == 1 and _STAGE_DIRECTION_RE.match(lines[b_start]):
            pending = b_start if pending is None else pending
            continue
        start = b_start
        if pending is not None and not atomic:
            start = pending
        elif pending is not None:
            out.append((pending, b_start, False))
        pending = None
        out.append((start, b_end, atomic))
    if pending is not None:
        out.append((pending, blocks[-1][1], False))
    return out


# a line that is only a transcript's stage direction: "(Laughter)", "[Music]", "(applause)"
# (no digit: "(Part 2)", "[Day 3]" may caption a session)
_STAGE_DIRECTION_RE = re.compile(r"^\s{0,3}(?:\([^()\n\d]{1,40}\)|\[[^\[\]\n\d]{1,40}\])\s*$")


def _first_word(text: str) -> str:
    return text.split(maxsplit=1)[0].casefold() if text.strip() else ""


MAX_CAPTION_CHARS = 100
# a sentence or a clause, in the scripts that end them otherwise too
_SENTENCE_END = tuple(".!?;,…。！？；，")
_DECORATION = "=*_~ \t"  # === Session 1 ===, **Session 1**


def _caption(line: str, speakers: frozenset[str] = frozenset()) -> str:
    """The line as a caption of the turns after it ("Session 2 - 27 June 2023", "Day 3:",
    "=== Session 1 ==="), or "" when it cannot be one: a turn of one of ``speakers`` or
    one with a time, markup (a list item, a quote, a table row, a tag, an image, a rule), a
    sentence (it ends in punctuation), a transcript's stage direction ("(Laughter)",
    "[music]"), or longer than a heading."""
    text = one_line(_EMPHASIS.sub("", line)).strip(_DECORATION)
    if (
        not text
        or _STAGE_DIRECTION_RE.match(line)
        or len(text) > MAX_CAPTION_CHARS
        or text.endswith(_SENTENCE_END)
        or text.startswith(("<", "!["))
        or not any(ch.isalnum() for ch in text)
        or _NOT_PARAGRAPH_RE.match(line)
        or _TIME_RE.match(line)
    ):
        return ""
    label = _LABEL_RE.match(line)
    if label and label.group(1).strip() in speakers:
        return ""
    return text


# a turn: a line that starts with a speaker's label and a colon ("Ana: ...", "[D1:3] Ana: ...",
# "**Q:** ...", "- Asked: ..."), or with a time ("10:32 ...", "- [10:32] ..."), as dialogues,
# chat logs and diaries are written
_LABEL_RE = re.compile(
    r"^\s{0,3}(?:[-*+]\s+|\d{1,9}[.)]\s+)?(?:\[[^\]\n]{1,40}\]\s*)?[*_]{0,2}"
    r"([^\s:：*_`\[][^:：\n`]{0,30}?)[*_]{0,2}(?::[*_]{0,2}\s|：)"
)
_TIME_RE = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\[?\d{1,2}:\d{2}\b")


def is_turns(lines: list[str]) -> bool:
    """Whether ``lines`` are written one line per turn (a dialogue, a chat log, a diary)."""
    return _speakers(lines, 0, len(lines)) is not None


def _speakers(lines: list[str], start: int, end: int) -> frozenset[str] | None:
    """The labels that recur in a block written one line per turn: most of its lines start
    with a time, or with a label that recurs (speakers take turns; a list of steps or terms
    does not). None when it is not written so."""
    count = end - start
    if count < 3:
        return None
    labels: dict[str, int] = {}
    timed = 0
    for i in range(start, end):
        if _TIME_RE.match(lines[i]):
            timed += 1
        found = _LABEL_RE.match(lines[i])
        if found:
            label = found.group(1).strip()
            labels[label] = labels.get(label, 0) + 1
    recurring = frozenset(label for label, n in labels.items() if n >= 2)
    if timed >= 0.8 * count:
        return recurring
    if sum(labels.values()) >= 0.8 * count and recurring:
        return recurring
    return None


# --- prose ---------------------------------------------------------------------------------


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|`)")


def first_paragraph(texts: Iterable[str], limit: int) -> str:
    """The first paragraph of prose in markdown chunks: headings, code, tables, images, HTML
    and lines without letters are skipped; links keep their text; cut at ``limit`` chars."""
    for text in texts:
        paragraph: list[str] = []
        fenced = False
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith(("```", "~~~")):
                fenced = not fenced
                if paragraph:
                    break
                continue
            if fenced:
                continue
            line = line.lstrip("> ").strip()
            skip = (
                not line
                or line.startswith(("#", "|", "<", "[![", "![", "---", "==="))
                or not any(c.isalpha() for c in line)
            )
            if skip:
                if paragraph:
                    break
                continue
            paragraph.append(_EMPHASIS.sub("", _LINK.sub(r"\1", line)))
        if paragraph:
            return cut(" ".join(paragraph), limit)
    return ""


def cut(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis to ``limit`` chars."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"
