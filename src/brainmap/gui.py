"""The web GUI: the library map as home page, search, and entries with their provenance.

Server-rendered HTML with one inline stylesheet: no JavaScript, no build step, no external
asset. Every interpolated value goes through :func:`_e` (``html.escape``); the Content
Security Policy allows no script at all and only the page's own stylesheet, so even a value
that escaped escaping could not run. Pages only read through ops; the two forms that write
(recompute the map, mark an entry verified) are offered only when the server is not
read-only, and each POST must carry the page's CSRF token besides passing the Guard's Origin
and ``Sec-Fetch-Site`` checks. Every GUI error is an HTML page with its status.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import html
import logging
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Sequence
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from brainmap import __version__, libmap, ops
from brainmap.errors import UserError
from brainmap.graph import Edge, GraphReader, Hops, Node
from brainmap.libmap import MapBlock
from brainmap.ops.knowledge import EntryInfo

log = logging.getLogger("brainmap.gui")

CSRF_FIELD = "csrf_token"
SEARCH_LIMIT = 20
MAX_FORM_FIELDS = 20
FORM_TYPE = "application/x-www-form-urlencoded"

CSS = """
:root{--bg:#f5f6f8;--card:#fff;--fg:#1b1f24;--muted:#4a5361;--line:#c5cbd3;--link:#0a4fb3;
--accent:#0a4fb3;--on-accent:#fff;--focus:#b45309;--chip:#e8eef9;--note:#e6f4ea;--warn:#fdf0d5;
color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#121519;--card:#1c2128;--fg:#e8eaed;
--muted:#b6bdc7;--line:#3d4552;--link:#8ab4f8;--accent:#8ab4f8;--on-accent:#10141a;
--focus:#fbbf24;--chip:#26303d;--note:#1f3326;--warn:#3a2f17}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);line-height:1.5;overflow-wrap:break-word;
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif}
a{color:var(--link)}
a:hover{text-decoration-thickness:2px}
:focus-visible{outline:3px solid var(--focus);outline-offset:2px}
.skip{position:absolute;left:.5rem;top:-4rem;background:var(--card);color:var(--link);
padding:.5rem 1rem;border:2px solid var(--focus);z-index:10}
.skip:focus{top:.5rem}
.wrap{max-width:72rem;margin:0 auto;padding:0 1rem}
header.site{background:var(--card);border-bottom:1px solid var(--line)}
header.site .wrap{display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1.5rem;
padding-top:.6rem;padding-bottom:.6rem}
.brand{font-weight:700;font-size:1.15rem;text-decoration:none;color:var(--fg)}
nav ul{display:flex;flex-wrap:wrap;gap:.25rem 1rem;list-style:none;margin:0;padding:0}
nav a[aria-current=page]{font-weight:700;text-decoration-thickness:3px}
main{padding-top:1rem;padding-bottom:2rem}
main:focus{outline:none}
h1{font-size:1.7rem;line-height:1.25;margin:.5rem 0 .75rem}
h2{font-size:1.3rem;margin:1.75rem 0 .5rem}
h3{font-size:1.1rem;margin:.25rem 0 .4rem}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em;
overflow-wrap:anywhere}
pre{white-space:pre-wrap;word-break:break-word;background:var(--card);border:1px solid var(--line);
padding:.75rem;border-radius:6px;margin:.25rem 0 1rem}
.lead,.meta,.hint{color:var(--muted)}
.meta{font-size:.92rem;margin:.1rem 0 .4rem}
.badge{display:inline-block;font-size:.8rem;padding:0 .4rem;border:1px solid currentColor;
border-radius:4px;color:#b3261e;vertical-align:middle}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,20rem),1fr));
gap:1rem;list-style:none;margin:0;padding:0}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem;min-width:0}
.card h3{font-size:1.2rem}
.chips{display:flex;flex-wrap:wrap;gap:.35rem;list-style:none;margin:.25rem 0 .6rem;padding:0}
.chips li{background:var(--chip);border-radius:999px;padding:.05rem .6rem;font-size:.9rem;min-width:0}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,8.5rem),1fr));
gap:.35rem .75rem;margin:.5rem 0}
dl.facts div{min-width:0}
dl.facts dt{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
dl.facts dd{margin:0;overflow-wrap:anywhere}
dl.wide{grid-template-columns:repeat(auto-fill,minmax(min(100%,16rem),1fr))}
form{margin:.5rem 0 1rem}
.row{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
.field{display:flex;flex-direction:column;gap:.2rem;flex:1 1 14rem;min-width:0}
.field.narrow{flex:0 1 14rem}
label{font-weight:600}
input,select,button{font:inherit;min-height:2.5rem;border-radius:6px;max-width:100%}
input,select{border:1px solid var(--muted);background:var(--card);color:var(--fg);
padding:.35rem .6rem;width:100%}
button{background:var(--accent);color:var(--on-accent);border:1px solid var(--accent);
padding:.35rem 1rem;font-weight:600;cursor:pointer}
.results{list-style:none;margin:0;padding:0}
.results li{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.75rem 1rem;
margin:0 0 .75rem}
.snippet{margin:.25rem 0 0}
.notice{background:var(--note);border-left:4px solid var(--accent);padding:.5rem .75rem}
.warnings{background:var(--warn);padding:.5rem .75rem .5rem 2rem}
table{border-collapse:collapse;width:100%;max-width:32rem}
th,td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid var(--line)}
td.num,th.num{text-align:right}
.edges li,.plain li{margin:.2rem 0}
.kind{font-size:.78rem;color:var(--muted);border:1px solid var(--line);border-radius:4px;
padding:0 .3rem;margin-right:.25rem}
footer{color:var(--muted);font-size:.9rem;padding-bottom:2rem}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);
white-space:nowrap}
"""

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


# --- small helpers --------------------------------------------------------------------------


def _e(value: object) -> str:
    """Escape anything for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def _url(path: str, **params: str | None) -> str:
    """A local URL with its query (empty values left out), escaped for an attribute."""
    query = urllib.parse.urlencode({k: v for k, v in params.items() if v})
    return _e(f"{path}?{query}" if query else path)


