"""The GUI's markdown snippet renderer and filters: what a note's text may become on a page
(code, wiki links, emphasis, highlighted terms) and what it may never (any tag of its own)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from brainmap.gui.render import highlight, markdown, plural, sha, url, when

ALLOWED = {"a", "code", "pre", "strong", "em", "mark"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def _tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def test_raw_html_is_escaped() -> None:
    out = markdown('<script>alert(1)</script> "><img src=x onerror=alert(1)> & <b>bold</b>')
    assert isinstance(out, Markup)
    assert _tags(out) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in out


def test_wiki_links_link_to_what_they_name() -> None:
    assert markdown("see [[Postgres]] now") == 'see <a href="/ui/wiki/Postgres">Postgres</a> now'
    labelled = markdown("[[Backup bucket|the bucket]]")
    assert labelled == '<a href="/ui/wiki/Backup%20bucket">the bucket</a>'
    hostile = markdown('[[x"><script>|<i>label</i>]]')
    assert _tags(hostile) == [("a", [("href", "/ui/wiki/x%22%3E%3Cscript%3E")])]
    assert "&lt;i&gt;label&lt;/i&gt;" in hostile
    own = markdown("[[Postgres]]", link=lambda target: f"/elsewhere/{target}")
    assert own == '<a href="/elsewhere/Postgres">Postgres</a>'
    assert markdown("[[]] and [[ ]]") == "[[]] and [[ ]]"  # nothing named: text


def test_markdown_links_lead_only_where_allowed() -> None:
    text = "[day](2026/01/05.md) and [click](javascript:void)"
    assert markdown(text) == "day and click"  # no target is ever followed by default
    allowed = markdown(text, href=lambda t: "/ui/day" if t.endswith(".md") else None)
    assert allowed == '<a href="/ui/day">day</a> and click'


def test_code_inline_and_fenced() -> None:
    assert markdown("run `pg_dump <db>` first") == "run <code>pg_dump &lt;db&gt;</code> first"
    fenced = markdown("Before\n```sh\necho '<x>' && ls\n```\nafter")
    assert fenced == "Before\n<pre><code>echo &#39;&lt;x&gt;&#39; &amp;&amp; ls</code></pre>after"
    # a snippet may cut a fence off: the rest is code
    assert markdown("```\nunclosed *x*") == "<pre><code>unclosed *x*</code></pre>"
    # a fence a snippet joined onto one line
    assert markdown("``` · make test · ```") == "<code> · make test · </code>"
    # nothing inside code is markup: no link, no emphasis
    assert markdown("`[[Postgres]] *x*`") == "<code>[[Postgres]] *x*</code>"


def test_emphasis_but_not_snake_case() -> None:
    assert markdown("**bold** and __very bold__ and *it* and _it_") == (
        "<strong>bold</strong> and <strong>very bold</strong> and <em>it</em> and <em>it</em>"
    )
    assert markdown("max_connections and __init__ and a * b * c") == (
        "max_connections and __init__ and a * b * c"
    )


def test_terms_are_highlighted_in_any_case_and_any_part() -> None:
    out = markdown("Postgres: **postgres** `POSTGRES` [[Postgres]]", ["postgres"])
    assert out.count("<mark>") == 4
    assert out.startswith("<mark>Postgres</mark>: <strong><mark>postgres</mark></strong>")
    assert '<a href="/ui/wiki/Postgres"><mark>Postgres</mark></a>' in out
    # the longest term first; a term that is markup is only text
    assert highlight("pg_restore or pg", ["pg", "pg_restore"]) == (
        "<mark>pg_restore</mark> or <mark>pg</mark>"
    )
    assert highlight("a <b> b", ["<b>"]) == "a <mark>&lt;b&gt;</mark> b"
    assert highlight("nothing", []) == "nothing" and highlight("x", [" "]) == "x"


@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*_[]|()x \n#/:")), max_size=80),
       st.lists(st.sampled_from(["x", "<", "`", "*"]), max_size=3))  # fmt: skip
def test_no_text_makes_a_tag_of_its_own(text: str, terms: list[str]) -> None:
    out = markdown(text, terms)
    for tag, attrs in _tags(out):
        assert tag in ALLOWED, (text, out)
        assert all(
            name == "href" and (value or "").startswith("/ui/wiki/") for name, value in attrs
        )
    assert "<" not in text or "&lt;" in out


def test_filters() -> None:
    assert url("/ui/search", q="a b", library="", page=None) == "/ui/search?q=a+b"
    assert url("/ui/search") == "/ui/search"
    assert plural(1, "entry", "entries") == "1 entry" and plural(2, "day") == "2 days"
    assert (
        when(None) == "—" and when("2026-01-05") == '<time datetime="2026-01-05">2026-01-05</time>'
    )
    assert "UTC" in when("2026-01-05T10:00:00+00:00") and when("<soon>") == "&lt;soon&gt;"
    assert sha("0123456789abcdef") == '<code title="0123456789abcdef">0123456789</code>'
    assert sha("mtime:2026-01-05").startswith("<span>file time <time")


@pytest.mark.timeout(20)
def test_an_unclosed_strong_on_a_long_line_renders_in_linear_time() -> None:
    # two lazy runs around a space made this quadratic: hours for a 1 MB diary line
    rendered = str(markdown("__" + "a " * 200_000))
    assert "<strong>" not in rendered and rendered.count("a ") == 200_000
