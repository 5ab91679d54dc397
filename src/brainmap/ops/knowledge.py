"""Ops that read knowledge: search and get (save and ingest are in ``ops.notes``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    Field,
    field_validator,
)

from brainmap import usage
from brainmap.config import (
    scope_label,
)
from brainmap.errors import UserError
from brainmap.ops.core import Brain, Caller, _Input, op
from brainmap.search import Mode, SearchResult, parse_since
from brainmap.store import source_of

# --- search and get -------------------------------------------------------------------------


_Age = Annotated[str, Field(pattern=r"^[0-9]{1,9} ?[dwmyDWMY]$")]


class SearchInput(_Input):
    query: str = Field(
        # `q` too: the GUI's search page and most search URLs name it so
        validation_alias=AliasChoices("query", "q"),
        description="Any text: keywords or a natural-language question.",
    )
    library: list[str] | None = Field(None, description="Only these libraries.")
    type: list[str] | None = Field(None, description="Only these entry types (gotcha, note, ...).")
    tag: list[str] | None = Field(None, description="Only entries with all of these tags.")
    since: dt.date | dt.datetime | _Age | None = Field(
        None, description="Only entries dated on/after this date, or this recent (30d, 6m, 1y)."
    )
    limit: int = Field(10, ge=1, le=100)
    offset: int = Field(
        0, ge=0, le=900, description="Skip this many of the best hits first (the next page)."
    )
    mode: Mode = "hybrid"
    project: str | None = Field(
        None,
        description="Only entries of this project: those saying `project: NAME`, and those of "
        "its library ('.' is the project of the current directory).",
        max_length=200,
    )
    route: bool = Field(
        True,
        description="With many libraries, search only those whose map block is nearest the "
        "query (the result names them in 'routed'); false searches every library.",
    )
    hop: int = Field(
        0, ge=0, le=3,
        description="Attach provenance to each hit: 1 its file, 2 also the commits that "
        "changed it (after git-import), 3 also their authors.",
    )  # fmt: skip
    expand: bool | None = Field(
        None,
        description="Also search the reasoner's rewrites of the query (keywords, paraphrases, "
        "a hypothetical answer) and fuse them: one model call, a second or more. Null: the "
        "config default ([reasoner] expand). Without a reasoner the plain hits, and "
        "'reasoner.skipped' says why.",
    )
    include_inactive: bool = Field(
        False,
        description="Also superseded, retired and archived entries (left out by default); "
        "each hit's 'status' says which.",
    )

    @field_validator("since", mode="before")
    @classmethod
    def _readable_since(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                parse_since(value)
            except UserError:
                raise ValueError("not a date: use YYYY-MM-DD or an age such as 30d, 6m") from None
        return value


@op("search", SearchInput, SearchResult, methods=("GET", "POST"))
def search(brain: Brain, inp: SearchInput, caller: Caller = "cli") -> SearchResult:
    """Search the knowledge brain: the markdown notes of every library (gotchas, decisions,
    patterns, guides, diaries), with hybrid keyword + semantic ranking, in any language.
    Search first, before answering questions about these projects or repeating work.
    Returns the best chunks, each with title, library, path and line range, the full chunk
    text and the parts of its score, and a match level (strong or weak); when nothing
    matches closely, no hits and match "none" (say so rather than guess). Filter with
    library, type, tag or since; hop=3 adds the file, commits and authors behind each hit."""
    from brainmap.ops.lookup import find

    since = inp.since if inp.since is None or isinstance(inp.since, str) else inp.since.isoformat()
    return find(
        brain, inp.query, library=inp.library, type=inp.type, tag=inp.tag, since=since,
        limit=inp.limit, offset=inp.offset, mode=inp.mode, route=inp.route, hop=inp.hop,
        project=inp.project, expand=inp.expand, include_inactive=inp.include_inactive,
        caller=caller,
    )  # fmt: skip


@dataclass
class ChunkInfo:
    ord: int
    heading: str
    line_start: int
    line_end: int
    text: str


@dataclass
class EntryInfo:
    id: str
    library: str
    scope: str
    path: str
    file: str
    title: str
    type: str
    tags: list[str]
    aliases: list[str]
    project: str | None
    created: str | None
    last_verified: str | None
    updated: str
    observed_at: str
    source_rev: str | None
    content_hash: str
    meta: dict[str, Any]
    warnings: list[str]
    chunks: list[ChunkInfo]
    # active, superseded, retired or archived; and the entries on either side of a
    # supersession (id, library, path, title, status)
    status: str = "active"
    superseded_by: list[dict[str, str]] = field(default_factory=list)
    supersedes: list[dict[str, str]] = field(default_factory=list)
    # machine:file: the machine whose folder holds the file (a shared index holds many's)
    source: str = ""


class GetInput(_Input):
    ref: str = Field(description="Entry id, 'library:path', or a path inside a library.")


@op("get", GetInput, EntryInfo, methods=("GET",), path="/get/{ref:path}")
def get(brain: Brain, inp: GetInput, caller: Caller = "cli") -> EntryInfo:
    """Fetch one whole entry, by the id of a search hit or as 'library:path': its metadata
    (type, tags, dates, provenance) and all its chunks with line ranges. Use it after search
    when a hit looks relevant and you need the rest of the entry."""
    found = locate_entry(brain, inp.ref)
    if found is None:
        raise UserError(
            f"no entry {inp.ref!r}", hint="use an id or path from `brainmap search`", status=404
        )
    row = brain.store.entries.entry(found[0])
    assert row is not None
    usage.opened(brain.cfg, row["id"], row["library"], row["path"], caller)
    links = brain.store.entries.supersession(found[0])
    row["warnings"] += [
        f"{u['role']}: {u['library']}:{u['slug']} names no indexed entry"
        for u in links["unresolved"]
    ]
    chunks = [
        ChunkInfo(c.ord, c.heading, c.line_start, c.line_end, c.text)
        for c in brain.store.entries.entry_chunks(found[0])
    ]
    return EntryInfo(
        id=row["id"], library=row["library"],
        scope=scope_label(row["library"], row["scope"]),
        path=row["path"], file=str(Path(row["library_path"]) / row["path"]),
        title=row["title"], type=row["type"], tags=row["tags"], aliases=row["aliases"],
        project=row["project"], created=row["created"], last_verified=row["last_verified"],
        updated=row["updated"], observed_at=row["observed_at"], source_rev=row["source_rev"],
        content_hash=row["content_hash"], meta=row["meta"], warnings=row["warnings"],
        chunks=chunks, status=row["status"], superseded_by=links["superseded_by"],
        supersedes=links["supersedes"],
        source=source_of(row["host"], row["library_path"], row["path"]),
    )  # fmt: skip


def locate_entry(brain: Brain, ref: str) -> tuple[str, str] | None:
    """The entry ``ref`` names, as (id, library): an id, ``library:path``, a path inside a
    library, or a file's path (absolute or relative to the cwd)."""
    found = brain.store.entries.find_entry(ref)
    if found is not None:
        return found
    located = brain.cfg.locate(Path(ref))
    if located is None:
        return None
    return brain.store.entries.find_entry(f"{located[0].name}:{located[1]}")