def _badge(status: str) -> str:
    """The mark of an entry that is not active (superseded, retired, archived)."""
    return "" if status == "active" else f' <span class="badge">{_e(status)}</span>'


def _entry_url(entry_id: str) -> str:
    return "/ui/entry/" + urllib.parse.quote(entry_id, safe="")


def _when(value: str | None) -> str:
    """An ISO time as a ``<time>`` element (UTC shown as such), or an em dash."""
    if not value:
        return "—"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return _e(value)
    if parsed.tzinfo is not None and parsed.utcoffset() == dt.timedelta(0):
        shown = parsed.strftime("%Y-%m-%d %H:%M UTC")
    elif len(value) <= 10:
        shown = value
    else:
        shown = parsed.strftime("%Y-%m-%d %H:%M")
    return f'<time datetime="{_e(value)}">{_e(shown)}</time>'


def _sha(sha: str | None) -> str:
    if not sha:
        return "—"
    if sha.startswith("mtime:"):
        return f"<span>file time {_when(sha[6:])}</span>"
    return f'<code title="{_e(sha)}">{_e(sha[:10])}</code>'


def _lines(start: int, end: int) -> str:
    return f"{start}" if start == end else f"{start}–{end}"


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def _facts(items: Iterable[tuple[str, str]], *, wide: bool = False) -> str:
    """A definition list of (label, already-escaped HTML) pairs."""
    cells = "".join(f"<div><dt>{_e(k)}</dt><dd>{v}</dd></div>" for k, v in items)
    return f'<dl class="facts{" wide" if wide else ""}">{cells}</dl>'


def _not_indexed(library: str) -> str:
    return f'<p class="hint">Not indexed yet — run <code>brainmap reindex {_e(library)}</code>.</p>'


# --- the GUI --------------------------------------------------------------------------------


