"""Ops on the knowledge graph: neighbours, code backlinks, git history, audits, verify."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from brainmap import audit as audit_mod
from brainmap import derive
from brainmap.errors import UserError
from brainmap.gitlog import GitImportReport, import_history
from brainmap.graph import MAX_DEPTH, Breadcrumb, GraphReader, Hops, Neighborhood
from brainmap.keys import EntryRef
from brainmap.notes import SaveResult
from brainmap.ops.core import Brain, _Input, op
from brainmap.progress import ProgressFn


class NeighborsInput(_Input):
    node: str = Field(
        description="An entry id or 'library:path', a name as the map shows it ('Postgres', "
        "'nas'), or a node key: entity:NAME, file:LIBRARY/PATH, commit:SHA, person:EMAIL, "
        "tag:TAG, host:NAME, service:PROJECT/NAME."
    )
    depth: int = Field(1, ge=1, le=MAX_DEPTH, description="How many edges out to walk.")
    predicate: list[str] | None = Field(
        None, description="Only edges with these predicates (links_to, depends_on, ...)."
    )
    limit: int = Field(200, ge=1, le=5000, description="Most nodes to return.")
    library: list[str] | None = Field(
        None, description="Only edges of these libraries (what their notes and files say)."
    )


@op("neighbors", NeighborsInput, Neighborhood, methods=("GET", "POST"))
def neighbors(brain: Brain, inp: NeighborsInput) -> Neighborhood:
    """Walk the knowledge graph from a node: the entries that link to an entity or depend on
    it, what an entry links to, a file's commits and their authors, the code that references
    an entry, the facts collectors observed (root 'facts'; `ask` gives their confidence).
    Aliases are merged. Each edge carries its source (library, path, line)."""
    if inp.library:
        from brainmap.search import read_library_ids

        read_library_ids(brain.cfg, brain.store, inp.library)  # unknown names: a clear 404
    return GraphReader(brain.store).neighbors(
        inp.node, depth=inp.depth, predicates=inp.predicate, limit=inp.limit,
        libraries=[lib.name for lib in brain.cfg.libraries], only=inp.library,
    )  # fmt: skip


class HopsInput(_Input):
    ref: str = Field(description="Entry id or 'library:path'.")
    depth: int = Field(
        3, ge=1, le=3,
        description="1 the entry's file, 2 also the commits that changed it (after "
        "git-import), 3 also their authors.",
    )  # fmt: skip


@op("hops", HopsInput, Hops)
def hops(brain: Brain, inp: HopsInput) -> Hops:
    """The provenance chain of one entry: its file, the newest commits that changed it
    ([graph] hop_commits of them) and their authors, as deep as asked."""
    found = brain.store.entries.find_entry(inp.ref)
    row = brain.store.entries.entry(found[0]) if found is not None else None
    if row is None:
        raise UserError(f"no entry {inp.ref!r}", status=404)
    return GraphReader(brain.store).hops(
        [(row["library"], row["path"], row["source_rev"])], inp.depth,
        brain.cfg.graph.hop_commits,
    )[0]  # fmt: skip


class BacklinksInput(_Input):
    ref: str = Field(description="An entry slug (its file name without .md), id or library:path.")


@dataclass
class Backlinks:
    ref: str
    entries: list[str]
    breadcrumbs: list[Breadcrumb]


@op("backlinks", BacklinksInput, Backlinks, methods=("GET",), path="/backlinks/{ref:path}")
def backlinks(brain: Brain, inp: BacklinksInput) -> Backlinks:
    """Which code depends on this entry: the files and lines whose comments say
    'Brain: <slug>'. Check them before changing what the entry describes."""
    entries, crumbs = GraphReader(brain.store).backlinks(inp.ref)
    return Backlinks(inp.ref, entries, crumbs)


class RefsInput(_Input):
    file: str = Field(description="A code file: 'library:path' or a path on disk.")


@dataclass
class Refs:
    library: str
    path: str
    breadcrumbs: list[Breadcrumb]


@op("refs", RefsInput, Refs, methods=("GET",), path="/refs/{file:path}")
def refs(brain: Brain, inp: RefsInput) -> Refs:
    """The knowledge entries a code file points to with 'Brain: <slug>' comments: read them
    before editing the file."""
    library, rel = library_path(brain, inp.file)
    crumbs = GraphReader(brain.store).refs(library, rel)
    if not crumbs and not _is_library_file(brain.cfg.library(library).path, rel):
        # "no breadcrumbs" would pass a mistyped path for a file that names nothing
        raise UserError(f"no such file in library {library!r}: {rel}",
                        hint="paths are relative to the library's folder", status=404)  # fmt: skip
    return Refs(library, rel, crumbs)


def _is_library_file(root: Path, rel: str) -> bool:
    """True when ``rel`` is a file inside the folder ``root`` (never a probe outside it)."""
    try:
        top = root.resolve()
        target = (top / rel).resolve()
    except (OSError, ValueError):  # a loop of symlinks, a NUL byte
        return False
    return target.is_relative_to(top) and target.is_file()


def library_path(brain: Brain, ref: str) -> tuple[str, str]:
    """The library and path inside it of a file: ``library:path`` or a path on disk."""
    entry = EntryRef.parse(ref)
    if entry.library and any(x.name == entry.library for x in brain.cfg.libraries):
        return entry.library, entry.path
    found = brain.cfg.locate(Path(ref))
    if found is not None:
        return found[0].name, found[1]
    raise not_in_a_library(ref)


def not_in_a_library(ref: str) -> UserError:
    return UserError(f"{ref!r} is not in any library", hint="give it as library:path", status=404)


class GitImportInput(_Input):
    libraries: list[str] | None = Field(None, description="Library names; all git ones when empty.")


@dataclass
class GitImportResult:
    libraries: list[GitImportReport]
    not_git: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "library: why", when none was named


@op("git_import", GitImportInput, GitImportResult, writes=True, methods=("POST",),
    path="/git-import")  # fmt: skip
def git_import(
    brain: Brain, inp: GitImportInput, progress: ProgressFn | None = None
) -> GitImportResult:
    """Import git history (pygit2, no git binary) as File -has_version-> Commit
    -authored_by-> Person edges, from the last imported commit on; leaves get the commit that
    last wrote their content as source_rev."""
    from brainmap.gitlog import open_repository

    result = GitImportResult([])
    names = [lib.name for lib in brain.cfg.select(inp.libraries)]
    with derive.changing(brain.cfg, brain.store, names):
        for lib in brain.cfg.select(names):
            if inp.libraries:  # named libraries must be importable
                result.libraries.append(import_history(brain.store, lib, progress))
                continue
            if not lib.path.is_dir() or open_repository(lib.path) is None:
                result.not_git.append(lib.name)
                continue
            try:
                result.libraries.append(import_history(brain.store, lib, progress))
            except UserError as exc:  # one unreadable repository does not stop the others
                result.failed.append(f"{lib.name}: {exc.message}")
    return result


class AuditInput(_Input):
    kind: Literal["stale", "contradict"] = Field(
        "stale",
        description="stale: changed sources, re-verify due. contradict: facts on which "
        "sources disagree, with both sides' evidence.",
    )
    library: list[str] | None = Field(None, description="Only these libraries.")


@op("audit", AuditInput, audit_mod.AuditReport, methods=("GET",))
def audit(brain: Brain, inp: AuditInput) -> audit_mod.AuditReport:
    """Audit the brain. kind=stale lists entries whose file changed on disk or in git after
    they were indexed, and entries whose last_verified is older than the configured age,
    each with the command that refreshes it. kind=contradict lists facts on which sources
    disagree (a README against its compose file), with both sides' evidence and the rule
    (authority or freshness) that resolved each, if any."""
    if inp.kind == "contradict":
        return audit_mod.contradict(brain.cfg, brain.store, inp.library)
    return audit_mod.stale(brain.cfg, brain.store, inp.library, dt.date.today())


class VerifyInput(_Input):
    ref: str = Field(description="Entry id or 'library:path'.")


@op("verify", VerifyInput, SaveResult, writes=True, methods=("POST",), handed=True)
def verify(brain: Brain, inp: VerifyInput) -> SaveResult:
    """Mark an entry as checked today: sets last_verified in its frontmatter (nothing else in
    the file changes) and re-indexes it."""
    found = brain.store.entries.find_entry(inp.ref)
    if found is None:
        raise UserError(f"no entry {inp.ref!r}", status=404)
    result = brain.notes.verify(found[0], dt.date.today())
    brain.changed([result.library])
    return result
