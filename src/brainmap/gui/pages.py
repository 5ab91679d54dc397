"""The reading pages: the library map (home), search, and an entry with its provenance."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from brainmap import ops
from brainmap.errors import UserError
from brainmap.gui.render import entry_url, url
from brainmap.gui.site import Form, Route, Site, redirect
from brainmap.keys import NodeKey, name_of

if TYPE_CHECKING:
    from brainmap.graph import Edge, Node
    from brainmap.libmap import MapBlock

PAGE_SIZE = 20
MODES = ("hybrid", "bm25", "vector")
MAX_PAGE = 45  # offset + limit stays within what a search ranks (ops.SearchInput)


@dataclass
class BridgePair:
    """Two libraries that share entities, with some of the names they share."""

    a: str
    b: str
    count: int
    examples: list[str]


def bridge_pairs(blocks: Sequence[MapBlock]) -> list[BridgePair]:
    """Pairs of libraries that share entities (most shared first), with examples."""
    pairs: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
    for block in blocks:
        for other, count in block.bridged_libraries.items():
            pair = (min(block.library, other), max(block.library, other))
            known, examples = pairs.get(pair, (0, {}))
            for bridge in block.bridges:
                if other in bridge.libraries:
                    examples.setdefault(bridge.key, bridge.name)
            pairs[pair] = (max(known, count), examples)
    ordered = sorted(pairs.items(), key=lambda p: (-p[1][0], p[0]))
    return [BridgePair(a, b, n, list(ex.values())[:6]) for (a, b), (n, ex) in ordered]


# --- GET / ------------------------------------------------------------------------------------


def home(site: Site, request: Request) -> Response:
    """The library map: a card per library, the bridges between them, the recompute form."""
    found = site.op("map_blocks", ops.NoInput())
    return site.render.page(
        "home.html", title="Library map", current="home", names=found.libraries,
        blocks={b.library: b for b in found.blocks}, pairs=bridge_pairs(found.blocks),
        notice=_recompute_notice(request, found.libraries),
    )  # fmt: skip


def _recompute_notice(request: Request, names: list[str]) -> str | None:
    """The result of a recompute, after its redirect (only known library names shown)."""
    if request.query_params.get("done") != "recompute":
        return None
    known = set(names)
    parts = []
    for key, label in (("recomputed", "Recomputed"), ("unchanged", "Unchanged"),
                       ("not_indexed", "Not indexed yet")):  # fmt: skip
        libs = [n for n in request.query_params.get(key, "").split(",") if n in known]
        if libs:
            parts.append(f"{label}: {', '.join(libs)}.")
    return "Map recompute done. " + (" ".join(parts) or "Nothing to recompute.")


def recompute(site: Site, form: Form) -> Response:
    """POST /ui/map/recompute: recompute one library's block, or every one."""
    chosen = form.get("library") or None
    report = site.op("map_recompute", ops.MapRecomputeInput(library=chosen))
    query = {
        "done": "recompute", "recomputed": ",".join(report.recomputed),
        "unchanged": ",".join(report.unchanged), "not_indexed": ",".join(report.not_indexed),
    }  # fmt: skip
    return redirect("/?" + urllib.parse.urlencode(query))


# --- GET /ui/search ---------------------------------------------------------------------------