class Gui:
    """The pages of one server: they read through ops; writes need the CSRF token."""

    def __init__(self, brain: ops.Brain, *, read_only: bool) -> None:
        self.brain = brain
        self.read_only = read_only
        self._secret = secrets.token_bytes(32)  # per app: a restart invalidates old forms

    # --- CSRF -------------------------------------------------------------------------------

    def csrf_token(self, action: str) -> str:
        """The token a form posting to ``action`` carries (bound to that path)."""
        return hmac.new(self._secret, b"csrf:" + action.encode("utf-8"), "sha256").hexdigest()

    def _csrf_ok(self, action: str, given: str | None) -> bool:
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.csrf_token(action).encode("ascii"))

    def _form(self, action: str, button: str, fields: str = "") -> str:
        """A POST form to ``action`` with its CSRF token; nothing when read-only."""
        if self.read_only:
            return ""
        return (
            f'<form method="post" action="{_e(action)}">'
            f'<input type="hidden" name="{CSRF_FIELD}" value="{_e(self.csrf_token(action))}">'
            f'<div class="row">{fields}<button type="submit">{_e(button)}</button></div></form>'
        )

    # --- layout -----------------------------------------------------------------------------

    def _page(self, title: str, body: str, *, current: str = "", status: int = 200) -> Response:
        links = [("/", "Library map", "home"), ("/ui/search", "Search", "search")]
        nav = "".join(
            f'<li><a href="{href}"{" aria-current=page" if key == current else ""}>{label}</a></li>'
            for href, label, key in links
        )
        mode = " · read-only" if self.read_only else ""
        document = (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)} · brainmap</title><style>{CSS}</style></head><body>"
            '<a class="skip" href="#main">Skip to main content</a>'
            '<header class="site"><div class="wrap"><a class="brand" href="/">brainmap</a>'
            f'<nav aria-label="Main"><ul>{nav}</ul></nav></div></header>'
            f'<main id="main" tabindex="-1" class="wrap">{body}</main>'
            f'<footer class="wrap">brainmap {_e(__version__)}{mode}</footer>'
            "</body></html>"
        )
        return HTMLResponse(document, status_code=status, headers=HEADERS)

    def error_page(self, status: int, message: str, hint: str | None = None) -> Response:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        body = (
            f"<h1>{_e(phrase)}</h1><p>{_e(message)}</p>"
            + (f'<p class="hint">{_e(hint)}</p>' if hint else "")
            + '<p><a href="/">Back to the library map</a></p>'
        )
        return self._page(phrase, body, status=status)

    def _safely(self, render: Callable[[], Response]) -> Response:
        """Run a page: a user error or bad input is an HTML page with its status, never a
        traceback."""
        try:
            return render()
        except Exception as exc:
            return self._failure(exc)

    def _failure(self, exc: Exception) -> Response:
        """The error page for what a page or form raised."""
        if isinstance(exc, UserError):
            return self.error_page(exc.status, exc.message, exc.hint)
        if isinstance(exc, ValidationError):
            return self.error_page(400, ops.describe_errors(exc.errors()))
        log.error("GUI request failed", exc_info=exc)
        return self.error_page(500, f"internal error: {type(exc).__name__}")

    # --- GET / ------------------------------------------------------------------------------

    def home(self, request: Request) -> Response:
        return self._safely(lambda: self._home(request))

    def _home(self, request: Request) -> Response:
        names = [lib.name for lib in self.brain.cfg.libraries]
        # every active block in one read (the `map` op gives lines, the cards want more)
        blocks = {b.library: b for b in libmap.blocks(self.brain.store) if b.library in names}
        cards = "".join(self._card(name, blocks.get(name)) for name in names)
        body = (
            "<h1>Library map</h1>"
            f'<p class="lead">{_plural(len(names), "library", "libraries")}: what each is about, its core '
            "entities and size. Open one to search inside it.</p>"
            + self._notice(request, names)
            + '<form role="search" method="get" action="/ui/search">'
            '<div class="row"><div class="field"><label for="q">Search every library</label>'
            '<input id="q" name="q" type="search" autocomplete="off"></div>'
            '<button type="submit">Search</button></div></form>'
            '<section aria-labelledby="libraries"><h2 id="libraries">Libraries</h2>'
            + (f'<ul class="cards">{cards}</ul>' if names else _no_libraries())
            + "</section>"
            + self._bridges(list(blocks.values()))
            + self._recompute_form(names)
        )
        return self._page("Library map", body, current="home")

    def _card(self, name: str, block: MapBlock | None) -> str:
        head = f'<h3><a href="{_url("/ui/search", library=name)}">{_e(name)}</a></h3>'
        if block is None:
            return f'<li class="card">{head}{_not_indexed(name)}</li>'
        if block.narrative:
            narrative = f"<p>{_e(block.narrative)}</p>"
        elif block.entries:
            narrative = '<p class="hint">No narrative yet: add a README.md to this library.</p>'
        else:
            narrative = '<p class="hint">No entries yet.</p>'

        entities = "".join(f"<li>{_e(e.name)}</li>" for e in block.top_entities)
        top = (
            f'<p class="meta">Top entities</p><ul class="chips">{entities}</ul>' if entities else ""
        )
        facts = [
            ("Entries", _e(block.entries)),
            ("Chunks", _e(block.chunks)),
            ("Triplets", _e(block.triplet_count)),
            ("Last change", _when(block.last_change)),
        ]
        if block.commit_hash:
            facts.append(("Commit", _sha(block.commit_hash)))
        shares = ", ".join(
            f"{_e(other)} ({_e(count)})" for other, count in block.bridged_libraries.items()
        )
        bridged = f'<p class="meta">Shares entities with {shares}</p>' if shares else ""
        return f'<li class="card">{head}{narrative}{top}{_facts(facts)}{bridged}</li>'

    def _bridges(self, blocks: Sequence[MapBlock]) -> str:
        """Pairs of libraries that share entities, with examples of what they share."""
        pairs: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
        for block in blocks:
            for other, count in block.bridged_libraries.items():
                pair = (min(block.library, other), max(block.library, other))
                known, examples = pairs.get(pair, (0, {}))
                for bridge in block.bridges:
                    if other in bridge.libraries:
                        examples.setdefault(bridge.key, bridge.name)
                pairs[pair] = (max(known, count), examples)
        items = []
        for (a, b), (count, examples) in sorted(pairs.items(), key=lambda p: (-p[1][0], p[0])):
            shown = ", ".join(
                f'<a href="{_url("/ui/search", q=name)}">{_e(name)}</a>'
                for name in list(examples.values())[:6]
            )
            items.append(
                f"<li><strong>{_e(a)}</strong> and <strong>{_e(b)}</strong> share "
                f"{_plural(count, 'entity', 'entities')}"
                + (f": {shown}" if shown else "")
                + "</li>"
            )
        content = (
            f'<ul class="plain">{"".join(items)}</ul>'
            if items
            else '<p class="hint">No two libraries share an entity yet.</p>'
        )
        return (
            f'<section aria-labelledby="bridges"><h2 id="bridges">Bridges</h2>{content}</section>'
        )

    def _recompute_form(self, names: list[str]) -> str:
        if self.read_only or not names:
            return ""
        options = '<option value="">All libraries</option>' + "".join(
            f'<option value="{_e(n)}">{_e(n)}</option>' for n in names
        )
        fields = (
            '<div class="field narrow"><label for="recompute-library">Library to recompute</label>'
            f'<select id="recompute-library" name="library">{options}</select></div>'
        )
        return (
            '<section aria-labelledby="recompute"><h2 id="recompute">Recompute the map</h2>'
            '<p class="hint">Blocks follow every reindex, save, collect and git-import; '
            "recompute by hand after changing the [map] settings, or to recompute the routing "
            "centroids exactly.</p>"
            + self._form("/ui/map/recompute", "Recompute map", fields)
            + "</section>"
        )

    def _notice(self, request: Request, names: list[str]) -> str:
        """The result of a recompute, after its redirect (only known library names shown)."""
        if request.query_params.get("done") != "recompute":
            return ""
        known = set(names)
        parts = []
        for key, label in (("recomputed", "Recomputed"), ("unchanged", "Unchanged"),
                           ("not_indexed", "Not indexed yet")):  # fmt: skip
            libs = [n for n in request.query_params.get(key, "").split(",") if n in known]
            if libs:
                parts.append(f"{label}: {_e(', '.join(libs))}.")
        text = " ".join(parts) or "Nothing to recompute."
        return f'<p class="notice" role="status">Map recompute done. {text}</p>'

    # --- GET /ui/search -----------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        return self._safely(lambda: self._search(request))

    def _search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        library = request.query_params.get("library", "").strip()
        names = [lib.name for lib in self.brain.cfg.libraries]
        if library and library not in names:
            return self.error_page(
                404, f"There is no library named {library!r}.",
                "Pick one from the library map.",
            )  # fmt: skip
        where = library or "every library"
        options = '<option value="">All libraries</option>' + "".join(
            f'<option value="{_e(n)}"{" selected" if n == library else ""}>{_e(n)}</option>'
            for n in names
        )
        form = (
            '<form role="search" method="get" action="/ui/search"><div class="row">'
            '<div class="field"><label for="q">Query</label>'
            f'<input id="q" name="q" type="search" value="{_e(query)}" autocomplete="off"></div>'
            '<div class="field narrow"><label for="library">Library</label>'
            f'<select id="library" name="library">{options}</select></div>'
            '<button type="submit">Search</button></div></form>'
        )
        if query:
            everywhere = request.query_params.get("route") == "off"
            content = self._results(query, library, route=not everywhere)
            title = f"{query} — search {where}"
        elif library:
            content = self._block(library)
            title = f"Library {library}"
        else:
            content = (
                '<p class="hint">Type a question or keywords. Any text works: quotes mark an '
                "exact phrase.</p>"
            )
            title = "Search"
        heading = f"Search {_e(library)}" if library else "Search every library"
        body = f"<h1>{heading}</h1>{form}{content}"
        return self._page(title, body, current="search")

    def _results(self, query: str, library: str, *, route: bool = True) -> str:
        result = ops.search(
            self.brain,
            ops.SearchInput.model_validate(
                {"query": query, "library": [library] if library else None, "limit": SEARCH_LIMIT,
                 "route": route}
            ),
            caller="http",  # usage: served over HTTP
        )  # fmt: skip
        warnings = (
            '<ul class="warnings">' + "".join(f"<li>{_e(w)}</li>" for w in result.warnings)
            + "</ul>"
            if result.warnings
            else ""
        )  # fmt: skip
        if result.routed is not None:
            everywhere = _url("/ui/search", q=query, route="off")
            warnings += (
                f'<p class="notice">Searched {_e(", ".join(result.routed))}: the libraries '
                f'nearest your query on the library map. <a href="{everywhere}">Search '
                "every library</a>.</p>"
            )
        if not result.hits:
            if result.match == "none" and query.strip():
                return warnings + (
                    f'<h2 id="results">No close match for “{_e(query)}”</h2>'
                    '<p class="hint">Nothing here holds its words or its meaning. Try other '
                    "words, or search every library.</p>"
                )
            return warnings + (
                f'<h2 id="results">No results for “{_e(query)}”</h2>'
                '<p class="hint">Try other words, or search every library.</p>'
            )
        items = []
        for hit in result.hits:
            anchor = f"{_entry_url(hit.id)}#L{hit.line_start}"
            heading = f" · {_e(hit.heading)}" if hit.heading and hit.heading != hit.title else ""
            items.append(
                f'<li><h3><a href="{_e(anchor)}">{_e(hit.title)}</a>{_badge(hit.status)}</h3>'
                f'<p class="meta">{_e(hit.library)} · '
                f"<code>{_e(hit.path)}:{_lines(hit.line_start, hit.line_end)}</code>{heading}"
                f"{'' if hit.match == 'strong' else f' · <em>{_e(hit.match)} match</em>'}</p>"
                f'<p class="snippet">{_e(hit.snippet)}</p></li>'
            )
        count = _plural(len(result.hits), "result")
        return (
            warnings + f'<h2 id="results">{count} for “{_e(query)}”</h2>'
            f'<ol class="results" aria-labelledby="results">{"".join(items)}</ol>'
        )

    def _block(self, library: str) -> str:
        """A library's map block in full (shown on its search page before any query)."""
        try:
            block = ops.get_map(self.brain, ops.MapLibraryInput(library=library))
        except UserError as exc:
            if exc.status != 404:
                raise
            return f"<h2>About {_e(library)}</h2>{_not_indexed(library)}"
        source = (
            f'<p class="meta">From <code>{_e(block.narrative_source)}</code></p>'
            if block.narrative_source
            else ""
        )
        narrative = f"<p>{_e(block.narrative)}</p>{source}" if block.narrative else ""
        entities = "".join(
            f'<li><a href="{_url("/ui/search", q=e.name, library=library)}">{_e(e.name)}</a>'
            f' <span class="meta">(degree {_e(e.degree)})</span></li>'
            for e in block.top_entities
        )
        profile = "".join(
            f'<tr><th scope="row">{_e(p)}</th><td class="num">{_e(n)}</td></tr>'
            for p, n in block.relation_profile.items()
        )
        bridges = "".join(
            f'<li><a href="{_url("/ui/search", q=b.name)}">{_e(b.name)}</a> — also in '
            + ", ".join(
                f'<a href="{_url("/ui/search", library=lib)}">{_e(lib)}</a>' for lib in b.libraries
            )
            + "</li>"
            for b in block.bridges
        )
        facts = _facts(
            [
                ("Entries", _e(block.entries)), ("Chunks", _e(block.chunks)),
                ("Triplets", _e(block.triplet_count)), ("Last change", _when(block.last_change)),
                ("Commit", _sha(block.commit_hash)), ("Map computed", _when(block.created_at)),
            ]
        )  # fmt: skip
        none = '<p class="hint">None yet.</p>'
        return (
            f'<section aria-labelledby="about"><h2 id="about">About {_e(library)}</h2>'
            f"{narrative}{facts}"
            "<h3>Top entities</h3>"
            + (f'<ul class="plain">{entities}</ul>' if entities else none)
            + "<h3>Relation profile</h3>"
            + (
                '<table><thead><tr><th scope="col">Predicate</th>'
                f'<th scope="col" class="num">Edges</th></tr></thead><tbody>{profile}</tbody>'
                "</table>"
                if profile
                else none
            )
            + "<h3>Bridges</h3>"
            + (f'<ul class="plain">{bridges}</ul>' if bridges else none)
            + "</section>"
        )

    # --- GET /ui/entry/{id} ---------------------------------------------------------------------

    def entry(self, request: Request) -> Response:
        return self._safely(lambda: self._entry(request))

    def _entry(self, request: Request) -> Response:
        entry_id = str(request.path_params["entry_id"])
        try:
            info = ops.get(self.brain, ops.GetInput(ref=entry_id), caller="http")
        except UserError as exc:
            if exc.status == 404:
                return self.error_page(404, f"There is no entry {entry_id!r}.",
                                       "Search for it, or start from the library map.")  # fmt: skip
            raise
        chain = GraphReader(self.brain.store).hops(
            [(info.library, info.path, info.source_rev)], 3, self.brain.cfg.graph.hop_commits
        )[0]
        notice = ""
        if request.query_params.get("done") == "verified":
            notice = (
                f'<p class="notice" role="status">Marked as verified '
                f"(last_verified: {_e(info.last_verified or '—')}).</p>"
            )
        tags = ", ".join(_e(t) for t in info.tags)
        subtitle = f"{_e(info.type)}" + (f" · tags: {tags}" if tags else "")
        chunks = "".join(
            f'<section class="chunk" id="L{c.line_start}" aria-labelledby="c{c.ord}">'
            f'<h3 id="c{c.ord}">{_e(c.heading or info.title)}</h3>'
            f'<p class="meta">Lines {_lines(c.line_start, c.line_end)}</p>'
            f"<pre>{_e(c.text)}</pre></section>"
            for c in info.chunks
        )
        action = _entry_url(info.id) + "/verify"
        verify = self._form(action, "Mark verified")
        verify_section = (
            '<section aria-labelledby="verify"><h2 id="verify">Verify</h2>'
            '<p class="hint">Checked that this entry is still true? Marking it verified sets '
            "<code>last_verified</code> to today in its frontmatter (nothing else changes).</p>"
            f"{verify}</section>"
            if verify
            else ""
        )
        links = "".join(
            f'<p class="notice">{label} <a href="{_e(_entry_url(o["id"]))}">{_e(o["title"])}</a>'
            f" ({_e(o['library'])}:<code>{_e(o['path'])}</code>){_badge(o['status'])}</p>"
            for label, linked in (
                ("Superseded by", info.superseded_by),
                ("Supersedes", info.supersedes),
            )
            for o in linked
        )
        body = (
            f"<h1>{_e(info.title)}{_badge(info.status)}</h1>"
            f'<p class="meta">{subtitle}</p>{notice}{links}'
            + "".join(f'<p class="warnings">{_e(w)}</p>' for w in info.warnings)
            + f'<section aria-labelledby="text"><h2 id="text">Text</h2>'
            f"{chunks or '<p class=hint>This entry has no text.</p>'}</section>"
            + self._provenance(info, chain)
            + self._neighbours(info.id)
            + verify_section
        )
        return self._page(info.title, body)

    def _provenance(self, info: EntryInfo, chain: Hops) -> str:
        lines = ", ".join(_lines(c.line_start, c.line_end) for c in info.chunks) or "—"
        facts = _facts(
            [
                ("Library", f'<a href="{_url("/ui/search", library=info.library)}">'
                            f"{_e(info.library)}</a>"),
                ("Path", f"<code>{_e(info.path)}</code>"),
                ("Lines", _e(lines)),
                ("File", f"<code>{_e(info.file)}</code>"),
                ("Source revision", _sha(info.source_rev)),
                ("Updated", _when(info.updated)),
                ("Created", _when(info.created)),
                ("Last verified", _when(info.last_verified) if info.last_verified else "never"),
            ],
            wide=True,
        )  # fmt: skip
        if chain.commits:
            commits = "".join(
                f"<li>{_sha(c.sha)} {_when(c.time)} — {_e(c.message.splitlines()[0] if c.message else '')}"
                + (f" — by {_e(c.author)}" if c.author else "")
                + "</li>"
                for c in chain.commits
            )
            people = ", ".join(
                f"{_e(p.name)} &lt;{_e(p.email)}&gt;" if p.email else _e(p.name)
                for p in chain.people or []
            )
            history = f'<h3>Commits</h3><ul class="plain">{commits}</ul>' + (
                f"<h3>Authors</h3><p>{people}</p>" if people else ""
            )
        else:
            history = (
                '<p class="hint">No git history for this file: in a git repository, run '
                "<code>brainmap git-import</code>.</p>"
            )
        return (
            '<section aria-labelledby="provenance"><h2 id="provenance">Provenance</h2>'
            f"{facts}{history}</section>"
        )

    def _neighbours(self, entry_id: str) -> str:
        try:
            walk = ops.neighbors(
                self.brain, ops.NeighborsInput.model_validate({"node": entry_id, "depth": 1})
            )
        except UserError:
            walk = None
        head = '<section aria-labelledby="neighbours"><h2 id="neighbours">Graph neighbours</h2>'
        if walk is None or not walk.edges:
            return head + '<p class="hint">This entry has no links in the graph.</p></section>'
        nodes = {n.key: n for n in [walk.center, *walk.nodes]}
        items = "".join(_edge_item(edge, walk.center.key, nodes) for edge in walk.edges)
        more = '<p class="hint">More neighbours were left out.</p>' if walk.truncated else ""
        return head + f'<ul class="edges">{items}</ul>{more}</section>'

    # --- POST forms -------------------------------------------------------------------------

    async def recompute(self, request: Request) -> Response:
        async def run(form: dict[str, str]) -> Response:
            library = form.get("library") or None
            report = await run_in_threadpool(
                ops.map_recompute, self.brain, ops.MapRecomputeInput(library=library)
            )
            target = "/?" + urllib.parse.urlencode(
                {"done": "recompute", "recomputed": ",".join(report.recomputed),
                 "unchanged": ",".join(report.unchanged),
                 "not_indexed": ",".join(report.not_indexed)}
            )  # fmt: skip
            return RedirectResponse(target, status_code=303)

        return await self._post(request, run)

    async def verify(self, request: Request) -> Response:
        entry_id = str(request.path_params["entry_id"])

        async def run(_: dict[str, str]) -> Response:
            result = await run_in_threadpool(ops.verify, self.brain, ops.VerifyInput(ref=entry_id))
            target = _entry_url(result.id or entry_id) + "?done=verified"
            return RedirectResponse(target, status_code=303)

        return await self._post(request, run)

    async def _post(
        self, request: Request, run: Callable[[dict[str, str]], Awaitable[Response]]
    ) -> Response:
        """Refuse when read-only or without this form's CSRF token (a body that is not a form
        has none); then run the write and answer with its redirect (Post/Redirect/Get)."""
        try:
            if self.read_only:
                return self.error_page(403, "This server is read-only: nothing can be changed.",
                                       "start `brainmap serve` without --read-only")  # fmt: skip
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            try:  # anything but a form has no token
                form = _parse_form(await request.body()) if kind == FORM_TYPE else {}
            except ValueError:
                return self.error_page(400, "The form could not be read.")
            if not self._csrf_ok(request.url.path, form.get(CSRF_FIELD)):
                return self.error_page(
                    403, "The form's security token is missing or out of date.",
                    "Reload the page and submit the form again.",
                )  # fmt: skip
            return await run(form)
        except Exception as exc:
            return self._failure(exc)

    def not_found(self, request: Request) -> Response:
        return self.error_page(404, f"There is no page at {request.url.path}.")

    def post_only(self, request: Request) -> Response:
        response = self.error_page(405, f"{request.url.path} only takes a form (POST).")
        response.headers["Allow"] = "POST"
        return response


