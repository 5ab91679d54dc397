"""The web GUI (issues 6 and 9) of a real `brainmap serve`: the library map as home page,
search with filters, highlights, score parts and pages, entries with provenance, neighbours
and their status, the save form, the diary by day and week, usage; driven by Debian's chromium
through Playwright at laptop and phone sizes, with and without JavaScript; its forms and CSRF
(RELIABILITY 13); escaping; HTML errors."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pygit2
import pytest
from playwright.sync_api import Browser, Dialog, expect

from brainmap import config as config_mod
from brainmap import ops
from brainmap.server import openapi_document
from conftest import serving, write
from gui_fixtures import (
    LAPTOP,
    PHONE,
    commit_all,
    console_errors,
    shot,
    shots_folder,
    tab_without_focus_ring,
    unlabelled,
)

XSS_TITLE = '<script>alert(1)</script> "><img src=x onerror=alert(1)>'
XSS_TAG = "<i>x</i>"  # short enough to be a name the map shows
RAW_TAGS = ("<script>alert(1)</script>", "<img src=x", '"><img', XSS_TAG)
RUNBOOK_STEPS = 24  # more than a page of results (the GUI shows 20)
DIARY = "demo"


@dataclass
class Site:
    home: Path
    root: Path
    backups: str  # entry ids
    pool: str
    xss: str
    old_pool: str  # superseded by pool


def _day(day: str, *sections: str) -> str:
    """A diary day file as the hooks write it."""
    head = (f'---\ntitle: "{DIARY} diary {day}"\ntype: diary\nproject: "{DIARY}"\n'
            f"created: {day}\n---\n# {DIARY}, {day}\n")  # fmt: skip
    return head + "".join(f"\n{s}\n" for s in sections)


def build_site(root: Path) -> Site:
    """Two tiny libraries sharing the entity Postgres (infra under git, with history
    imported), indexed; and a third library added but not indexed yet. webapp has a
    superseded entry; the global library a runbook of more steps than a page of results, and
    the diary of the project demo: two days in one week (rolled up), one in the next (not)."""
    infra, webapp, later = root / "infra", root / "webapp", root / "later"
    write(infra / "README.md", "# Infra\n\nHow we run the databases and the deploy pipeline.\n")
    write(
        infra / "postgres-backups.md",
        "---\ntitle: Postgres backups\ntags: [backup]\n---\n# Postgres backups\n\n"
        "Nightly pg_dump of [[Postgres]] to the [[Backup bucket]].\n\n## Restore\n\n"
        "Restore with pg_restore into a fresh [[Postgres]] cluster.\n",
    )
    write(webapp / "README.md", "# Webapp\n\nNotes of the web team: the connection pool.\n")
    write(
        webapp / "pool.md",
        "---\ntitle: Connection pool exhaustion\ntype: gotcha\n---\n"
        "# Connection pool exhaustion\n\nThe app holds 20 connections to [[Postgres]]; "
        "raise max_connections first.\n",
    )
    write(
        webapp / "xss.md",
        f"---\ntitle: '{XSS_TITLE}'\ntags: ['{XSS_TAG}']\n---\n# <script>alert(1)</script>\n\n"
        'Payload "><img src=x onerror=alert(1)> beside [[Postgres]].\n',
    )
    write(
        webapp / "pool-old.md",
        "---\ntitle: Connection pool sizing (old)\n---\n# Connection pool sizing (old)\n\n"
        "Ten connections were enough. Now see [[Connection pool exhaustion]].\n",
    )
    write(later / "note.md", "# Later\n\nNot indexed yet.\n")
    pygit2.init_repository(str(infra))
    commit_all(infra, "Add backup notes")
    home = root / "home"
    with ops.Brain(home) as brain:
        own = brain.cfg.library("brain").path  # the global library: its card is not looked at
        for n in range(1, RUNBOOK_STEPS + 1):
            write(own / f"runbook/step-{n:02d}.md",
                  f"# Deploy runbook step {n}\n\nStep {n} of the deploy runbook: tick box {n}.\n")  # fmt: skip
        days = own / "diary" / DIARY / "2026/01"
        write(days / "05.md", _day("2026-01-05", "## 10:00–10:40 session a1b2c3d4\n"
                                   "- Asked: fix the `pg_dump` cron job\n- Edited: `backup.sh` ×2"))  # fmt: skip
        write(days / "07.md", _day("2026-01-07", "## 09:15–09:30 session e5f6a7b8\n"
                                   "- Asked: check the <b>restore</b> drill"))  # fmt: skip
        for name in ("infra", "webapp"):
            ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(root / name)))
        ops.reindex(brain, ops.ReindexInput())
        ops.git_import(brain, ops.GitImportInput())
        ops.supersede(brain, ops.SupersedeInput(old="webapp:pool-old.md", new="webapp:pool.md"))
        ops.diary_rollup(brain, ops.DiaryRollupInput(project=DIARY))
        write(days / "13.md", _day("2026-01-13", "## 16:00–16:05 session c9d0e1f2\n"
                                   "- Ran: `make release`"))  # fmt: skip
        other = own / "diary" / "other" / "2025/12/01.md"  # older: demo is shown first
        write(other, _day("2025-12-01", "## 08:00–08:10 session f3a4b5c6\n- Asked: plan the year"))
        ops.library_add(brain, ops.LibraryAddInput(name="later", path=str(later)))
        ids = {
            ref: ops.get(brain, ops.GetInput(ref=ref)).id
            for ref in ("infra:postgres-backups.md", "webapp:pool.md", "webapp:xss.md",
                        "webapp:pool-old.md")
        }  # fmt: skip
    return Site(home, root, *ids.values())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, str]]:
    """One indexed home served for the read-only tests of this module."""
    root = tmp_path_factory.mktemp("gui")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(root / "user-home"))
        mp.setenv("BRAINMAP_HOME", str(root / "home"))
        built = build_site(root)
        with serving(built.home) as url:
            yield built, url


# --- the browser journey --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "viewport", "javascript"),
    [("laptop", LAPTOP, True), ("phone", PHONE, True), ("phone-no-js", PHONE, False)],
)
def test_browser_journey(
    site: tuple[Site, str],
    browser: Browser,
    tmp_path: Path,
    name: str,
    viewport: dict[str, int],
    javascript: bool,
) -> None:
    """Home -> a library card -> a search scoped to it -> a result -> the entry."""
    built, url = site
    phone = viewport is PHONE
    context = browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        is_mobile=phone,
        has_touch=phone,
        java_script_enabled=javascript,
    )
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:  # an alert() would mean injected script ran
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    errors = console_errors(page)
    shots = shots_folder(tmp_path, f"journey-{name}")

    page.goto(f"{url}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Library map")
    assert page.locator("html").get_attribute("lang") == "en"
    cards = page.locator("ul.cards > li.card")
    expect(cards).to_have_count(4)  # brain (the global library), infra, webapp, later
    infra_card = cards.filter(has=page.get_by_role("link", name="infra", exact=True))
    expect(infra_card).to_contain_text("How we run the databases")
    expect(infra_card).to_contain_text("Postgres")
    later_card = cards.filter(has=page.get_by_role("link", name="later", exact=True))
    expect(later_card).to_contain_text("Not indexed yet — run brainmap reindex later")
    bridges = page.get_by_role("region", name="Bridges")
    expect(bridges).to_contain_text("infra and webapp share 1 entity: Postgres")
    boxes = [box for box in (c.bounding_box() for c in cards.all()) if box]
    if phone:  # cards stack
        assert len({round(b["x"]) for b in boxes}) == 1
    else:  # side by side
        assert len({round(b["y"]) for b in boxes}) < len(boxes)
    shot(page, shots, "1-home")
    if javascript:  # the skip link is the first stop of the keyboard
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to main content")).to_be_focused()

    page.get_by_role("link", name="infra", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Search infra")
    about = page.get_by_role("region", name="About infra")
    expect(about).to_contain_text("How we run the databases")
    expect(about).to_contain_text("(degree")
    expect(about.get_by_role("table")).to_contain_text("links_to")
    expect(page.get_by_label("Library")).to_have_value("infra")
    shot(page, shots, "2-library")

    page.get_by_label("Query").fill("restore the backup")
    page.get_by_role("button", name="Search").click()
    results = page.locator("ol.results > li")
    expect(results.first).to_be_visible()
    assert "library=infra" in page.url
    for meta in results.locator("p.meta").all_inner_texts():
        assert meta.startswith("infra ·"), meta  # scoped to the library
    expect(page.locator("ol.results")).to_contain_text("postgres-backups.md:9–11")
    shot(page, shots, "3-results")

    page.get_by_role("link", name="Postgres backups").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Postgres backups")
    expect(page.get_by_role("region", name="Text")).to_contain_text("Restore with pg_restore")
    provenance = page.get_by_role("region", name="Provenance")
    for text in ("infra", "postgres-backups.md", "5–7, 9–11", "Add backup notes", "Ada Lovelace"):
        expect(provenance).to_contain_text(text)
    neighbours = page.get_by_role("region", name="Graph neighbours")
    expect(neighbours).to_contain_text("links to")
    postgres = neighbours.get_by_role("link", name="Postgres", exact=True)
    assert postgres.get_attribute("href") == "/ui/search?q=Postgres"
    shot(page, shots, "4-entry")

    postgres.click()  # an entity neighbour leads back to a search
    expect(page.locator("ol.results")).to_contain_text("Connection pool exhaustion")

    page.goto(f"{url}/ui/entry/{built.xss}")
    expect(page.get_by_role("heading", level=1)).to_have_text(XSS_TITLE)
    expect(page.locator("img")).to_have_count(0)
    shot(page, shots, "5-hostile-entry")
    assert dialogs == [] and errors == []
    context.close()


# --- forms and CSRF (RELIABILITY 13) ----------------------------------------------------------


class _Forms(HTMLParser):
    """Every <form method="post"> of a page: (action, the fields it would submit)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "get").lower() == "post":
            self.forms.append((a["action"], {}))
        elif not self.forms:
            return
        elif tag == "input" and "name" in a:
            self.forms[-1][1][a["name"]] = a.get("value", "")
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select is not None:
            self.forms[-1][1].setdefault(self._select, a.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def _post_forms(html_text: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Forms()
    parser.feed(html_text)
    return parser.forms


def test_every_form_is_protected_against_csrf(tmp_path: Path, browser: Browser) -> None:
    built = build_site(tmp_path)
    with ops.Brain(built.home) as brain:
        old_head = ops.get_map(brain, ops.MapLibraryInput(library="infra")).commit_hash
    new_head = commit_all(tmp_path / "infra", "Move HEAD")  # a recompute now writes a new block
    with serving(built.home) as url:
        forms = _post_forms(httpx.get(f"{url}/").text)
        forms += _post_forms(httpx.get(f"{url}/ui/entry/{built.backups}").text)
        verify_action = f"/ui/entry/{built.backups}/verify"
        assert [action for action, _ in forms] == ["/ui/map/recompute", verify_action]
        tokens = {action: fields["csrf_token"] for action, fields in forms}
        today = dt.date.today().isoformat()

        def effect(action: str) -> str | None:
            """What the form changes: the map block's commit, or the entry's last_verified."""
            with ops.Brain(built.home) as brain:
                if action == verify_action:
                    return ops.get(brain, ops.GetInput(ref=built.backups)).last_verified
                return ops.get_map(brain, ops.MapLibraryInput(library="infra")).commit_hash

        before = {"/ui/map/recompute": old_head, verify_action: None}
        after = {"/ui/map/recompute": new_head, verify_action: today}
        same_origin = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
        with httpx.Client(base_url=url, follow_redirects=False) as client:
            for action, fields in forms:
                refusals = [
                    (fields, {"Sec-Fetch-Site": "cross-site"}),
                    (fields, {"Origin": "http://evil.example"}),
                    (fields, {"Origin": "null"}),
                    ({k: v for k, v in fields.items() if k != "csrf_token"}, same_origin),
                    ({**fields, "csrf_token": "0" * 64}, same_origin),
                    ({**fields, "csrf_token": ""}, same_origin),
                    # a token is bound to its form's action
                    ({**fields, "csrf_token": next(t for a, t in tokens.items() if a != action)},
                     same_origin),
                ]  # fmt: skip
                for data, headers in refusals:
                    refused = client.post(action, data=data, headers=headers)
                    assert refused.status_code == 403, (action, headers, data)
                    assert "access-control-allow-origin" not in refused.headers
                assert effect(action) == before[action]  # nothing happened
                done = client.post(action, data=fields, headers=same_origin)
                assert done.status_code == 303, done.text
                assert effect(action) == after[action]
                shown = client.get(done.headers["location"])
                assert shown.status_code == 200 and 'role="status"' in shown.text
                if action == "/ui/map/recompute":
                    assert done.headers["location"].startswith("/?done=recompute")
                    assert "Recomputed: infra" in shown.text  # its git HEAD moved
        assert f"last_verified: {today}" in (tmp_path / "infra/postgres-backups.md").read_text()
        # a GET never writes, and CORS stays off
        assert httpx.get(f"{url}/ui/map/recompute").status_code == 405
        preflight = httpx.options(
            f"{url}/ui/map/recompute",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in preflight.headers
        # and a real browser's same-origin forms get through
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{url}/ui/entry/{built.pool}")
        page.get_by_role("button", name="Mark verified").click()
        expect(page.get_by_role("status")).to_contain_text(f"last_verified: {today}")
        page.goto(f"{url}/")
        page.get_by_label("Library to recompute").select_option("webapp")
        page.get_by_role("button", name="Recompute map").click()
        expect(page.get_by_role("status")).to_contain_text("Map recompute done.")
        context.close()


def test_read_only_server_offers_no_form_and_refuses_posts(site: tuple[Site, str]) -> None:
    built, _ = site
    with serving(built.home, "--read-only") as url:
        pages = [httpx.get(f"{url}/"), httpx.get(f"{url}/ui/entry/{built.backups}"),
                 httpx.get(f"{url}/ui/save")]  # fmt: skip
        for page in pages:
            assert page.status_code == 200 and "read-only" in page.text
            assert _post_forms(page.text) == [] and "csrf_token" not in page.text
        same_origin = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
        for action in ("/ui/map/recompute", f"/ui/entry/{built.backups}/verify", "/ui/save"):
            refused = httpx.post(
                f"{url}{action}", data={"csrf_token": "x", "library": ""}, headers=same_origin
            )
            assert refused.status_code == 403 and "read-only" in refused.text
            assert refused.headers["content-type"].startswith("text/html")
    with ops.Brain(built.home) as brain:
        assert ops.get(brain, ops.GetInput(ref=built.backups)).last_verified is None


# --- escaping, errors, headers ----------------------------------------------------------------


def test_hostile_text_is_escaped_everywhere(site: tuple[Site, str]) -> None:
    built, url = site
    pages = {
        "home": httpx.get(f"{url}/"),
        "library": httpx.get(f"{url}/ui/search", params={"library": "webapp"}),
        "results": httpx.get(f"{url}/ui/search", params={"q": "alert onerror payload"}),
        "entry": httpx.get(f"{url}/ui/entry/{built.xss}"),
        "query": httpx.get(f"{url}/ui/search", params={"q": XSS_TITLE}),
        "bad library": httpx.get(f"{url}/ui/search", params={"library": XSS_TITLE}),
        "bad entry": httpx.get(f"{url}/ui/entry/{XSS_TITLE}"),
    }
    for name, page in pages.items():
        assert page.headers["content-type"].startswith("text/html"), name
        for raw in RAW_TAGS:
            assert raw not in page.text, f"{name} shows {raw!r} unescaped"
        assert "<script" not in page.text.lower(), name  # the GUI serves no script at all
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
    # Jinja's escaping writes quotes as numeric references
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert f"<h1>{escaped}</h1>" in pages["entry"].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages["results"].text
    # the tag is one of webapp's top entities (the title is too long to be one: a sentence)
    assert "&lt;i&gt;x&lt;/i&gt;" in pages["home"].text


def test_nonsense_is_no_close_match_not_twenty_results(site: tuple[Site, str]) -> None:
    _, url = site
    for nonsense in ("qwxzv plokjh", "?!...;;"):
        page = httpx.get(f"{url}/ui/search", params={"q": nonsense})
        assert page.status_code == 200 and "No close match for" in page.text, nonsense
        assert 'class="results"' not in page.text, nonsense
    found = httpx.get(f"{url}/ui/search", params={"q": "postgres backups"})
    assert 'class="results"' in found.text and "No close match" not in found.text


def test_unknown_library_entry_or_page_is_an_html_404(site: tuple[Site, str]) -> None:
    _, url = site
    cases = {
        "/ui/search?library=nope": "There is no library named &#39;nope&#39;.",
        "/ui/search?library=nope&q=postgres": "There is no library named",
        "/ui/entry/0123456789abcdef": "There is no entry &#39;0123456789abcdef&#39;.",
        "/ui/nowhere": "There is no page at /ui/nowhere.",
    }
    for path, message in cases.items():
        page = httpx.get(f"{url}{path}")
        assert page.status_code == 404, path
        assert page.headers["content-type"].startswith("text/html"), path
        assert "<h1>Not Found</h1>" in page.text and message in page.text, path
    # the REST API keeps its problem documents
    assert httpx.get(f"{url}/get/0123456789abcdef").headers["content-type"] == (
        "application/problem+json"
    )


def test_keyboard_focus_is_visible_on_every_page(site: tuple[Site, str], browser: Browser) -> None:
    built, url = site
    pages = ["/", "/ui/search?q=postgres", f"/ui/entry/{built.backups}", "/ui/save",
             "/ui/diary", "/ui/usage", "/ui/ask?q=which+port", "/ui/audit",
             "/ui/graph?node=entity%3Apostgres"]  # fmt: skip
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        for path in pages:
            page.goto(f"{url}{path}")
            assert not unlabelled(page), path
            assert not tab_without_focus_ring(page), path
    finally:
        context.close()


def test_refusals_on_gui_paths_are_html_pages(site: tuple[Site, str]) -> None:
    _, url = site
    refused = {
        # a method the page does not answer
        ("POST", "/ui/search", None, None): 405,
        ("PUT", "/ui/save", None, None): 405,
        # the guard: another site, a foreign origin, a body past the limit
        ("POST", "/ui/save", "cross-site", None): 403,
        ("POST", "/ui/save", None, "http://evil.example"): 403,
    }
    for (method, path, fetch_site, origin), status in refused.items():
        headers = {k: v for k, v in {"Sec-Fetch-Site": fetch_site, "Origin": origin}.items() if v}
        page = httpx.request(method, f"{url}{path}", headers=headers)
        assert page.status_code == status, (method, path)
        assert page.headers["content-type"].startswith("text/html"), (method, path)
        assert "<h1>" in page.text and "Content-Security-Policy" in page.headers, (method, path)
    huge = httpx.post(f"{url}/ui/save", content=b"x" * (3 * 1024 * 1024),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert huge.status_code == 413 and huge.headers["content-type"].startswith("text/html")
    # the REST API keeps its problem documents for the same refusals
    api = httpx.post(f"{url}/search", headers={"Origin": "http://evil.example"}, json={})
    assert api.status_code == 403 and api.headers["content-type"] == "application/problem+json"


def test_gui_routes_stay_out_of_the_openapi_document(site: tuple[Site, str]) -> None:
    built, _ = site
    with ops.Brain(built.home) as brain:
        paths = set(openapi_document(brain)["paths"])
    assert "/" not in paths and not any(p.startswith("/ui") for p in paths)


# --- search: filters, highlights, markdown, match levels, score parts, pages ---------------------

_TITLE = re.compile(r'<li><h3><a href="[^"]+">([^<]+)</a>')


def _titles(url: str, **params: str) -> list[str]:
    page = httpx.get(f"{url}/ui/search", params=params)
    assert page.status_code == 200, page.text
    return _TITLE.findall(page.text)


def test_search_filters_narrow_the_hits(site: tuple[Site, str]) -> None:
    _, url = site
    # (a hit is a chunk: an entry may come more than once)
    assert set(_titles(url, q="postgres", type="gotcha")) == {"Connection pool exhaustion"}
    assert set(_titles(url, q="postgres", tag="backup")) == {"Postgres backups"}
    tomorrow = (dt.date.today() + dt.timedelta(days=1)).isoformat()
    assert _titles(url, q="postgres backups", since=tomorrow) == []
    assert "Postgres backups" in _titles(url, q="postgres backups", since="30d")
    for mode, missing in (("bm25", "Vector rank"), ("vector", "BM25 rank")):
        page = httpx.get(f"{url}/ui/search", params={"q": "postgres backups", "mode": mode})
        assert "Postgres backups" in _TITLE.findall(page.text), mode
        assert f'<option value="{mode}" selected>' in page.text  # the form shows it back
        # the part the mode does not rank by is empty
        assert f"<dt>{missing}</dt><dd>—</dd>" in page.text, mode
    wrong = httpx.get(f"{url}/ui/search", params={"q": "postgres", "since": "last tuesday"})
    assert wrong.status_code == 400 and 'role="alert"' in wrong.text
    assert "not a date" in wrong.text and 'value="last tuesday"' in wrong.text  # input kept
    assert 'class="results"' not in wrong.text


def test_hits_are_highlighted_rendered_and_explained(site: tuple[Site, str]) -> None:
    built, url = site
    page = httpx.get(f"{url}/ui/search", params={"q": "nightly postgres dump"}).text
    hit = page[page.index("Postgres backups</a>") :].split("</li>")[0]
    # the query's words marked; the wiki link a link to what it names, its text marked too
    assert "<mark>Nightly</mark>" in hit
    assert '<a href="/ui/wiki/Postgres"><mark>Postgres</mark></a>' in hit
    assert "[[" not in hit
    assert '<span class="match match-strong">strong match</span>' in hit
    assert "<summary>Score parts</summary>" in hit
    for part in ("Score", "BM25 rank", "Vector rank", "Similarity", "Term coverage",
                 "Recency decay"):  # fmt: skip
        assert f"<dt>{part}</dt>" in hit, part
    # a wiki link leads to the entry that describes what it names, else to a search
    to_entry = httpx.get(f"{url}/ui/wiki/Connection pool exhaustion", follow_redirects=False)
    assert to_entry.status_code == 303
    assert to_entry.headers["location"] == f"/ui/entry/{built.pool}"
    to_search = httpx.get(f"{url}/ui/wiki/Postgres", follow_redirects=False)
    assert to_search.headers["location"] == "/ui/search?q=Postgres"


def test_inactive_entries_are_marked(site: tuple[Site, str]) -> None:
    built, url = site
    assert "Connection pool sizing (old)" not in _titles(url, q="connection pool sizing")
    page = httpx.get(f"{url}/ui/search", params={"q": "connection pool sizing", "inactive": "1"})
    old = page.text[page.text.index("Connection pool sizing (old)</a>") :].split("</h3>")[0]
    assert '<span class="badge">superseded</span>' in old
    assert 'id="inactive" name="inactive" type="checkbox" value="1" checked' in page.text
    entry = httpx.get(f"{url}/ui/entry/{built.old_pool}").text
    assert '<h1>Connection pool sizing (old) <span class="badge">superseded</span></h1>' in entry
    assert f'Superseded by <a href="/ui/entry/{built.pool}">Connection pool exhaustion</a>' in entry
    newer = httpx.get(f"{url}/ui/entry/{built.pool}").text
    assert f'Supersedes <a href="/ui/entry/{built.old_pool}">' in newer


def test_results_come_in_pages(site: tuple[Site, str]) -> None:
    _, url = site
    query = {"q": "deploy runbook step", "mode": "bm25", "library": "brain"}
    first = httpx.get(f"{url}/ui/search", params=query).text
    assert len(_TITLE.findall(first)) == 20 and "20 results for" in first
    assert 'rel="next"' in first and 'rel="prev"' not in first
    next_url = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert next_url is not None
    second = httpx.get(url + next_url.group(1).replace("&amp;", "&")).text
    shown = _TITLE.findall(second)
    assert 1 <= len(shown) <= RUNBOOK_STEPS - 20 + 1 and 'start="21"' in second
    assert not set(shown) & set(_TITLE.findall(first))  # the next hits, none again
    assert "Results 21–" in second and 'rel="prev"' in second
    beyond = httpx.get(f"{url}/ui/search", params={**query, "page": "3"}).text
    assert "No more results for" in beyond and "Back to the first page" in beyond


def test_search_in_a_browser(site: tuple[Site, str], browser: Browser, tmp_path: Path) -> None:
    _, url = site
    for size, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        page = context.new_page()
        errors = console_errors(page)
        shots = shots_folder(tmp_path, f"search-{size}")
        page.goto(f"{url}/ui/search?q=postgres")
        page.get_by_text("Filters").click()
        page.get_by_label("Type").fill("gotcha")
        page.get_by_label("Ranking").select_option("bm25")
        page.get_by_role("button", name="Search").click()
        results = page.locator("ol.results > li")
        expect(results).to_have_count(1)
        expect(results.first).to_contain_text("Connection pool exhaustion")
        assert "type=gotcha" in page.url and "mode=bm25" in page.url
        results.first.get_by_text("Score parts").click()
        expect(results.first.locator("details dl")).to_be_visible()
        expect(results.first.locator("mark").first).to_have_text("Postgres")
        shot(page, shots, "filtered")
        page.goto(f"{url}/ui/search?q=deploy+runbook+step&mode=bm25")
        page.get_by_role("link", name="Next page").click()
        expect(page.get_by_role("heading", level=2)).to_contain_text("Results 21–")
        shot(page, shots, "page-2")
        assert errors == []
        context.close()


# --- the save form --------------------------------------------------------------------------------


def _token(url: str, path: str) -> str:
    [(action, fields)] = _post_forms(httpx.get(f"{url}{path}").text)
    assert action == path
    return fields["csrf_token"]


def test_save_form_errors_keep_the_input(site: tuple[Site, str]) -> None:
    _, url = site
    same_origin = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
    token = _token(url, "/ui/save")
    [(_, recompute)] = _post_forms(httpx.get(f"{url}/").text)
    body = "Kept <b>text</b> & more"
    with httpx.Client(base_url=url, headers=same_origin, follow_redirects=False) as client:
        # no token, a wrong one, another form's
        for refused in (None, "0" * 64, recompute["csrf_token"]):
            data = {"title": "x"} | ({"csrf_token": refused} if refused else {})
            assert client.post("/ui/save", data=data).status_code == 403, refused
        cross = client.post("/ui/save", data={"title": "x", "csrf_token": token},
                            headers={"Sec-Fetch-Site": "cross-site"})  # fmt: skip
        assert cross.status_code == 403
        blank = client.post("/ui/save", data={"csrf_token": token, "title": "  ", "body": body,
                                              "tags": "a, b", "library": "webapp"})  # fmt: skip
        assert blank.status_code == 400 and 'role="alert"' in blank.text
        assert "Title: " in blank.text and "visible text" in blank.text
        assert "Kept &lt;b&gt;text&lt;/b&gt; &amp; more</textarea>" in blank.text
        assert 'value="a, b"' in blank.text and '<option value="webapp" selected>' in blank.text
        nowhere = client.post("/ui/save", data={"csrf_token": token, "title": "Somewhere",
                                                "library": "nowhere"})  # fmt: skip
        assert nowhere.status_code == 404 and "nowhere" in nowhere.text
        assert 'value="Somewhere"' in nowhere.text
        bad_type = client.post("/ui/save", data={"csrf_token": token, "title": "Typed",
                                                 "type": "no spaces allowed"})  # fmt: skip
        assert bad_type.status_code == 400 and "Type: " in bad_type.text


def test_save_form_saves_and_stops_at_a_duplicate(
    site: tuple[Site, str], browser: Browser, tmp_path: Path
) -> None:
    _, url = site
    notes = {  # two different notes: the second is no near-duplicate of the first
        "laptop": ("Rotate the deploy key every quarter",
                   "Run `make rotate-key`, then update [[Vault]].\n\nThe old key stops at once."),
        "phone": ("Check the SSH host keys after a restore",
                  "A restored VM has new host keys: compare them with the ones in [[Vault]]."),
    }  # fmt: skip
    for size, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        title, body = notes[size]
        context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        page = context.new_page()
        errors = console_errors(page)
        shots = shots_folder(tmp_path, f"save-{size}")
        page.goto(f"{url}/")
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Save").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Save an entry")
        shot(page, shots, "form")
        page.get_by_label("Title").fill(title)
        page.get_by_label("Text (markdown)").fill(body)
        page.get_by_label("Library").select_option("webapp")
        page.get_by_label("Type").fill("gotcha")
        page.get_by_label("Tags").fill("deploy, keys")
        page.get_by_role("button", name="Save entry").click()
        expect(page.get_by_role("heading", level=1)).to_have_text(title)
        expect(page.get_by_role("status")).to_contain_text("Saved to webapp")
        expect(page.locator("p.meta").first).to_contain_text("gotcha · tags: deploy, keys")
        shot(page, shots, "saved")
        if size == "laptop":  # the same again: stopped, the near-duplicate offered
            page.goto(f"{url}/ui/save")
            page.get_by_label("Title").fill(title)
            page.get_by_label("Text (markdown)").fill(body)
            page.get_by_label("Library").select_option("webapp")
            page.get_by_role("button", name="Save entry").click()
            expect(page.get_by_role("alert")).to_contain_text("The entry was not saved")
            similar = page.get_by_role("region", name="Similar entries")
            expect(similar.get_by_role("link", name=title)).to_be_visible()
            expect(page.get_by_label("Title")).to_have_value(title)
            shot(page, shots, "duplicate")
            page.get_by_label("Save as a new entry anyway").check()
            page.get_by_role("button", name="Save entry").click()
            expect(page.get_by_role("status")).to_contain_text("Saved to webapp")
            page.goto(f"{url}/ui/save")  # a third time: added to one of them instead
            page.get_by_label("Title").fill(title)
            page.get_by_label("Text (markdown)").fill(body)
            page.get_by_label("Library").select_option("webapp")
            page.get_by_role("button", name="Save entry").click()
            page.get_by_label("Add to an existing entry").select_option(index=1)
            page.get_by_role("button", name="Save entry").click()
            expect(page.get_by_role("status")).to_contain_text("Added as a dated section")
            expect(page.get_by_role("region", name="Text")).to_contain_text("make rotate-key")
        assert errors == []
        context.close()


# --- the diary and usage --------------------------------------------------------------------------


def test_diary_by_day_and_by_week(site: tuple[Site, str]) -> None:
    _, url = site
    index = httpx.get(f"{url}/ui/diary").text
    assert f"{DIARY}: 3 days in 2 weeks" in index
    assert f'<a href="/ui/diary/{DIARY}/2026-W03">Week 2026-W03</a>' in index
    assert index.index("2026-W03") < index.index("2026-W02")  # newest first
    day = httpx.get(f"{url}/ui/diary/{DIARY}/2026-01-05").text
    assert f"<h1>{DIARY}, day 2026-01-05</h1>" in day
    assert "fix the <code>pg_dump</code> cron job" in day
    assert f'href="/ui/diary/{DIARY}/2026-01-07" rel="next"' in day and 'rel="prev"' not in day
    assert f'<a href="/ui/diary/{DIARY}/2026-W02">Week 2026-W02</a>' in day
    hostile = httpx.get(f"{url}/ui/diary/{DIARY}/2026-01-07").text
    assert "check the &lt;b&gt;restore&lt;/b&gt; drill" in hostile
    week = httpx.get(f"{url}/ui/diary/{DIARY}/2026-W02").text
    assert f"<code>diary/{DIARY}/2026-W02.md</code>" in week  # the rollup
    assert "2026-01-05 to 2026-01-11" in week
    # the rollup's links to its days lead to their pages
    assert f'<a href="/ui/diary/{DIARY}/2026-01-05">2026-01-05</a>' in week
    assert "](2026/01/05.md)" not in week
    unrolled = httpx.get(f"{url}/ui/diary/{DIARY}/2026-W03").text
    assert "no rollup yet" in unrolled and "<code>make release</code>" in unrolled
    for path, status in ((f"/ui/diary/{DIARY}/2026-01-06", 404), ("/ui/diary/nobody/2026-01-05", 404),
                         (f"/ui/diary/{DIARY}/2026-13-45", 400), (f"/ui/diary/{DIARY}/soon", 400),
                         ("/ui/diary?project=nobody", 404)):  # fmt: skip
        page = httpx.get(f"{url}{path}")
        assert page.status_code == status, path
        assert page.headers["content-type"].startswith("text/html"), path


def test_usage_lists_the_most_and_least_used(site: tuple[Site, str]) -> None:
    built, url = site
    httpx.get(f"{url}/ui/entry/{built.backups}")  # opened (and served by the searches before)
    page = httpx.get(f"{url}/ui/usage").text
    assert "Usage telemetry is off" not in page
    most = page[page.index('id="most"') : page.index('id="least"')]
    assert f'<a href="/ui/entry/{built.backups}">Postgres backups</a>' in most
    assert '<th scope="col" class="num">Opened</th>' in most
    assert 'id="least"' in page and "never used" in page


def test_usage_turned_off_says_how_to_turn_it_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ops.Brain(home):
        pass
    cfg = config_mod.load(home)
    cfg.usage.enabled = False
    config_mod.save(cfg)
    with serving(home) as url:
        page = httpx.get(f"{url}/ui/usage")
    assert page.status_code == 200
    assert "Usage telemetry is off" in page.text and "<code>enabled = true</code>" in page.text
    assert "<code>[usage]</code>" in page.text and str(home / "config.toml") in page.text


@pytest.mark.parametrize(("size", "viewport"), [("laptop", LAPTOP), ("phone", PHONE)])
def test_history_pages_in_a_browser(
    site: tuple[Site, str], browser: Browser, tmp_path: Path, size: str, viewport: dict[str, int]
) -> None:
    _, url = site
    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    page = context.new_page()
    errors = console_errors(page)
    shots = shots_folder(tmp_path, f"history-{size}")
    nav = page.get_by_role("navigation", name="Main")
    page.goto(f"{url}/")
    page.get_by_label("Search every library").fill("postgres")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("ol.results")).to_contain_text("Postgres backups")
    nav.get_by_role("link", name="Diary").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Diary")
    expect(nav.get_by_role("link", name="Diary")).to_have_attribute("aria-current", "page")
    page.get_by_label("Project").select_option("other")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", level=2)).to_have_text("other: 1 day in 1 week")
    page.get_by_label("Project").select_option(DIARY)
    page.get_by_role("button", name="Show").click()
    shot(page, shots, "diary")
    page.get_by_role("link", name="Week 2026-W02").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{DIARY}, week 2026-W02")
    shot(page, shots, "week")
    page.get_by_role("link", name="2026-01-05").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{DIARY}, day 2026-01-05")
    shot(page, shots, "day")
    page.get_by_role("link", name="Next day (2026-01-07)").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{DIARY}, day 2026-01-07")
    nav.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    expect(page.get_by_role("region", name="Least used")).to_be_visible()
    shot(page, shots, "usage")
    page.goto(f"{url}/ui/entry/{site[0].old_pool}")
    expect(page.locator("h1 .badge")).to_have_text("superseded")
    shot(page, shots, "superseded-entry")
    assert errors == []
    context.close()
