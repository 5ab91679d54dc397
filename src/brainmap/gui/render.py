"""Rendering: the Jinja2 environment of the GUI, its filters, the safe markdown snippet
renderer, and the page response with its security headers.

Templates autoescape every value and fail on an undefined name (``StrictUndefined``), so a
typo is an error in the tests, not an empty spot on a page. The only HTML that is not escaped
is what a filter here builds (returned as ``Markup``), each piece of text in it escaped.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.responses import HTMLResponse

from brainmap import __version__
from brainmap.gui.csrf import FIELD, Csrf

CSS = (resources.files("brainmap.gui") / "templates" / "style.css").read_text(encoding="utf-8")
_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode("ascii")
# no script may run at all; the only style is the page's own (by hash); forms post only to us
CSP = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # pages carry a CSRF token
}

# --- filters ----------------------------------------------------------------------------------


def url(path: str, **params: object) -> str:
    """A local URL with its query (empty values left out); templates escape it."""
    query = urllib.parse.urlencode({k: str(v) for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def entry_url(entry_id: str) -> str:
    """The page of one entry."""
    return "/ui/entry/" + urllib.parse.quote(entry_id, safe="")


def when(value: str | None) -> Markup:
    """An ISO time as a ``<time>`` element (UTC shown as such), or an em dash."""
    if not value:
        return Markup("—")
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return escape(value)
    if parsed.tzinfo is not None and parsed.utcoffset() == dt.timedelta(0):
        shown = parsed.strftime("%Y-%m-%d %H:%M UTC")
    elif len(value) <= 10:
        shown = value
    else:
        shown = parsed.strftime("%Y-%m-%d %H:%M")
    return Markup('<time datetime="{}">{}</time>').format(value, shown)


def sha(value: str | None) -> Markup:
    """A commit hash, short (the whole one as its title), or a file time."""
    if not value:
        return Markup("—")
    if value.startswith("mtime:"):
        return Markup("<span>file time {}</span>").format(when(value[6:]))
    return Markup('<code title="{}">{}</code>').format(value, value[:10])


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 result``, ``2 results`` (``many`` for irregular plurals)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def lines(start: int, end: int) -> str:
    """A line range: ``5`` or ``5–7``."""
    return f"{start}" if start == end else f"{start}–{end}"


# --- the markdown snippet renderer --------------------------------------------------------------

# a fenced block (a snippet may cut it off: then it runs to the end)
# (a backtick fence's info string has no backtick: ``` a ``` on one line is inline code)
_FENCE = re.compile(
    r"^[ \t]*(`{3,}(?=[^`\n]*$)|~{3,})[^\n]*\n?(.*?)(?:^[ \t]*\1[ \t]*$\n?|\Z)", re.M | re.S
)
_INLINE = re.compile(
    # a fence a snippet joined onto one line (``` · code · ```), then inline code
    r"```(?P<fence>[^`\n]+?)```|`(?P<code>[^`\n]+)`"
    r"|\[\[(?P<target>[^\[\]|\n]+)(?:\|(?P<label>[^\[\]\n]+))?\]\]"
    r"|\[(?P<text>[^\[\]\n]+)\]\((?P<href>[^()\s]+)\)"
    r"|\*\*(?P<strong>[^*\n]+?)\*\*"
    # __strong__ only of words apart (__init__ is a name, not emphasis)
    # (the space is looked for ahead: two lazy runs around it took quadratic time on a long
    # line that opens __ and never closes it)
    r"|(?<![\w_])__(?=[^_\n]*?[ \t])(?P<strong2>[^_\s][^_\n]*?[^_\s])__(?![\w_])"
    r"|\*(?P<em>[^*\s][^*\n]*?)\*"
    # underscores only around words: snake_case and __dunder__ names stay as written
    r"|(?<![\w_])_(?P<em2>[^_\s][^_\n]*?)_(?![\w_])"
)


def highlight(text: str, terms: Sequence[str]) -> Markup:
    """``text`` escaped, each occurrence of a term (any case) in ``<mark>``."""
    words = sorted({t for t in terms if t.strip()}, key=len, reverse=True)
    if not words:
        return escape(text)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    out, at = [], 0
    for found in pattern.finditer(text):
        out.append(escape(text[at : found.start()]))
        out.append(Markup("<mark>{}</mark>").format(found.group()))
        at = found.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


Href = Callable[[str], str | None]  # a markdown link's target -> a local URL, or None


def _inline(text: str, terms: Sequence[str], link: Callable[[str], str], href: Href) -> Markup:
    out, at = [], 0
    for found in _INLINE.finditer(text):
        out.append(highlight(text[at : found.start()], terms))
        at = found.end()
        if (code := found["fence"] or found["code"]) is not None:
            out.append(Markup("<code>{}</code>").format(highlight(code, terms)))
        elif found["target"] is not None:
            target = found["target"].strip()
            label = (found["label"] or found["target"]).strip() or target
            shown = highlight(label, terms)
            out.append(Markup('<a href="{}">{}</a>').format(link(target), shown) if target
                       else highlight(found.group(), terms))  # fmt: skip
        elif found["text"] is not None:  # a markdown link: only where ``href`` lets it lead
            shown = highlight(found["text"], terms)
            to = href(found["href"])
            out.append(Markup('<a href="{}">{}</a>').format(to, shown) if to else shown)
        elif (strong := found["strong"] or found["strong2"]) is not None:
            out.append(Markup("<strong>{}</strong>").format(highlight(strong, terms)))
        else:
            out.append(Markup("<em>{}</em>").format(highlight(found["em"] or found["em2"], terms)))
    out.append(highlight(text[at:], terms))
    return Markup("").join(out)


def markdown(
    text: str,
    terms: Sequence[str] = (),
    link: Callable[[str], str] | None = None,
    href: Href | None = None,
) -> Markup:
    """A markdown snippet as safe HTML: fenced code as ``<pre><code>``, inline code, wiki
    links ``[[x]]`` / ``[[x|label]]`` as links (``link`` makes their URL), ``**strong**`` and
    ``*emphasis*``, the query's ``terms`` in ``<mark>``; everything else is escaped text, raw
    HTML included (no tag of the source ever reaches the page). A markdown link
    ``[text](target)`` shows its text, a link only where ``href`` gives the target a local
    URL (no URL of the text itself is ever followed: no ``javascript:``)."""
    to = link or wiki_url
    local = href or _no_href
    out, at = [], 0
    for fence in _FENCE.finditer(text):
        out.append(_inline(text[at : fence.start()], terms, to, local))
        code = fence.group(2).rstrip("\n")
        out.append(Markup("<pre><code>{}</code></pre>").format(highlight(code, terms)))
        at = fence.end()
    out.append(_inline(text[at:], terms, to, local))
    return Markup("").join(out)


def _no_href(target: str) -> None:
    return None


def wiki_url(target: str) -> str:
    """Where a wiki link ``[[target]]`` leads: the entry it names (``/ui/wiki`` resolves it)."""
    return "/ui/wiki/" + urllib.parse.quote(target, safe="")


# --- pages ------------------------------------------------------------------------------------


def environment() -> jinja2.Environment:
    """The GUI's template environment with its filters (globals are added per site)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("brainmap.gui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=when, sha=sha, plural=plural, entry_url=entry_url, url=url, lines=lines,
        markdown=markdown, highlight=highlight,
    )  # fmt: skip
    return env


class Renderer:
    """Renders the pages of one site: its nav, its mode and its forms' CSRF tokens."""

    def __init__(
        self,
        csrf: Csrf,
        *,
        read_only: bool,
        nav: Iterable[tuple[str, str, str]],
        account: Callable[[], str | None] = lambda: None,
        may: Callable[..., bool] = lambda *_: True,
    ) -> None:
        """``account`` says who is signed in (None: the server has no sign-in); ``may(role,
        library)`` whether they hold a role (the pages offer only the forms they may send)."""
        self.env = environment()
        self.env.globals.update(
            css=CSS, version=__version__, read_only=read_only, nav=list(nav),
            csrf_field=FIELD, csrf_token=csrf.token, account=account, may=may, signing_in=False,
        )  # fmt: skip

    def page(
        self, template: str, *, title: str, current: str = "", status: int = 200, **context: Any
    ) -> HTMLResponse:
        """A whole page from ``template`` with the security headers."""
        html = self.env.get_template(template).render(title=title, current=current, **context)
        return HTMLResponse(html, status_code=status, headers=HEADERS)
