"""Ops on libraries and indexing."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
)

from brainmap import derive
from brainmap.config import (
    MARKDOWN_SUFFIXES,
    LibraryConfig,
    check_library_name,
    glob_regex,
)
from brainmap.errors import UserError
from brainmap.indexer import LibraryReport, ReindexReport
from brainmap.indexer import reindex as run_reindex
from brainmap.ops.core import Brain, _Input, op
from brainmap.progress import ProgressFn
from brainmap.sync import SyncReport

# --- libraries ------------------------------------------------------------------------------


@dataclass
class LibraryInfo:
    name: str
    path: str
    scope: str
    include: list[str]
    exclude: list[str]
    code: list[str] = field(default_factory=list)
    entries: int = 0
    chunks: int = 0
    indexed_at: str | None = None
    exists: bool = True


class LibraryAddInput(_Input):
    name: str = Field(description="Short name: letters, digits, '.', '_', '-'.")
    path: str = Field(description="Folder of markdown files.")
    scope: Literal["project", "global"] = "project"
    include: list[str] | None = Field(
        None,
        description="Globs of files to index; files the code globs match stay code files.",
    )
    exclude: list[str] | None = Field(None, description="Globs of files to leave out.")
    code: list[str] | None = Field(
        None, description="Globs of code files read for 'Brain: slug' comments ([] for none)."
    )


class NoInput(_Input):
    pass


class LibraryNameInput(_Input):
    name: str


def _library_infos(brain: Brain, libs: list[LibraryConfig]) -> list[LibraryInfo]:
    counts = brain.store.entries.library_counts()
    scanned = {row.name: row.indexed_at for row in brain.store.entries.libraries()}
    out = []
    for lib in libs:
        entries, chunks, last_ns = counts.get(lib.name, (0, 0, None))
        info = LibraryInfo(lib.name, str(lib.path), lib.scope, lib.include, lib.exclude, lib.code)
        info.entries, info.chunks = entries, chunks
        # a save indexes its file without a scan: "never indexed" beside its entries would
        # be wrong, so the later of the last scan and the last entry indexed
        last = None if last_ns is None else _utc(last_ns / 1e9)
        info.indexed_at = max(filter(None, (scanned.get(lib.name), last)), default=None)
        info.exists = lib.path.is_dir()
        out.append(info)
    return out


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


@dataclass
class LibraryAdded(LibraryInfo):
    notes: list[str] = field(default_factory=list)  # what the globs do that may surprise
    warnings: list[str] = field(default_factory=list)  # files another library indexes too


@op("library_add", LibraryAddInput, LibraryAdded, writes=True)
def library_add(brain: Brain, inp: LibraryAddInput) -> LibraryAdded:
    """Register a folder of markdown as a library (its files are never modified)."""
    check_library_name(inp.name)
    if any(lib.name == inp.name for lib in brain.cfg.libraries):
        raise UserError(
            f"library {inp.name!r} already exists", hint="brainmap library list", status=409
        )
    path = Path(inp.path).expanduser().absolute()
    if not path.is_dir():
        raise UserError(f"{inp.path} is not a folder")
    lib = LibraryConfig(inp.name, path, inp.scope)
    if inp.include:
        lib.include = list(inp.include)
    if inp.exclude is not None:
        lib.exclude = list(inp.exclude)
    if inp.code is not None:
        lib.code = list(inp.code)
    lib.paths  # noqa: B018 - an invalid glob is refused now, not at the next reindex
    lib.code_paths  # noqa: B018
    overlaps = _overlaps(brain.cfg.libraries, lib)
    brain.cfg.libraries.append(lib)
    brain.save_config()
    brain.store.entries.ensure_library(lib.name, str(path), lib.scope)
    # no after-change step: nothing derives from a library before its first reindex (the
    # MCP instructions list it as not indexed yet by themselves)
    return LibraryAdded(**vars(_library_infos(brain, [lib])[0]), notes=_code_includes(lib),
                        warnings=overlaps)  # fmt: skip


def _overlaps(libraries: list[LibraryConfig], new: LibraryConfig) -> list[str]:
    """Refuse a folder added again with the same files (a mistake: every hit twice); a
    warning for each library sharing files with ``new`` otherwise (the same folder with other globs,
    a folder inside another: legitimate, but its files are indexed twice)."""
    try:
        here = new.path.resolve()
    except OSError:
        return []
    notes = []
    for lib in libraries:
        try:
            there = lib.path.resolve()
        except OSError:
            continue
        if there == here:
            if (lib.include, lib.exclude) == (new.include, new.exclude):
                raise UserError(
                    f"{new.path} is already library {lib.name!r}",
                    hint=f"search it as {lib.name!r}; to index other files of the folder, add "
                    "it again with other --include/--exclude globs",
                    status=409,
                )
            notes.append(f"this folder is also library {lib.name!r}: files both select are "
                         "indexed twice")  # fmt: skip
        elif here.is_relative_to(there):
            notes.append(f"this folder is inside library {lib.name!r} ({lib.path}): files both "
                         "select are indexed twice")  # fmt: skip
        elif there.is_relative_to(here):
            notes.append(f"library {lib.name!r} ({lib.path}) is inside this folder: files both "
                         "select are indexed twice")  # fmt: skip
    return notes


def _code_includes(lib: LibraryConfig) -> list[str]:
    """A note for each include glob that matches files the code globs take: `include` alone
    suggests they become entries, but a code file stays code (see ``indexer.scan``)."""
    code = lib.code_paths
    notes = []
    for glob in lib.include:
        # a name the glob matches: every wildcard stands for "x" ('**/*.py' -> 'x.py')
        probe = re.sub(r"\[[^\]]*\]|[*?]", "x", re.sub(r"\*\*/", "", glob))
        if (
            code is not None
            and glob_regex(glob).fullmatch(probe)
            and not probe.lower().endswith(MARKDOWN_SUFFIXES)
            and code.wants(probe)
        ):
            notes.append(
                f"--include {glob!r} matches code files such as {probe}: they stay code files, "
                "read for `Brain:` comments (and config facts), not indexed as entries; to "
                "index them as text, give --code globs that leave them out"
            )
    return notes


@dataclass
class LibraryList:
    libraries: list[LibraryInfo]


@op("library_list", NoInput, LibraryList, methods=("GET",), path="/libraries")
def library_list(brain: Brain, inp: NoInput) -> LibraryList:
    """List the libraries (the knowledge sources: project docs, the global brain, imported
    repos) with their scope, folder, entry and chunk counts."""
    return LibraryList(_library_infos(brain, brain.cfg.libraries))


@dataclass
class LibraryRemoved:
    name: str
    entries_removed: int


@op("library_remove", LibraryNameInput, LibraryRemoved, writes=True)
def library_remove(brain: Brain, inp: LibraryNameInput) -> LibraryRemoved:
    """Forget a library: its index rows go, its files stay untouched."""
    lib = brain.cfg.library(inp.name)
    # never under the feet of a running reindex; its partners lose their bridges to it
    with derive.changing(brain.cfg, brain.store, [], removed=[lib.name]):
        brain.cfg.libraries.remove(lib)
        brain.save_config()
        return LibraryRemoved(lib.name, brain.store.entries.delete_library(lib.name))


# --- indexing -------------------------------------------------------------------------------


class ReindexInput(_Input):
    libraries: list[str] | None = Field(None, description="Library names; all when empty.")
    full: bool = Field(False, description="Re-read and re-parse every file.")
    embed: bool = Field(True, description="Compute missing embeddings after the text pass.")


@op("reindex", ReindexInput, ReindexReport, writes=True, methods=("POST",))
def reindex(brain: Brain, inp: ReindexInput, progress: ProgressFn | None = None) -> ReindexReport:
    """Bring the index up to date with the library folders (changed files only: text first,
    then vectors). Run it after files were edited outside brainmap; save and ingest index
    what they write by themselves."""
    if not brain.cfg.libraries:
        raise UserError("no libraries yet", hint="brainmap library add NAME PATH")
    names = [lib.name for lib in brain.cfg.select(inp.libraries)]
    with derive.changing(brain.cfg, brain.store, names, embed=inp.embed, rollups=True) as done:
        report = run_reindex(
            brain.cfg, brain.store, names, full=inp.full, embed=inp.embed, progress=progress
        )
    report.facts_paired, report.map, report.rollups = done.facts_paired, done.map, done.rollups
    return report


def read_with(brain: Brain, libraries: list[str]) -> dict[str, set[str]]:
    """Library -> the files (relative paths) its compose files were read with, which the scan
    may not read (those their ``extends`` name, their include's env files, the files their
    ``COMPOSE_FILE`` names): what ``brainmap watch`` watches besides the library's files."""
    ids = brain.store.entries.library_ids(libraries)
    return {
        name: {str(read[0]) for reads in brain.store.facts.compose_reads(library_id).values()
               for read in reads}
        for name, library_id in ids.items()
    }  # fmt: skip


