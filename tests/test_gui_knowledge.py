"""The knowledge pages of a real `brainmap serve` (issue items 7 and 8), driven by Debian's
chromium through Playwright at 1280 and 390 px: ask with evidence linked to its source line,
a library's facts filtered by predicate, the stale audit and its mark-verified form,
contradictions side by side, and a node's neighbourhood as an SVG graph. Facts come from
real compose samples (awesome-compose); hostile names are escaped on every page."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, expect

from conftest import DATA, serving
from gui_fixtures import LAPTOP, PHONE, console_errors, shot, shots_folder
from knowledge_site import RAW_TAGS, XSS, XSS_ENTITY, XSS_SERVICE, KnowledgeSite, build

pytestmark = pytest.mark.skipif(
    not (DATA / "awesome-compose.tar.gz").exists(), reason="needs ../shared/data"
)

WIDTHS = (LAPTOP["width"], PHONE["width"])
PORT_QUESTION = "which port does the web service of flask-redis publish"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KnowledgeSite, str]]:
    """The knowledge site, served writable for this module's tests."""
    root = tmp_path_factory.mktemp("gui-knowledge")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(root / "user-home"))
        mp.setenv("BRAINMAP_HOME", str(root / "home"))
        site = build(root)
        with serving(site.home) as url:
            yield site, url


class Watched:
    """A browser page whose console errors, uncaught errors and dialogs are collected: an
    alert() would mean that injected script ran."""

    def __init__(self, context: BrowserContext) -> None:
        self.page = context.new_page()
        self.problems = console_errors(self.page)
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Dialog) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def at(browser: Browser) -> Iterator[dict[int, Watched]]:
    """A watched page per width (laptop 1280, phone 390 px); each ends with no problem seen."""
    contexts = {
        size["width"]: browser.new_context(viewport=size)  # type: ignore[arg-type]
        for size in (LAPTOP, PHONE)
    }
    pages = {w: Watched(c) for w, c in contexts.items()}
    yield pages
    for context in contexts.values():
        context.close()
    assert {w: p.problems for w, p in pages.items()} == {w: [] for w in WIDTHS}


# --- every page, at both widths -----------------------------------------------------------


def test_every_page_loads_at_both_widths(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched], tmp_path: Path
) -> None:
    site, url = served
    pages = {
        "ask-empty": "/ui/ask",
        "ask": "/ui/ask?" + urllib.parse.urlencode({"q": PORT_QUESTION}),
        "facts-pick": "/ui/facts",
        "facts": "/ui/facts?library=samples",
        "facts-publishes": "/ui/facts?library=samples&predicate=publishes",
        "audit": "/ui/audit",
        "contradictions": "/ui/audit/contradictions",
        "graph-empty": "/ui/graph",
        "graph": "/ui/graph?node=Redis",
        "graph-2": "/ui/graph?node=Redis&depth=2",
        "graph-service": "/ui/graph?node=service:flask-redis/web&depth=2",
        "graph-entry": "/ui/graph?" + urllib.parse.urlencode({"node": f"entry:{site.redis_note}"}),
    }
    for width, watched in at.items():
        folder = shots_folder(tmp_path, f"knowledge-{width}")
        for name, path in pages.items():
            response = watched.page.goto(url + path)
            assert response is not None and response.status == 200, (name, width)
            shot(watched.page, folder, name)


# --- ask ------------------------------------------------------------------------------------