def _no_libraries() -> str:
    return (
        '<p class="hint">No libraries yet: add one with '
        "<code>brainmap library add NAME PATH</code>, then <code>brainmap reindex</code>.</p>"
    )


def _parse_form(body: bytes) -> dict[str, str]:
    """An x-www-form-urlencoded body: the first value of each field (ValueError when it has
    too many fields)."""
    fields = urllib.parse.parse_qs(
        body.decode("latin-1"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
    )
    return {key: values[0] for key, values in fields.items()}


def _node_html(node: Node | None, key: str) -> str:
    """A neighbour: entries link to their page, entities and tags to a search."""
    if node is None:
        return f"<code>{_e(key)}</code>"
    label = _e(node.label or key)
    kind = f'<span class="kind">{_e(node.kind)}</span>'
    if node.kind == "entry":
        return f'{kind}<a href="{_e(_entry_url(key.partition(":")[2]))}">{label}</a>'
    if node.kind in ("entity", "tag"):
        return f'{kind}<a href="{_url("/ui/search", q=node.label)}">{label}</a>'
    if node.kind in ("file", "commit", "slug"):
        return f"{kind}<code>{label}</code>"
    return f"{kind}{label}"


def _edge_item(edge: Edge, center: str, nodes: dict[str, Node]) -> str:
    predicate = f"<em>{_e(edge.predicate.replace('_', ' '))}</em>"
    where = f' <span class="meta">(line {_e(edge.line)})</span>' if edge.line else ""
    if edge.subject == center:
        return f"<li>{predicate} {_node_html(nodes.get(edge.object), edge.object)}{where}</li>"
    if edge.object == center:
        subject = _node_html(nodes.get(edge.subject), edge.subject)
        return f"<li>{subject} {predicate} this entry{where}</li>"
    return (
        f"<li>{_node_html(nodes.get(edge.subject), edge.subject)} {predicate} "
        f"{_node_html(nodes.get(edge.object), edge.object)}{where}</li>"
    )


def install(app: Starlette, brain: ops.Brain, *, read_only: bool) -> Gui:
    """Mount the GUI's routes on ``app`` (none of them in the OpenAPI document)."""
    gui = Gui(brain, read_only=read_only)
    routes: list[tuple[str, Callable[[Request], Any], list[str]]] = [
        ("/", gui.home, ["GET"]),
        ("/ui/search", gui.search, ["GET"]),
        ("/ui/entry/{entry_id}", gui.entry, ["GET"]),
        ("/ui/map/recompute", gui.recompute, ["POST"]),
        ("/ui/entry/{entry_id}/verify", gui.verify, ["POST"]),
        ("/ui/map/recompute", gui.post_only, ["GET"]),
        ("/ui/entry/{entry_id}/verify", gui.post_only, ["GET"]),
        ("/ui/{rest:path}", gui.not_found, ["GET"]),
    ]
    for path, endpoint, methods in routes:
        app.add_route(path, endpoint, methods=methods, include_in_schema=False)
    return gui