@dataclass
class SearchForm:
    """What the search form holds (as typed: a page shows it back)."""

    q: str = ""
    library: str = ""
    type: str = ""
    tag: str = ""
    since: str = ""
    mode: str = "hybrid"
    inactive: bool = False
    everywhere: bool = False  # route=off: the map does not narrow the libraries
    page: int = 1

    @classmethod
    def of(cls, request: Request) -> SearchForm:
        params = request.query_params
        mode = params.get("mode", "hybrid")
        try:
            page = max(1, min(int(params.get("page", "1")), MAX_PAGE))
        except ValueError:
            page = 1
        return cls(
            q=params.get("q", "").strip(), library=params.get("library", "").strip(),
            type=params.get("type", "").strip(), tag=params.get("tag", "").strip(),
            since=params.get("since", "").strip(), mode=mode if mode in MODES else "hybrid",
            inactive=params.get("inactive") == "1", everywhere=params.get("route") == "off",
            page=page,
        )  # fmt: skip

    @property
    def filtered(self) -> bool:
        """Whether any filter beyond the library is set (the filters start open then)."""
        return bool(self.type or self.tag or self.since or self.inactive or self.mode != "hybrid")

    def link(self, **changes: Any) -> str:
        """This search's URL with some parameters changed (another page, every library)."""
        values: dict[str, Any] = {
            "q": self.q, "library": self.library, "type": self.type, "tag": self.tag,
            "since": self.since, "mode": "" if self.mode == "hybrid" else self.mode,
            "inactive": "1" if self.inactive else "", "route": "off" if self.everywhere else "",
            "page": self.page if self.page > 1 else "",
        }  # fmt: skip
        values.update(changes)
        return url("/ui/search", **values)

    def op_input(self) -> ops.SearchInput:
        """The search op's input (ValidationError when a filter is not valid)."""
        return ops.SearchInput.model_validate({
            "query": self.q, "library": [self.library] if self.library else None,
            "type": _words(self.type), "tag": _words(self.tag), "since": self.since or None,
            "mode": self.mode, "include_inactive": self.inactive, "route": not self.everywhere,
            "limit": PAGE_SIZE, "offset": (self.page - 1) * PAGE_SIZE,
        })  # fmt: skip


def _words(text: str) -> list[str] | None:
    """A filter's values, separated by commas or spaces."""
    return [w for w in text.replace(",", " ").split() if w] or None


def search(site: Site, request: Request) -> Response:
    """Search with filters: results with highlighted snippets, match levels and score parts;
    a library's map block when it is chosen without a query."""
    form = SearchForm.of(request)
    names = site.libraries
    if form.library and form.library not in names:
        return site.error_page(404, f"There is no library named {form.library!r}.",
                               "Pick one from the library map.")  # fmt: skip
    context: dict[str, Any] = {"form": form, "names": names, "modes": MODES, "result": None,
                               "block": None, "error": None, "page_size": PAGE_SIZE,
                               "max_page": MAX_PAGE}  # fmt: skip
    where = form.library or "every library"
    status = 200
    if form.q:
        title = f"{form.q} — search {where}"
        try:
            context["result"] = site.op("search", form.op_input())
        except ValidationError as exc:  # a filter typed wrong: say so on the form
            context["error"] = ops.describe_errors(exc.errors())
            status = 400
    elif form.library:
        title = f"Library {form.library}"
        context["block"] = _block(site, form.library)
    else:
        title = "Search"
    return site.render.page("search.html", title=title, current="search", status=status,
                            **context)  # fmt: skip


def _block(site: Site, library: str) -> MapBlock | None:
    """A library's map block (None: not indexed yet)."""
    try:
        block: MapBlock = site.op("get_map", ops.MapLibraryInput(library=library))
    except UserError as exc:
        if exc.status != 404:
            raise
        return None
    return block


# --- GET /ui/entry/{id} -----------------------------------------------------------------------


@dataclass
class NodeView:
    """One end of a neighbour edge as a page shows it."""

    label: str
    kind: str = ""
    href: str | None = None
    code: bool = False  # files, commits and slugs read as code


@dataclass
class EdgeView:
    subject: NodeView | None  # None: this entry
    predicate: str
    object: NodeView | None
    line: int | None


def node_view(node: Node | None, key: str) -> NodeView:
    """A neighbour: entries link to their page, entities and tags to a search."""
    if node is None:
        return NodeView(key, code=True)
    label = node.label or key
    if node.kind == "entry":
        return NodeView(label, node.kind, entry_url(name_of(key)))
    if node.kind in ("entity", "tag"):
        return NodeView(label, node.kind, url("/ui/search", q=node.label))
    return NodeView(label, node.kind, code=node.kind in ("file", "commit", "slug"))


