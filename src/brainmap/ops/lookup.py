"""Search as an op's body, apart from the operations table: a new ``brainmap search`` process
imports neither pydantic (a tenth of a second) nor the other ops; the ``search`` op of the
table (HTTP, MCP) validates its input and calls :func:`find`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brainmap.ops.brain import Brain

if TYPE_CHECKING:
    from brainmap.search import Mode, SearchResult


def find(
    brain: Brain,
    query: str,
    *,
    library: list[str] | None = None,
    type: list[str] | None = None,
    tag: list[str] | None = None,
    since: str | None = None,
    limit: int = 10,
    mode: Mode = "hybrid",
    route: bool = True,
    hop: int = 0,
    project: str | None = None,
) -> SearchResult:
    """The hits of ``query``, filtered, routed and with ``hop`` levels of provenance (the
    search op's parameters, already valid)."""
    from brainmap.graph import GraphReader
    from brainmap.project import resolve

    result = brain.searcher.search(
        query,
        project=resolve(brain.cfg, project) if project else None,
        libraries=library,
        types=type,
        tags=tag,
        since=since,
        limit=limit,
        mode=mode,
        route=route,
    )
    if hop:
        chains = GraphReader(brain.store).hops(
            [(h.library, h.path, h.source_rev) for h in result.hits], hop,
            brain.cfg.graph.hop_commits,
        )  # fmt: skip
        for hit, chain in zip(result.hits, chains, strict=True):
            hit.hops = chain
    return result
