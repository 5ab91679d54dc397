"""Ops on libraries and indexing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
)

from brainmap import derive
from brainmap.config import (
    LibraryConfig,
    check_library_name,
)
from brainmap.embedding import ProgressFn
from brainmap.errors import UserError
from brainmap.indexer import ReindexReport
from brainmap.indexer import reindex as run_reindex
from brainmap.ops.core import Brain, _Input, op

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
    include: list[str] | None = Field(None, description="Globs of files to index.")
    exclude: list[str] | None = Field(None, description="Globs of files to leave out.")
    code: list[str] | None = Field(
        None, description="Globs of code files read for 'Brain: slug' comments ([] for none)."
    )


class NoInput(_Input):
    pass


class LibraryNameInput(_Input):
    name: str


def _library_infos(brain: Brain, libs: list[LibraryConfig]) -> list[LibraryInfo]:
    counts = brain.store.library_counts()
    indexed_at = {row.name: row.indexed_at for row in brain.store.libraries()}
    out = []
    for lib in libs:
        entries, chunks = counts.get(lib.name, (0, 0))
        info = LibraryInfo(lib.name, str(lib.path), lib.scope, lib.include, lib.exclude, lib.code)
        info.entries, info.chunks = entries, chunks
        info.indexed_at, info.exists = indexed_at.get(lib.name), lib.path.is_dir()
        out.append(info)
    return out


@op("library_add", LibraryAddInput, LibraryInfo, writes=True)
def library_add(brain: Brain, inp: LibraryAddInput) -> LibraryInfo:
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
    brain.cfg.libraries.append(lib)
    brain.save_config()
    brain.store.ensure_library(lib.name, str(path), lib.scope)
    # no after-change step: nothing derives from a library before its first reindex (the
    # MCP instructions list it as not indexed yet by themselves)
    return _library_infos(brain, [lib])[0]


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
        return LibraryRemoved(lib.name, brain.store.delete_library(lib.name))


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