# --- sync -----------------------------------------------------------------------------------


class SyncInput(_Input):
    library: str | None = Field(
        None, description="The library to sync; by default the global one ([save] library)."
    )
    embed: bool = Field(True, description="Compute the embeddings of what the merge brought.")
    backend: Literal["auto", "git", "pygit2"] = Field(
        "auto", description="The git binary when there is one (auto), or pygit2."
    )


@dataclass
class SyncResult(SyncReport):
    """What the sync did in git, then what the reindex of the library did."""

    index: LibraryReport | None = None
    map: list[str] = field(default_factory=list)  # libraries whose map block was recomputed


@op("sync", SyncInput, SyncResult, writes=True)
def sync(brain: Brain, inp: SyncInput) -> SyncResult:
    """Commit the library's changes (saves, ingests, diary), merge its remote's branch (the
    diary merges by union), push; then reindex it. CLI only: it runs git as the user."""
    from brainmap.sync import summarize, sync_library

    cfg = brain.cfg
    lib = cfg.library(inp.library or cfg.save.library)
    # the index and the rollups of completed periods first, so that the commit holds them
    # (outside the library's lock: a reindex takes the home's write lock first)
    indexed, maps, _ = _reindex_one(brain, lib.name, inp.embed)
    report = sync_library(cfg, lib, backend=inp.backend)
    if report.pulled_commits and not report.conflicts:
        indexed, more_maps, rollups = _reindex_one(brain, lib.name, inp.embed)
        maps += [name for name in more_maps if name not in maps]
        if rollups and not report.offline:
            # rendered again from the merged days: committed and pushed now, so that a sync
            # leaves the library clean (once: the remote may move on for ever)
            more = sync_library(cfg, lib, backend=inp.backend)
            report.committed += [p for p in more.committed if p not in report.committed]
            report.commit = more.commit or report.commit
            report.pulled_commits += more.pulled_commits
            report.pulled_files += [p for p in more.pulled_files if p not in report.pulled_files]
            report.pushed = report.pushed or more.pushed
            report.conflicts, report.offline = more.conflicts, more.offline
            report.message = more.message if more.offline or more.conflicts else summarize(report)
            if more.pulled_commits and not more.conflicts:
                indexed, more_maps, _ = _reindex_one(brain, lib.name, inp.embed)
                maps += [name for name in more_maps if name not in maps]
    result = SyncResult(**vars(report))
    result.index = indexed
    result.map = maps
    return result


def _reindex_one(
    brain: Brain, name: str, embed: bool
) -> tuple[LibraryReport | None, list[str], list[str]]:
    """Reindex one library and run the after-change step with rollups: (its report, the
    libraries given a new map block, the rollups written in it)."""
    with derive.changing(brain.cfg, brain.store, [name], embed=embed, rollups=True) as done:
        report = run_reindex(brain.cfg, brain.store, [name], embed=embed)
    rollups = [r for r in done.rollups if r.startswith(f"{name}:")]
    return next(iter(report.libraries), None), done.map, rollups
