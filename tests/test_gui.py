"""The web GUI (issue 6) of a real `brainmap serve`: the library map as home page, search
scoped to a library, entries with provenance and neighbours, driven by Debian's chromium
through Playwright at laptop and phone sizes, with and without JavaScript; its two forms
and CSRF (RELIABILITY 13); escaping; HTML errors."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pygit2
import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from brainmap import ops
from brainmap.server import openapi_document
from conftest import serving, write

XSS_TITLE = '<script>alert(1)</script> "><img src=x onerror=alert(1)>'
XSS_TAG = "<i>x</i>"  # short enough to be a name the map shows
RAW_TAGS = ("<script>alert(1)</script>", "<img src=x", '"><img', XSS_TAG)
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 812}


@dataclass
class Site:
    home: Path
    root: Path
    backups: str  # entry ids
    pool: str
    xss: str


def _commit(repo_path: Path, message: str) -> str:
    """Commit everything in the folder as Ada (pygit2: no git binary needed)."""
    repo = pygit2.Repository(str(repo_path))
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    who = pygit2.Signature("Ada Lovelace", "ada@example.org")
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", who, who, message, tree, parents))


def build_site(root: Path) -> Site:
    """Two tiny libraries sharing the entity Postgres (infra under git, with history
    imported), indexed; and a third library added but not indexed yet."""
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
    write(later / "note.md", "# Later\n\nNot indexed yet.\n")
    pygit2.init_repository(str(infra))
    _commit(infra, "Add backup notes")
    home = root / "home"
    with ops.Brain(home) as brain:
        for name in ("infra", "webapp"):
            ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(root / name)))
        ops.reindex(brain, ops.ReindexInput())
        ops.git_import(brain, ops.GitImportInput())
        ops.library_add(brain, ops.LibraryAddInput(name="later", path=str(later)))
        ids = {
            ref: ops.get(brain, ops.GetInput(ref=ref)).id
            for ref in ("infra:postgres-backups.md", "webapp:pool.md", "webapp:xss.md")
        }
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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = shutil.which("chromium")
    assert path, "Debian's chromium is required for the GUI tests: apt-get install chromium"
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


# --- the browser journey --------------------------------------------------------------------


def _shot(page: Page, folder: Path, name: str, *, phone: bool) -> None:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.exists() and path.stat().st_size > 1000
    assert page.locator("h1").count() == 1, f"{name}: one h1 per page"
    if phone:
        fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert fits, f"{name}: horizontal scrolling at {PHONE['width']}px"


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
    shots = tmp_path / name

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
    _shot(page, shots, "1-home", phone=phone)
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
    _shot(page, shots, "2-library", phone=phone)

    page.get_by_label("Query").fill("restore the backup")
    page.get_by_role("button", name="Search").click()
    results = page.locator("ol.results > li")
    expect(results.first).to_be_visible()
    assert "library=infra" in page.url
    for meta in results.locator("p.meta").all_inner_texts():
        assert meta.startswith("infra ·"), meta  # scoped to the library
    expect(page.locator("ol.results")).to_contain_text("postgres-backups.md:9–11")
    _shot(page, shots, "3-results", phone=phone)

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
    _shot(page, shots, "4-entry", phone=phone)

    postgres.click()  # an entity neighbour leads back to a search
    expect(page.locator("ol.results")).to_contain_text("Connection pool exhaustion")

    page.goto(f"{url}/ui/entry/{built.xss}")
    expect(page.get_by_role("heading", level=1)).to_have_text(XSS_TITLE)
    expect(page.locator("img")).to_have_count(0)
    _shot(page, shots, "5-hostile-entry", phone=phone)
    assert dialogs == []
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
    new_head = _commit(tmp_path / "infra", "Move HEAD")  # a recompute now writes a new block
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
        pages = [httpx.get(f"{url}/"), httpx.get(f"{url}/ui/entry/{built.backups}")]
        for page in pages:
            assert page.status_code == 200 and "read-only" in page.text
            assert _post_forms(page.text) == [] and "csrf_token" not in page.text
        same_origin = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
        for action in ("/ui/map/recompute", f"/ui/entry/{built.backups}/verify"):
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
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
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
        "/ui/search?library=nope": "There is no library named &#x27;nope&#x27;.",
        "/ui/search?library=nope&q=postgres": "There is no library named",
        "/ui/entry/0123456789abcdef": "There is no entry &#x27;0123456789abcdef&#x27;.",
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


def test_gui_routes_stay_out_of_the_openapi_document(site: tuple[Site, str]) -> None:
    built, _ = site
    with ops.Brain(built.home) as brain:
        paths = set(openapi_document(brain)["paths"])
    assert "/" not in paths and not any(p.startswith("/ui") for p in paths)