def edge_view(edge: Edge, center: str, nodes: dict[str, Node]) -> EdgeView:
    def end(key: str) -> NodeView | None:
        return None if key == center else node_view(nodes.get(key), key)

    return EdgeView(end(edge.subject), edge.predicate.replace("_", " "), end(edge.object),
                    edge.line)  # fmt: skip


def entry(site: Site, request: Request) -> Response:
    """One entry: its text, status and supersession, provenance, graph neighbours, and the
    form that marks it verified. ``/ui/entry?ref=library:path`` names it by its path (the
    evidence of a fact links so)."""
    entry_id = str(request.path_params.get("entry_id") or request.query_params.get("ref", ""))
    try:
        info = site.op("get", ops.GetInput(ref=entry_id))
    except UserError as exc:
        if exc.status == 404:
            return site.error_page(404, f"There is no entry {entry_id!r}.",
                                   "Search for it, or start from the library map.")  # fmt: skip
        raise
    chain = site.op("hops", ops.HopsInput(ref=info.id, depth=3))
    try:
        walk = site.op(
            "neighbors", ops.NeighborsInput.model_validate({"node": info.id, "depth": 1})
        )
    except UserError:
        walk = None
    edges: list[EdgeView] = []
    if walk is not None:
        nodes = {n.key: n for n in [walk.center, *walk.nodes]}
        edges = [edge_view(e, walk.center.key, nodes) for e in walk.edges]
    return site.render.page(
        "entry.html", title=info.title, info=info, chain=chain, edges=edges,
        truncated=walk is not None and walk.truncated, done=request.query_params.get("done"),
        verify_action=entry_url(info.id) + "/verify",
    )  # fmt: skip


def verify(site: Site, entry_id: str) -> Response:
    """POST /ui/entry/{id}/verify: set the entry's last_verified to today."""
    result = site.op("verify", ops.VerifyInput(ref=entry_id))
    return redirect(entry_url(result.id or entry_id) + "?done=verified")


def wiki(site: Site, request: Request) -> Response:
    """GET /ui/wiki/{name}: a wiki link of a snippet: the entry that describes the entity it
    names, else a search for the name."""
    name = str(request.path_params["name"])
    try:
        walk = site.op("neighbors", ops.NeighborsInput.model_validate(
            {"node": "entity:" + name, "depth": 1, "predicate": ["describes"]}
        ))  # fmt: skip
    except (UserError, ValidationError):
        walk = None
    if walk is not None:
        for edge in walk.edges:
            subject = NodeKey.parse(edge.subject)
            if subject.kind == "entry" and edge.object == walk.center.key:
                return redirect(entry_url(subject.name))
    return redirect(url("/ui/search", q=name))


def routes(site: Site) -> list[Route]:
    """The reading pages and their two forms (recompute the map, mark an entry verified)."""

    async def recompute_post(request: Request) -> Response:
        return await site.post(request, request.url.path, lambda form: recompute(site, form))

    async def verify_post(request: Request) -> Response:
        entry_id = str(request.path_params["entry_id"])
        return await site.post(request, request.url.path, lambda _: verify(site, entry_id))

    return [
        ("/", site.safely(lambda r: home(site, r)), ["GET"]),
        ("/ui/search", site.safely(lambda r: search(site, r)), ["GET"]),
        ("/ui/entry/{entry_id}", site.safely(lambda r: entry(site, r)), ["GET"]),
        ("/ui/entry", site.safely(lambda r: entry(site, r)), ["GET"]),
        ("/ui/wiki/{name:path}", site.safely(lambda r: wiki(site, r)), ["GET"]),
        ("/ui/map/recompute", recompute_post, ["POST"]),
        ("/ui/entry/{entry_id}/verify", verify_post, ["POST"]),
        ("/ui/map/recompute", site.post_only, ["GET"]),
        ("/ui/entry/{entry_id}/verify", site.post_only, ["GET"]),
    ]
