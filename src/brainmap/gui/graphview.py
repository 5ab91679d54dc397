"""The graph page: a node's neighbourhood drawn as an SVG graph, laid out on the server.

The layout is radial by hop distance: the centre, then its neighbours evenly on a first
ring, then theirs on a second ring in the order of the neighbour that brought them (so that
edges cross little). It is deterministic (sorted by kind and label, no randomness): the same
graph draws the same picture. Nodes are shaped and coloured by kind, with a legend; each is a
link (an entry opens its page, any other node re-centres the graph on it). No script: the
same edges follow as a text list, for screen readers and small screens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from brainmap import ops
from brainmap.errors import UserError
from brainmap.gui.render import entry_url, url
from brainmap.gui.site import Route, Site
from brainmap.keys import kind_of, name_of

if TYPE_CHECKING:
    from brainmap.graph import Edge, Neighborhood, Node

DEPTHS = (1, 2)
NODE_LIMIT = 40  # more would not be readable: the page says what was left out
NODE_R = 18  # a node's size (radius) in SVG units
SPACING = 150  # at least this far apart on a ring, so that labels do not overlap
RING = 170  # the first ring's smallest radius; each next ring is this much further
LABEL_CHARS = 22
MARGIN = 100  # around the outer ring: room for half a label and the node below it
# kind -> (shape, colour class); a kind not listed is an "other" grey circle
STYLES = {
    "entry": ("rect", "c-blue"),
    "file": ("rect", "c-grey"),
    "project": ("rect", "c-red"),
    "entity": ("circle", "c-orange"),
    "service": ("circle", "c-red"),
    "person": ("circle", "c-green"),
    "tag": ("diamond", "c-purple"),
    "slug": ("diamond", "c-grey"),
    "port": ("diamond", "c-sky"),
    "commit": ("hexagon", "c-green"),
    "host": ("hexagon", "c-red"),
    "image": ("hexagon", "c-sky"),
    "volume": ("hexagon", "c-yellow"),
    "network": ("hexagon", "c-yellow"),
    "env": ("hexagon", "c-purple"),
}
OTHER = ("circle", "c-other")


@dataclass
class GraphNode:
    """A node placed on the picture, with the link it opens."""

    key: str
    kind: str
    label: str
    short: str  # the label as drawn (cut to LABEL_CHARS)
    depth: int
    x: float
    y: float
    shape: str
    colour: str
    href: str  # its entry, or the graph centred on it
    graph_href: str  # the graph centred on it
    points: str = ""  # the outline of a diamond or hexagon


@dataclass
class GraphEdge:
    """A line between two placed nodes, ending at their outlines, with its predicates."""

    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    lx: float
    ly: float


@dataclass
class EdgeItem:
    """An edge of the text list: both ends with their links."""

    subject: GraphNode
    predicate: str
    object: GraphNode
    where: str  # path:line of the source that states it


@dataclass
class Legend:
    kind: str
    shape: str
    colour: str
    points: str


def graph_href(key: str, depth: int) -> str:
    """The graph centred on a node, as deep as the one shown."""
    return url("/ui/graph", node=key, depth=depth if depth != 1 else None)


def node_href(key: str, depth: int) -> str:
    """An entry opens its page; any other node re-centres the graph on itself."""
    return entry_url(name_of(key)) if kind_of(key) == "entry" else graph_href(key, depth)


def outline(shape: str, x: float, y: float, r: float = NODE_R) -> str:
    """The points of a diamond or hexagon centred on (x, y)."""
    corners = {"diamond": 4, "hexagon": 6}.get(shape)
    if corners is None:
        return ""
    turn = 0.0 if shape == "diamond" else math.pi / 6
    return " ".join(
        f"{x + r * math.cos(turn + 2 * math.pi * i / corners):.1f},"
        f"{y + r * math.sin(turn + 2 * math.pi * i / corners):.1f}"
        for i in range(corners)
    )


def _radius(count: int, inner: float) -> float:
    """A ring far enough out that ``count`` nodes on it stay SPACING apart."""
    return max(inner, count * SPACING / (2 * math.pi))


def layout(walk: Neighborhood, depth: int) -> tuple[list[GraphNode], float]:
    """Each node's place, and the half-width of the picture around the centre."""
    rings: dict[int, list[Node]] = {}
    for node in walk.nodes:
        rings.setdefault(node.depth, []).append(node)
    touching: dict[str, set[str]] = {}
    for edge in walk.edges:
        touching.setdefault(edge.subject, set()).add(edge.object)
        touching.setdefault(edge.object, set()).add(edge.subject)
    angle = {walk.center.key: 0.0}  # placed ring by ring: inner nodes have one already
    radius = {0: 0.0}
    for ring in sorted(rings):
        nodes = rings[ring]

        def parent(node: Node) -> float:
            # the inner neighbour that brought it, first in angle order: children follow it
            return min((angle[k] for k in touching.get(node.key, ()) if k in angle), default=0.0)

        nodes.sort(key=lambda n: (parent(n), n.kind, n.label.casefold(), n.key))
        radius[ring] = _radius(len(nodes), radius[max(radius)] + RING)
        angle.update((n.key, 2 * math.pi * i / len(nodes)) for i, n in enumerate(nodes))
    placed = []
    for node in [walk.center, *walk.nodes]:
        r, a = radius[node.depth], angle[node.key]
        x, y = round(r * math.sin(a), 1), round(-r * math.cos(a), 1)  # 0 at the top, clockwise
        shape, colour = STYLES.get(node.kind, OTHER)
        label = node.label or name_of(node.key)
        short = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        placed.append(GraphNode(node.key, node.kind, label, short, node.depth, x, y, shape,
                                colour, node_href(node.key, depth), graph_href(node.key, depth),
                                outline(shape, x, y)))  # fmt: skip
    return placed, radius[max(radius)] + MARGIN