def test_ask_form_answers_with_evidence_linked_to_source_lines(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    _, url = served
    page = at[1280].page
    page.goto(f"{url}/ui/ask")
    expect(page.get_by_label("Ask the web search when no fact answers")).to_be_checked()
    page.get_by_label("Question").fill(PORT_QUESTION)
    page.get_by_label("Library").select_option("samples")
    page.get_by_label("Ask the web search when no fact answers").uncheck()
    page.get_by_role("button", name="Ask").click()
    assert "library=samples" in page.url and "web=" not in page.url
    answer = page.get_by_role("region", name="Answer")
    expect(answer.locator("p.answer")).to_have_text("8000 confirmed")
    facts = page.get_by_role("region", name="Facts")
    top = facts.locator("ol.results > li").first
    expect(top.locator(".conf")).to_have_text("confirmed")
    expect(top).to_contain_text("service web of flask-redis publishes port 8000")
    # the compose file is named, not linked (config files are never served)
    expect(top.locator("code", has_text="flask-redis/compose.yaml:14")).to_have_count(1)
    expect(top.get_by_role("link", name="flask-redis/compose.yaml:14")).to_have_count(0)
    readme = top.get_by_role("link", name="flask-redis/README.md:26")
    href = readme.get_attribute("href") or ""
    assert href == "/ui/entry?ref=samples%3Aflask-redis%2FREADME.md#L26"
    expect(page.get_by_role("region", name="Web")).to_contain_text("skipped")
    readme.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Compose sample application")
    line = page.locator("#L26")
    expect(line).to_have_text('            - "8000:8000"')  # the README's compose snippet
    assert page.evaluate("document.querySelector(':target').id") == "L26"

    # a README that disagrees: the compose file's value leads, the README's loses
    page.goto(f"{url}/ui/ask?" + urllib.parse.urlencode(
        {"q": "which port does the web service of vuejs publish", "root": "facts"}))  # fmt: skip
    expect(page.locator("p.answer")).to_contain_text(
        "overruled by authority: config over narrative"
    )
    expect(page.locator("p.answer .conf")).to_have_text("not confirmed")
    expect(page.get_by_role("region", name="Facts").locator(".conf-contradicted")).to_have_count(1)
    expect(page.get_by_label("Look in")).to_have_value("facts")
    expect(page.get_by_role("region", name="Notes that may support it")).to_have_count(1)


def test_a_question_too_long_is_said_on_the_form(served: tuple[KnowledgeSite, str]) -> None:
    _, url = served
    response = httpx.get(f"{url}/ui/ask", params={"q": "port " * 500})
    assert response.status_code == 400 and 'role="alert"' in response.text
    assert 'id="q"' in response.text  # the form stays, to shorten the question
    missing = httpx.get(f"{url}/ui/ask", params={"q": "port", "library": "nowhere"})
    assert missing.status_code == 404 and "nowhere" in missing.text


# --- facts ----------------------------------------------------------------------------------


def test_facts_table_filters_by_predicate(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    _, url = served
    page = at[390].page
    page.goto(f"{url}/ui/facts")
    page.get_by_label("Library").select_option("samples")
    page.get_by_role("button", name="Show facts").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Facts of samples")
    rows = page.locator("table.facts-table tbody tr")
    every = rows.count()
    assert every > 10
    page.get_by_label("Predicate").select_option("publishes")
    page.get_by_label("Confidence").select_option("confirmed")
    page.get_by_role("button", name="Filter").click()
    assert "predicate=publishes" in page.url and "confidence=confirmed" in page.url
    assert 0 < rows.count() < every
    for text in rows.locator("td[data-label=Predicate]").all_inner_texts():
        assert text == "publishes"
    for text in rows.locator("td[data-label=Confidence]").all_inner_texts():
        assert text.startswith("confirmed")
    web = rows.filter(has_text="flask-redis/web").filter(has_text="8000")
    expect(web).to_have_count(1)
    expect(web.get_by_role("link", name="flask-redis/README.md:26")).to_have_count(1)
    web.get_by_role("link", name="flask-redis/web").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Graph of flask-redis/web")
    missing = httpx.get(f"{url}/ui/facts", params={"library": "nowhere"})
    assert missing.status_code == 404 and "nowhere" in missing.text
    later = httpx.get(f"{url}/ui/facts", params={"library": "later"})
    assert later.status_code == 200 and "No facts in later yet" in later.text


# --- the stale audit and contradictions ---------------------------------------------------


def test_stale_audit_marks_an_entry_verified(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    site, url = served
    page = at[1280].page
    page.goto(f"{url}/ui/audit")
    due = page.get_by_role("region", name="Due for re-verification (1)")
    expect(due).to_contain_text("samples:notes/vue-port.md")
    expect(due).to_contain_text("last verified 2020-01-02")
    expect(due).to_contain_text("brainmap verify samples:notes/vue-port.md")
    # without the form's token, as a GET, or on a read-only server, nothing changes
    forged = httpx.post(f"{url}/ui/audit/verify", data={"ref": site.stale_note},
                        headers={"Origin": url})  # fmt: skip
    assert forged.status_code == 403 and "security token" in forged.text
    assert httpx.get(f"{url}/ui/audit/verify").status_code == 405
    with serving(site.home, "--read-only") as read_only:
        listed = httpx.get(f"{read_only}/ui/audit").text
        assert "samples:notes/vue-port.md" in listed and 'method="post"' not in listed
        refused = httpx.post(f"{read_only}/ui/audit/verify", data={"ref": site.stale_note},
                             headers={"Origin": read_only})  # fmt: skip
        assert refused.status_code == 403 and "read-only" in refused.text
        for path in ("/ui/ask?q=port", "/ui/facts?library=samples",
                     "/ui/audit/contradictions", "/ui/graph?node=Redis"):  # fmt: skip
            assert httpx.get(read_only + path).status_code == 200, path
    note = site.root / "samples" / "notes" / "vue-port.md"
    assert "last_verified: 2020-01-02" in note.read_text(encoding="utf-8")

    due.get_by_role("button", name="Mark verified").click()
    expect(page.get_by_role("status")).to_contain_text("Marked as verified")
    assert "/ui/audit?" in page.url
    expect(page.get_by_role("region", name="Due for re-verification (1)")).to_have_count(0)
    expect(page.locator("main")).to_contain_text("Nothing is stale")
    assert f"last_verified: {dt.date.today().isoformat()}" in note.read_text(encoding="utf-8")
    page.get_by_role("link", name="Open the entry").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Vue dev server port")


def test_contradictions_side_by_side(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    _, url = served
    tops = {}
    for width, watched in at.items():
        page = watched.page
        page.goto(f"{url}/ui/audit")
        page.get_by_role("link", name="contradictions").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Contradictions")
        conflict = page.locator("section.conflict").filter(has_text="vuejs/web")
        expect(conflict).to_contain_text("Resolved by authority")
        sides = conflict.locator("article.side")
        expect(sides).to_have_count(2)
        lost = sides.filter(has=page.locator(".conf-contradicted"))
        won = sides.filter(has=page.locator(".conf-partial"))
        expect(lost.get_by_role("heading")).to_contain_text("80")
        expect(lost.get_by_role("link", name="vuejs/README.md:20")).to_have_count(1)
        expect(won).to_contain_text("(stands)")
        expect(won.locator("code", has_text="vuejs/compose.yaml:7")).to_have_count(1)
        boxes = [b for b in (s.bounding_box() for s in sides.all()) if b]
        tops[width] = {round(b["y"]) for b in boxes}
    assert len(tops[1280]) == 1  # two columns
    assert len(tops[390]) == 2  # stacked


# --- the graph ------------------------------------------------------------------------------


def test_graph_of_an_entity_links_and_recentres(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    site, url = served
    page = at[1280].page
    page.goto(f"{url}/")
    card = page.locator("li.card").filter(has=page.get_by_role("link", name="samples", exact=True))
    card.locator("ul.chips").get_by_role("link", name="Redis", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Graph of Redis")
    assert "node=entity%3Aredis" in page.url
    svg = page.locator("figure.graph svg.picture")
    expect(svg).to_be_visible()
    near = svg.locator("a.node")
    one_hop = near.count()
    assert one_hop >= 3  # Redis and the two notes that link to it
    legend = page.get_by_role("list", name="Legend")
    expect(legend).to_contain_text("entity")
    expect(legend).to_contain_text("entry")
    edges = page.get_by_role("region", name="Edges").locator("ul.edges > li")
    expect(edges).to_have_count(svg.locator("g.edge").count())
    entry = svg.locator(f'a.node[href="/ui/entry/{site.redis_note}"]')
    expect(entry).to_have_count(1)
    expect(entry).to_have_attribute("aria-label", "Redis for the flask app (entry)")
    expect(entry.locator("text")).to_have_text("Redis for the flask a…")  # cut to fit

    page.get_by_label("Depth").select_option("2")
    page.get_by_role("button", name="Show").click()
    assert "depth=2" in page.url
    assert near.count() > one_hop
    svg.get_by_role("link", name="Flask (entity)").click()  # re-centres, as deep
    expect(page.get_by_role("heading", level=1)).to_have_text("Graph of Flask")
    assert "depth=2" in page.url and "node=entity%3Aflask" in page.url
    centre = svg.get_by_role("link", name="Flask (entity)")
    centre.focus()  # the picture's links take the keyboard too
    expect(centre).to_be_focused()
    first = httpx.get(f"{url}/ui/graph", params={"node": "Redis", "depth": "2"}).text
    again = httpx.get(f"{url}/ui/graph", params={"node": "Redis", "depth": "2"}).text
    assert first == again  # a deterministic layout

    # an unknown node: a 404 page that keeps the form, to try another
    unknown = httpx.get(f"{url}/ui/graph", params={"node": "no-such-thing-anywhere"})
    assert unknown.status_code == 404 and 'role="alert"' in unknown.text
    assert "nothing in the graph is called" in unknown.text
    assert 'name="node" type="search" value="no-such-thing-anywhere"' in unknown.text


def test_graph_of_a_service_shows_its_facts(served: tuple[KnowledgeSite, str]) -> None:
    _, url = served
    html = httpx.get(f"{url}/ui/graph", params={"node": "service:flask-redis/web"}).text
    assert "publishes" in html and "8000" in html and "depends_on" in html
    assert 'class="shape c-red"' in html and 'class="shape c-sky"' in html  # service, port
    assert "/ui/graph?node=port%3A8000" in html  # a port re-centres the graph


# --- escaping -----------------------------------------------------------------


def test_hostile_names_are_escaped_on_every_knowledge_page(
    served: tuple[KnowledgeSite, str], at: dict[int, Watched]
) -> None:
    site, url = served
    paths = [
        "/ui/ask?" + urllib.parse.urlencode({"q": XSS}),
        "/ui/ask?" + urllib.parse.urlencode({"q": "which port does hostile publish"}),
        "/ui/facts?library=samples",
        "/ui/graph?node=Redis&depth=2",
        "/ui/graph?" + urllib.parse.urlencode({"node": XSS_ENTITY}),
        "/ui/graph?" + urllib.parse.urlencode({"node": f"service:hostile/{XSS_SERVICE}"}),
        "/ui/graph?" + urllib.parse.urlencode({"node": XSS}),  # the hostile note's entity
        "/ui/graph?" + urllib.parse.urlencode({"node": "<script>alert(9)</script>"}),  # unknown
        f"/ui/entry/{site.xss_note}",
    ]
    found = []
    for path in paths:
        response = httpx.get(url + path)
        assert response.status_code in (200, 404), path
        for raw in RAW_TAGS:
            assert raw not in response.text, (path, raw)
        if response.status_code == 200:  # a 404 is a console error of its own
            found.append(path)
    assert len(found) == len(paths) - 1
    facts = httpx.get(f"{url}/ui/facts?library=samples").text
    assert "&lt;img src=x onerror=alert(3)&gt;" in facts  # shown, as text
    page = at[390].page  # no dialog may open (the fixture checks)
    for path in found:
        page.goto(url + path)
    page.goto(f"{url}/ui/graph?" + urllib.parse.urlencode({"node": XSS_ENTITY}))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Graph of {XSS_ENTITY}")


def test_the_layout_is_radial_deterministic_and_keeps_nodes_apart() -> None:
    from brainmap.graph import Edge, Neighborhood, Node
    from brainmap.gui.graphview import SPACING, layout

    def walk(order: list[int]) -> Neighborhood:
        hub = Node("entity:hub", "entity", "Hub")
        inner = [Node(f"entry:e{i}", "entry", f"Note {i}", depth=1) for i in range(12)]
        outer = [Node(f"tag:t{i}", "tag", f"tag {i}", depth=2) for i in range(30)]
        edges = [Edge(n.key, "links_to", hub.key, "lib", "a.md", 1, None, None) for n in inner]
        edges += [Edge(inner[i % 12].key, "tagged", t.key, "lib", "a.md", None, None, None)
                  for i, t in enumerate(outer)]  # fmt: skip
        nodes = [*inner, *outer]
        return Neighborhood(hub, [nodes[i] for i in order], edges)

    placed, extent = layout(walk(list(range(42))), 2)
    again, _ = layout(walk(list(reversed(range(42)))), 2)  # the walk's order does not matter
    assert {(n.key, n.x, n.y) for n in placed} == {(n.key, n.x, n.y) for n in again}
    centre = next(n for n in placed if n.depth == 0)
    assert (centre.x, centre.y) == (0.0, 0.0)
    for ring in (1, 2):
        on = [n for n in placed if n.depth == ring]
        radii = {round((n.x**2 + n.y**2) ** 0.5) for n in on}
        assert len(radii) == 1  # one circle per hop distance
        gaps = [((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5 for a in on for b in on if a is not b]
        assert min(gaps) >= SPACING * 0.95  # labels do not overlap
    assert extent > max(abs(n.x) for n in placed)  # every node inside the picture
