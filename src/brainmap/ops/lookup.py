"""Search as an op's body, apart from the operations table: a new ``brainmap search`` process
imports neither pydantic (a tenth of a second) nor the other ops; the ``search`` op of the
table (HTTP, MCP) validates its input and calls :func:`find`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brainmap.ops.brain import Brain

if TYPE_CHECKING:
    from brainmap.config import Config
    from brainmap.reasoner import Spent
    from brainmap.search import Mode, SearchResult
    from brainmap.usage import Interface


def find(
    brain: Brain,
    query: str,
    *,
    library: list[str] | None = None,
    type: list[str] | None = None,
    tag: list[str] | None = None,
    since: str | None = None,
    limit: int = 10,
    offset: int = 0,
    mode: Mode = "hybrid",
    route: bool = True,
    hop: int = 0,
    project: str | None = None,
    expand: bool | None = None,
    include_inactive: bool = False,
    caller: Interface = "cli",
) -> SearchResult:
    """The hits of ``query``, filtered, routed and with ``hop`` levels of provenance (the
    search op's parameters, already valid). With ``expand`` (None: ``[reasoner] expand``),
    the reasoner's rewrites of the query are searched too and fused with it; without a
    reasoner, the plain hits, with ``reasoner.skipped`` saying why. ``offset`` skips the best
    hits first (a later page). The hits served are recorded as usage of ``caller``'s interface."""
    from brainmap.graph import GraphReader
    from brainmap.project import resolve

    rewrites: list[str] = []
    spent: Spent | None = None
    if (brain.cfg.reasoner.expand if expand is None else expand) and query.strip():
        rewrites, spent = rewrite(brain.cfg, query)
    result = brain.searcher.search_expanded(
        query,
        rewrites,
        project=resolve(brain.cfg, project) if project else None,
        libraries=library,
        types=type,
        tags=tag,
        since=since,
        limit=offset + limit,
        mode=mode,
        route=route,
        include_inactive=include_inactive,
    )
    result.reasoner = spent
    del result.hits[:offset]  # the earlier pages
    if hop:
        chains = GraphReader(brain.store).hops(
            [(h.library, h.path, h.source_rev) for h in result.hits], hop,
            brain.cfg.graph.hop_commits,
        )  # fmt: skip
        for hit, chain in zip(result.hits, chains, strict=True):
            hit.hops = chain
    from brainmap import usage  # buffered: the search pays an append, never a write

    usage.served(brain.cfg, [(h.id, h.library, h.path) for h in result.hits], query, caller)
    return result


def rewrite(cfg: Config, query: str) -> tuple[list[str], Spent]:
    """The reasoner's rewrites of ``query`` (one call, use "expand"): up to two keyword
    queries, two paraphrases and a HyDE passage; none, with ``skipped`` saying why, when
    there is no reasoner or it gives no usable answer."""
    from brainmap import expansion
    from brainmap.reasoner import Spent, attempt

    if not cfg.reasoner.enabled:
        return [], Spent(skipped=["expand: no reasoner configured ([reasoner] url in config.toml)"])
    # asked for (or on by default): the use is on for this search whatever [reasoner] expand says
    answer, spent = attempt(_with_expand(cfg), "expand", lambda r: expansion.rewrites(r, query))
    assert spent is not None  # configured and on: attempt reports what it spent
    return answer or [], spent


def _with_expand(cfg: Config) -> Config:
    import dataclasses

    if cfg.reasoner.expand:
        return cfg
    return dataclasses.replace(cfg, reasoner=dataclasses.replace(cfg.reasoner, expand=True))