def lines(placed: dict[str, GraphNode], edges: list[Edge]) -> list[GraphEdge]:
    """One line per pair of nodes (its predicates joined), from outline to outline."""
    labels: dict[tuple[str, str], list[str]] = {}
    for edge in edges:
        if edge.subject != edge.object and edge.subject in placed and edge.object in placed:
            said = labels.setdefault((edge.subject, edge.object), [])
            if edge.predicate not in said:
                said.append(edge.predicate)
    out = []
    for (a, b), predicates in labels.items():
        start, end = placed[a], placed[b]
        dx, dy = end.x - start.x, end.y - start.y
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        gap = NODE_R + 4  # the arrow ends at the outline, not under the node
        at = 0.6 if end.depth >= start.depth else 0.4  # nearer the outer end: lines crowd inside
        out.append(GraphEdge(
            round(start.x + ux * gap, 1), round(start.y + uy * gap, 1),
            round(end.x - ux * gap, 1), round(end.y - uy * gap, 1), ", ".join(predicates),
            round(start.x + dx * at, 1), round(start.y + dy * at - 4, 1),
        ))  # fmt: skip
    return out


def graph(site: Site, request: Request) -> Response:
    """GET /ui/graph?node=KEY&depth=1|2: the picture, its legend and the edges as text."""
    params = request.query_params
    node = params.get("node", "").strip()
    depth = 2 if params.get("depth") == "2" else 1
    context: dict[str, object] = {"node": node, "depth": depth, "depths": DEPTHS, "error": None,
                                  "walk": None, "r": NODE_R}  # fmt: skip
    title = "Graph"
    status = 200
    if node:
        try:
            walk = site.op("neighbors", ops.NeighborsInput.model_validate(
                {"node": node, "depth": depth, "limit": NODE_LIMIT}))  # fmt: skip
        except UserError as exc:
            if exc.status != 404:
                raise
            context["error"], status = exc.message, 404  # the form stays, to try another
        else:
            placed, extent = layout(walk, depth)
            by_key = {n.key: n for n in placed}
            title = f"Graph of {by_key[walk.center.key].label}"
            kinds = dict.fromkeys(n.kind for n in placed)
            context.update(
                walk=walk, center=by_key[walk.center.key], nodes=placed,
                lines=lines(by_key, walk.edges), extent=round(extent),
                legend=[Legend(k, *STYLES.get(k, OTHER), outline(STYLES.get(k, OTHER)[0], 10, 10, 8))
                        for k in kinds],
                edges=[EdgeItem(by_key[e.subject], e.predicate, by_key[e.object],
                                f"{e.path}:{e.line}" if e.path and e.line else e.path or "")
                       for e in walk.edges if e.subject in by_key and e.object in by_key],
            )  # fmt: skip
    return site.render.page("graph.html", title=title, current="graph", status=status, **context)


def routes(site: Site) -> list[Route]:
    """The graph page."""
    return [("/ui/graph", site.safely(lambda r: graph(site, r)), ["GET"])]
