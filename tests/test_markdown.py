"""Frontmatter, titles, and heading-aware chunks with exact line ranges."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainmap.analysis import estimate_tokens
from brainmap.markdown import (
    _ATX_OPEN_RE,
    MAX_HEADING_CHARS,
    DecodeError,
    _atx_title,
    breadcrumbs,
    decode,
    parse,
)


def test_frontmatter_fields_and_defaults() -> None:
    text = (
        "---\ntitle: Custom\ntype: Gotcha\ntags: [Docker, '#net']\nproject: web\n"
        "created: 2024-01-02\nlast_verified: 2025-03-04T10:00:00\naliases: [Alt Name]\n"
        "custom_key: {nested: [1, 2]}\n---\n# Heading title\n\nBody.\n"
    )
    entry = parse(text, fallback_title="file")
    assert entry.title == "Custom"
    assert entry.type == "gotcha"
    assert entry.tags == ["docker", "net"]
    assert entry.project == "web"
    assert entry.created == "2024-01-02"
    assert entry.last_verified == "2025-03-04T10:00:00"
    assert entry.aliases == ["Alt Name"]
    assert entry.meta["custom_key"] == {"nested": [1, 2]}
    assert entry.warnings == []


def test_title_falls_back_to_first_heading_then_file_name() -> None:
    assert parse("intro\n\n## Sub\n\n# Main\n", fallback_title="f").title == "Main"
    assert parse("Setext Title\n===\n\ntext\n", fallback_title="f").title == "Setext Title"
    assert parse("just text\n", fallback_title="my-note").title == "my-note"
    assert parse("", fallback_title="empty").chunks == []


def test_chunks_follow_headings_with_exact_lines() -> None:
    text = "# A\n\nalpha\n\n## B\n\nbeta\nbeta2\n\n## C\n\ngamma\n"
    lines = text.split("\n")
    chunks = parse(text, fallback_title="x").chunks
    assert [(c.heading, c.line_start, c.line_end) for c in chunks] == [
        ("A", 1, 3),
        ("A > B", 5, 8),
        ("A > C", 10, 12),
    ]
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.line_start - 1 : chunk.line_end])


def test_heading_only_section_joins_the_next_one() -> None:
    chunks = parse("# Top\n\n## Empty\n\n### Deep\ntext\n", fallback_title="x").chunks
    assert len(chunks) == 1
    assert (chunks[0].line_start, chunks[0].heading) == (1, "Top > Empty > Deep")


def test_hash_lines_inside_fences_are_not_headings() -> None:
    text = "# Real\n\n```bash\n# a comment\nls\n```\n\n~~~\n## nope\n~~~\n"
    chunks = parse(text, fallback_title="x").chunks
    assert [c.heading for c in chunks] == ["Real"]
    assert chunks[0].line_end == 10


def test_long_sections_split_near_the_limit_without_cutting_code() -> None:
    para = "word " * 60  # ~100 tokens
    code = "```\n" + "\n".join(f"line {i} of code" for i in range(80)) + "\n```"
    text = f"# Big\n\n{para}\n\n{para}\n\n{code}\n\n{para}\n"
    lines = text.split("\n")
    chunks = parse(text, fallback_title="x", chunk_tokens=150).chunks
    assert len(chunks) >= 3
    fence_start = lines.index("```") + 1
    fence_end = len(lines) - lines[::-1].index("```")
    for chunk in chunks:
        # a chunk contains the whole fence or none of it
        inside = chunk.line_start <= fence_start <= chunk.line_end
        assert inside == (chunk.line_start <= fence_end <= chunk.line_end)
    assert all(c.heading == "Big" for c in chunks)


def test_huge_paragraph_is_cut_between_lines() -> None:
    text = "\n".join(f"sentence number {i} goes here with words" for i in range(400))
    chunks = parse(text, fallback_title="x", chunk_tokens=100).chunks
    assert len(chunks) > 5
    assert chunks[0].line_start == 1 and chunks[-1].line_end == 400
    for a, b in itertools.pairwise(chunks):
        assert b.line_start == a.line_end + 1


_WORDS = " ".join(f"word{i % 977}" for i in range(200_000))  # ~1.7 MB on one line


@pytest.mark.parametrize(
    ("text", "line_no"),
    [
        (f"# Title\n\n{_WORDS}\n\nafter\n", 3),  # prose without a line break
        ("QUJD" * 300_000, 1),  # base64: no space to cut at
        ("漢字かな" * 200_000, 1),  # CJK: fewer characters a token
        (f"# {_WORDS}\n", 1),  # a heading line
        ("```\n" + _WORDS + "\n```\n", 2),  # inside a code block, which is never cut else
        (f"- Ana: hi\n- Ben: hello\n- Ana: {_WORDS}\n- Ben: ok\n", 3),  # a turn
    ],
    ids=["prose", "base64", "cjk", "heading", "code", "turn"],
)
def test_one_huge_line_is_cut_into_bounded_units(text: str, line_no: int) -> None:
    """A line longer than a unit is cut (at spaces where there are any) into parts that
    all point at that line; a 50 MB line was one 50 MB chunk."""
    line = text.split("\n")[line_no - 1]
    entry = parse(text, fallback_title="x", chunk_tokens=100, turn_tokens=150)
    parts = [c for c in entry.chunks if c.line_start == c.line_end == line_no]
    assert len(parts) > 10
    for chunk in entry.chunks:
        assert estimate_tokens(chunk.text) <= 150
        assert len(chunk.heading) <= MAX_HEADING_CHARS
    assert len(entry.title) <= MAX_HEADING_CHARS
    joined = " ".join(p.text for p in parts) if " " in line else "".join(p.text for p in parts)
    assert joined.split() == line.split()  # nothing lost, nothing added
    ords = [c.ord for c in entry.chunks]
    assert ords == list(range(len(ords)))


def test_a_huge_frontmatter_title_is_cut() -> None:
    entry = parse(f"---\ntitle: {_WORDS}\n---\nbody\n", fallback_title="x")
    assert len(entry.title) <= MAX_HEADING_CHARS and entry.title.startswith("word0 word1")


def test_a_huge_code_block_and_runs_of_headings_are_bounded() -> None:
    code = "```\n" + "\n".join(f"line {i} of code" for i in range(100_000)) + "\n```\n"
    headings = "".join(f"# h{i}\n" for i in range(100_000))
    for text in (code, headings):
        entry = parse(text, fallback_title="x")
        assert len(entry.chunks) > 100
        assert max(len(c.text) for c in entry.chunks) <= 4 * 3 * 450


@pytest.mark.timeout(60)  # the old heading pattern took minutes for 40 kB of spaces
def test_a_heading_with_a_long_run_of_spaces_parses_at_once() -> None:
    entry = parse("# a" + " " * 200_000 + "b\n\ntext\n", fallback_title="x")
    assert entry.title == "a b" and entry.chunks[-1].text == "text"


_OLD_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=" \t#ab\u00a0", max_size=14))
def test_heading_levels_and_titles_are_those_of_the_former_pattern(line: str) -> None:
    """The heading reader (no regex for the closing #s) reads what the former pattern read,
    on every short line."""
    old = _OLD_ATX.match(line)
    new = _ATX_OPEN_RE.match(line)
    assert (old is None) == (new is None)
    if old is not None and new is not None:
        assert len(new.group(1)) == len(old.group(1))
        assert _atx_title(line[new.end() :]) == (old.group(2) or "").strip()


@pytest.mark.parametrize(
    "line",
    [
        "[D{i}:1] Caroline: I went to the support group yesterday, it was {i} hours long.",
        "Melanie: that sounds wonderful, number {i}, tell me more about it please.",
        "- 10:{i:02d} edited src/app.py and ran the tests again, all green this time",
        "**Q:** what did we decide about release {i}? **A:** ship it on Friday",
    ],
)
def test_one_line_per_turn_gets_turn_aligned_units(line: str) -> None:
    turns = [line.format(i=i) for i in range(60)]
    text = "# Session 3, 8 May 2023\n\nIntro paragraph.\n\n" + "\n".join(turns) + "\n\nAfter.\n"
    chunks = parse(text, fallback_title="x", chunk_tokens=300, turn_tokens=60).chunks
    body = [c for c in chunks if c.text.count("\n") >= 1 and "Intro" not in c.text]
    assert len(body) > 5
    for chunk in chunks:
        # whole turns only, each unit within its budget (a few lines of the heading aside)
        for text in chunk.text.split("\n"):
            assert text in turns or text in ("", "Intro paragraph.", "After.") or text[:1] == "#"
        assert len(chunk.text) <= 60 * 3 + 200
    assert chunks[-1].text == "After."  # what follows the turns is a unit of its own
    # prose is not cut that small, nor a list of steps or terms (no label recurs)
    prose = "\n".join(f"and then sentence number {i} goes on with words" for i in range(60))
    assert len(parse(prose, fallback_title="x", chunk_tokens=300, turn_tokens=60).chunks) <= 4
    steps = "\n".join(
        f"- Step {i}: open the settings and change value {i} there" for i in range(30)
    )
    assert len(parse(steps, fallback_title="x", chunk_tokens=300, turn_tokens=60).chunks) <= 2


def test_sessions_under_headings_keep_their_heading_in_every_unit() -> None:
    """Several sessions in one file, each under a heading with its date: every unit of a
    session carries that heading, and no heading is a unit alone."""

    def session(n: int) -> str:
        turns = (f"[D{n}:{i}] {'Ana' if i % 2 else 'Ben'}: turn {i} about the pottery class"
                 for i in range(40))  # fmt: skip
        return f"## Session {n}, {n + 9} March 2025\n\n" + "\n".join(turns)

    text = "# Ana and Ben\n\n" + "\n\n".join(session(n) for n in (1, 2, 3)) + "\n"
    chunks = parse(text, fallback_title="x", chunk_tokens=300, turn_tokens=60).chunks
    assert len(chunks) > 6
    for chunk in chunks:
        assert chunk.heading.startswith("Ana and Ben > Session "), chunk
        n = chunk.heading[len("Ana and Ben > Session ")]
        assert all(f"[D{n}:" in line for line in chunk.text.splitlines() if "[D" in line)
        assert any(line.startswith("[D") for line in chunk.text.splitlines()), chunk.text


def test_a_plain_line_before_turns_captions_every_unit_of_them() -> None:
    """Sessions headed by a plain line, not a heading ("Session 2 - 11 March 2025", alone
    before its turns or first among them): each unit of its turns carries the line as a
    heading would, and the line is no unit alone."""
    turns = "\n".join(f"{'Ana' if i % 2 else 'Ben'}: turn {i} about the pottery class"
                      for i in range(40))  # fmt: skip
    text = (f"# Ana and Ben\n\nSession 1 - 10 March 2025\n\n{turns}\n\n"
            f"Session 2 - 11 March 2025\n{turns}\n\nWe stopped there.\n")  # fmt: skip
    chunks = parse(text, fallback_title="x", chunk_tokens=300, turn_tokens=60).chunks
    sessions = [c for c in chunks if "turn 1 " in c.text or "turn 39" in c.text]
    assert len(chunks) > 6 and len(sessions) == 4
    for chunk in chunks[:-1]:
        assert chunk.heading in ("Ana and Ben > Session 1 - 10 March 2025",
                                 "Ana and Ben > Session 2 - 11 March 2025"), chunk  # fmt: skip
        assert any(line.startswith(("Ana:", "Ben:")) for line in chunk.text.splitlines())
    assert chunks[-1].heading == "Ana and Ben" and chunks[-1].text == "We stopped there."
    # a list of steps is no run of turns: its first line captions nothing
    steps = "Steps\n" + "\n".join(f"- step {i}: do the thing number {i} well" for i in range(40))
    assert all(c.heading == "" for c in parse(steps, fallback_title="x", chunk_tokens=60).chunks)


def test_captions_hold_however_the_sessions_are_laid_out() -> None:
    """Sessions with no blank line between them, a blank line inside one, captions written
    as labels or between rules, and a session shorter than a unit: every unit carries its
    own session's caption, never another's."""

    def turns(n: int, count: int) -> str:
        return "\n".join(f"{'Ana' if i % 2 else 'Ben'}: in session {n} turn {i} we talk about "
                         "the bakery" for i in range(count))  # fmt: skip

    def units(text: str) -> list[tuple[str, set[str]]]:
        chunks = parse(text, fallback_title="x", chunk_tokens=300, turn_tokens=80).chunks
        return [(c.heading, {line.split(" turn ")[0].rsplit(" ", 1)[-1]
                             for line in c.text.splitlines() if " turn " in line})
                for c in chunks]  # fmt: skip

    back_to_back = "# Chat\n\n" + "\n".join(
        f"Session {n} - 1{n} June 2023\n{turns(n, 20)}" for n in (1, 2, 3)
    )
    with_gaps = (f"# Chat\n\nSession 1 - 27 June\n{turns(1, 12)}\n\n{turns(1, 12)}\n\n"
                 f"Session 2 - 28 June\n{turns(2, 12)}\n\n{turns(2, 12)}\n")  # fmt: skip
    styles = (f"# Chat\n\nSession 1: 27 June 2023\n\n{turns(1, 14)}\n\n"
              f"=== Session 2: 3 March 2024 ===\n\n{turns(2, 14)}\n\n"
              f"Session 3 - short\n\n{turns(3, 3)}\n")  # fmt: skip
    # a transcript's stage directions between turns caption nothing
    directions = (f"# Chat\n\nSession 1 - 27 June\n{turns(1, 12)}\n\n(Laughter)\n\n"
                  f"{turns(1, 12)}\n\n[Music]\n{turns(1, 12)}\n\n(Applause)\n\n"
                  f"Session 2 - 28 June\n\n{turns(2, 12)}\n\n"
                  f"Session 3 - 29 June\n\n(Laughter)\n\n{turns(3, 4)}\n")  # fmt: skip
    for text in (back_to_back, with_gaps, styles, directions):
        found = units(text)
        assert len(found) >= 4
        for heading, sessions in found:
            assert sessions, heading  # no caption is a unit alone
            assert heading.startswith("Chat > Session "), heading
            assert sessions == {heading[len("Chat > Session ")]}, (heading, sessions)


@pytest.mark.parametrize(
    ("frontmatter", "warning"),
    [
        ("---\ntitle: [unclosed\n---\nbody\n", "broken frontmatter at line 2"),
        ("---\n- a list\n---\nbody\n", "not a mapping"),
        ("---\ntitle: x\nno end\n", "never closed"),
        ("---\ncreated: not-a-date\n---\nbody\n", "not a date"),
    ],
)
def test_bad_frontmatter_is_indexed_with_a_warning(frontmatter: str, warning: str) -> None:
    entry = parse(frontmatter, fallback_title="f")
    assert any(warning in w for w in entry.warnings)
    text = "\n".join(c.text for c in entry.chunks)
    assert "body" in text or "no end" in text  # the body is still searchable
    if "date" not in warning:  # a block that is not YAML frontmatter is indexed as text too
        assert frontmatter.split("\n")[1] in text


def test_self_referencing_and_exponential_yaml_is_bounded() -> None:
    entry = parse("---\nx: &a [*a]\n---\nbody\n", fallback_title="f")
    assert entry.meta == {} and "self-referencing" in entry.warnings[0]
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(7):
        prev, name = chr(97 + i), chr(98 + i)
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    entry = parse("---\n" + "\n".join(levels) + "\n---\nbody\n", fallback_title="f")
    assert entry.meta == {} and entry.chunks[0].text == "body"


def test_crlf_and_bom_and_utf16() -> None:
    assert parse("# T\r\n\r\ntext\r\n", fallback_title="x").chunks[0].text == "# T\n\ntext"
    assert decode("\ufeff# Titel".encode()) == ("# Titel", None)
    assert decode("# 标题".encode("utf-16")) == ("# 标题", None)
    with pytest.raises(DecodeError):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    with pytest.raises(DecodeError):
        decode(bytes(range(1, 32)) * 40)
    text, warning = decode("caf\u00e9 cr\u00e8me ".encode("cp1252") * 20)
    assert text.startswith("café crème") and warning and "Windows-1252" in warning
    text, warning = decode(("fine text é " * 200).encode() + b"\xff")
    assert text.endswith("é \ufffd") and warning and "1 invalid" in warning


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=3000))
def test_parse_never_raises_and_ranges_are_exact(text: str) -> None:
    entry = parse(text, fallback_title="fuzz", chunk_tokens=40)
    lines = text.split("\n")
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    previous_end = 0
    for chunk in entry.chunks:
        assert 1 <= chunk.line_start <= chunk.line_end <= len(lines)
        whole = "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
        if chunk.text == whole:
            assert chunk.line_start > previous_end
        else:  # a part of one line too long for a unit: the parts follow each other
            assert chunk.line_start == chunk.line_end >= previous_end
            assert chunk.text in whole
        previous_end = chunk.line_end


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["# H", "## H2", "```", "~~~", "text", "", "---", "===", "- item", "    code"]
        ),
        max_size=60,
    )
)
def test_structural_fuzz(lines: list[str]) -> None:
    text = "\n".join(lines)
    entry = parse(text, fallback_title="fuzz", chunk_tokens=20)
    covered = [n for c in entry.chunks for n in range(c.line_start, c.line_end + 1)]
    assert len(covered) == len(set(covered))  # chunks never overlap
    nonblank = {i + 1 for i, line in enumerate(text.split("\n")) if line.strip()}
    if not text.startswith("---"):
        assert nonblank <= set(covered)  # and every non-blank line is somewhere


def test_links_relations_and_frontmatter_relations() -> None:
    text = (
        '---\nrelations:\n  depends_on: [Postgres, "[[Redis]]"]\n  owned-by: Team A\n---\n'
        "# Pool\n"
        "See [[Connection  Limits]], [[Postgres|the db]] and [[Auth spec#tokens]].\n"
        "- depends_on [[PgBouncer]], [[Disk]]\n"
        "* Implements: [[Auth spec]]\n"
        "- a plain item with [[Plain]]\n"
        "Inline `[[not a link]]` is code.\n"
        "```\n[[inside a fence]]\n```\n"
        "[[]] and [[ ]] are nothing.\n"
    )
    links = [(x.predicate, x.target, x.line) for x in parse(text, fallback_title="x").links]
    assert links == [
        ("depends_on", "Postgres", 3), ("depends_on", "Redis", 3), ("owned_by", "Team A", 4),
        ("links_to", "Connection Limits", 7), ("links_to", "Postgres", 7),
        ("links_to", "Auth spec", 7), ("depends_on", "PgBouncer", 8), ("depends_on", "Disk", 8),
        ("implements", "Auth spec", 9), ("links_to", "Plain", 10),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "slug"),
    [
        ("x = 1  # Brain: pool-gotcha", "pool-gotcha"),
        ("const a = 1; // Brain: js-note.", "js-note"),
        ("-- Brain: docs:sql-note", "docs:sql-note"),
        ("/* Brain: c-note */", "c-note"),
        (" * Brain: doc-comment", "doc-comment"),
        ("; Brain: lisp-note", "lisp-note"),
        ("% Brain: tex-note", "tex-note"),
        ("<!-- Brain: html-note -->", "html-note"),
        ("REM Brain: bat-note", "bat-note"),
        ("#Brain:tight", "tight"),
        ("brain: lowercase is prose", None),
        ("print('Brain: not after a comment marker')", None),
    ],
)
def test_breadcrumbs_in_any_comment_syntax(line: str, slug: str | None) -> None:
    found = breadcrumbs(f"first line\n{line}\n")
    assert found == ([(slug, 2)] if slug else [])


def test_overlong_link_targets_and_slugs_are_not_names() -> None:
    links = parse("[[" + "x" * 400 + "]] and [[fine]]\n", fallback_title="t").links
    assert [link.target for link in links] == ["fine"]
    assert breadcrumbs("# Brain: " + "a" * 300 + "\n# Brain: ok-slug\n") == [("ok-slug", 2)]
