"""Ops on the library map: every library in a line, one library's block, a manual recompute."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import Field

from brainmap import derive, libmap
from brainmap.errors import UserError
from brainmap.libmap import MapBlock, RecomputeReport
from brainmap.ops.core import Brain, _Input, op
from brainmap.ops.library import NoInput


@dataclass
class MapLine:
    """One library in a line: what it is about and how big it is."""

    library: str
    narrative: str
    top_entities: list[str]
    entries: int
    triplet_count: int
    bridged_libraries: list[str]
    last_change: str | None
    created_at: str | None  # when its block was computed; None: not indexed yet


@dataclass
class LibraryMap:
    libraries: list[MapLine]
    text: str  # the compact map agents get in their instructions


class MapInput(_Input):
    library: list[str] | None = Field(None, description="Only these libraries.")


@op("map", MapInput, LibraryMap, methods=("GET",))
def map_(brain: Brain, inp: MapInput) -> LibraryMap:
    """The library map: every library in one line (what it is about, its core entities, its
    size and the libraries it shares entities with). Read it to know where to search; pass a
    library to search(library=...) to stay inside it."""
    found = {b.library: b for b in _blocks(brain)}
    lines = []
    for lib in brain.cfg.select(inp.library):
        block = found.get(lib.name)
        if block is None:
            lines.append(MapLine(lib.name, "", [], 0, 0, [], None, None))
            continue
        lines.append(
            MapLine(
                lib.name,
                block.narrative,
                [e.name for e in block.top_entities],
                block.entries,
                block.triplet_count,
                list(block.bridged_libraries),
                block.last_change,
                block.created_at,
            )
        )
    return LibraryMap(lines, map_text(brain, inp.library))


def map_text(brain: Brain, libraries: list[str] | None = None) -> str:
    """The compact map of the libraries (all when None) within the configured token budget
    (the MCP instructions use it: as stored, without waiting for the map of this process's
    last writes to settle, since an HTTP server reads them on its event loop)."""
    found = {b.library: b for b in _blocks(brain, settle=False)}
    chosen = brain.cfg.select(libraries)
    shown = [found.get(lib.name) or _not_indexed(lib.name) for lib in chosen]
    return libmap.compact(shown, brain.cfg.map.instructions_tokens)


def _blocks(brain: Brain, names: list[str] | None = None, *, settle: bool = True) -> list[MapBlock]:
    """The active blocks (of ``names``), their bridges cut to the libraries the current
    call may see: a team's user learns nothing of another library from a shared entity.
    With ``settle``, the map of this process's writes is refreshed first."""
    if settle:
        brain.settle_map()
    db = brain.store.db
    found = libmap.blocks(brain.store, names)
    if db.visible is None:
        return found
    return [
        dataclasses.replace(
            block,
            bridges=[
                dataclasses.replace(b, libraries=shared)
                for b in block.bridges
                if (shared := [name for name in b.libraries if db.sees(name)])
            ],
            bridged_libraries={k: n for k, n in block.bridged_libraries.items() if db.sees(k)},
        )
        for block in found
    ]


def _not_indexed(name: str) -> MapBlock:
    return MapBlock(name, "not indexed yet", None, [], {}, [], {}, 0, 0, 0, None, None)


@dataclass
class MapBlocks:
    """Every library of the config, in its order, and the active blocks of those indexed."""

    libraries: list[str]
    blocks: list[MapBlock]  # config order; a library not indexed yet has none


@op("map_blocks", NoInput, MapBlocks)
def map_blocks(brain: Brain, inp: NoInput) -> MapBlocks:
    """The full map block of every library in one read (the home page's cards)."""
    names = [lib.name for lib in brain.cfg.libraries]
    found = {b.library: b for b in _blocks(brain, names)}
    return MapBlocks(names, [found[name] for name in names if name in found])


class MapLibraryInput(_Input):
    library: str = Field(description="A library name (see `map`).")


@op("get_map", MapLibraryInput, MapBlock, methods=("GET",), path="/map/{library}",
    tool="get_map")  # fmt: skip
def get_map(brain: Brain, inp: MapLibraryInput) -> MapBlock:
    """One library's map block in full: narrative, top entities with their degree, relation
    profile (edges per predicate), bridges (entities other libraries share, with those
    libraries), triplet count, size, last change, git commit, and when it was computed."""
    brain.cfg.library(inp.library)  # unknown names are a clear 404
    found = _blocks(brain, [inp.library])
    if not found:
        raise UserError(
            f"library {inp.library!r} has no map block yet",
            hint=f"brainmap reindex {inp.library}",
            status=404,
        )
    return found[0]


class MapRecomputeInput(_Input):
    library: str | None = Field(None, description="One library; every library when empty.")


@op("map_recompute", MapRecomputeInput, RecomputeReport, writes=True, methods=("POST",),
    path="/map/recompute", tool="map_recompute", in_query=True)  # fmt: skip
def map_recompute(brain: Brain, inp: MapRecomputeInput) -> RecomputeReport:
    """Recompute map blocks now (they are recomputed by themselves after reindex, save,
    ingest, collect and git-import): a new block is written only where the content changed;
    the routing centroids are recomputed from every chunk vector."""
    if not brain.cfg.libraries:
        raise UserError("no libraries yet", hint="brainmap library add NAME PATH")
    names = [inp.library] if inp.library else None
    with derive.write_lock(brain.home):  # the map itself: no other step follows
        return libmap.recompute(brain.cfg, brain.store, names, exact=True)
