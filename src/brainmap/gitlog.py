"""Git history into the graph with pygit2 (no git binary): File -has_version-> Commit
-authored_by-> Person, incrementally from the last imported HEAD.

Commits are written in batches, each one transaction; a commit already in the library's
history is skipped, so an interrupted import is completed (never duplicated) by the next run,
and the HEAD mark moves only once everything up to it is in.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from brainmap.config import LibraryConfig
from brainmap.errors import UserError
from brainmap.graph import commit_key, file_node, person_key
from brainmap.store import AUTHORED_BY, HAS_VERSION, EdgeRecord, Graph, NodeRecord, Store

if TYPE_CHECKING:
    import pygit2

BATCH_COMMITS = 500
MAX_MESSAGE = 2000

ProgressFn = Callable[[str, int, int | None], None]


@dataclass
class GitImportReport:
    library: str
    repository: str
    head: str | None
    commits: int = 0  # imported by this run
    versions: int = 0  # file versions (has_version edges) written
    skipped_merges: int = 0
    up_to_date: bool = False
    diverged: bool = False  # HEAD does not descend from the last import (branch switch, rebase)
    source_revs_updated: int = 0
    seconds: float = 0.0


def open_repository(path: Path) -> pygit2.Repository | None:
    """The git repository holding ``path``, or None (also when git refuses to open it)."""
    import pygit2

    try:
        found = pygit2.discover_repository(str(path))
        return pygit2.Repository(found) if found else None
    except pygit2.GitError:
        return None


def import_history(
    store: Store, lib: LibraryConfig, progress: ProgressFn | None = None
) -> GitImportReport:
    """Import the commits of the library's repository that touch the library's files.

    Raises :class:`UserError` when the library is not in a git work tree or git cannot read
    it (a repository owned by another user, a damaged or partial clone).
    """
    import pygit2

    try:
        return _import(store, lib, progress)
    except (pygit2.GitError, KeyError) as exc:
        raise UserError(
            f"library {lib.name!r}: git cannot read {lib.path}: {exc}",
            hint="check the repository with `git status` there (ownership, damage, partial clone)",
        ) from exc


def _import(store: Store, lib: LibraryConfig, progress: ProgressFn | None) -> GitImportReport:
    import pygit2
    from pygit2.enums import SortMode

    started = time.monotonic()
    if lib.path.is_dir():
        found = pygit2.discover_repository(str(lib.path))
        repo = pygit2.Repository(found) if found else None
    else:
        repo = None
    if repo is None or repo.workdir is None:
        raise UserError(
            f"library {lib.name!r} ({lib.path}) is not inside a git work tree",
            hint="`git init` it, or skip git-import for this library",
        )
    workdir = Path(repo.workdir).resolve()
    rel = lib.path.resolve().relative_to(workdir).as_posix()
    prefix = "" if rel == "." else rel
    library_id = store.ensure_library(lib.name, str(lib.path), lib.scope)
    report = GitImportReport(lib.name, str(workdir), None)
    if repo.head_is_unborn:
        report.up_to_date = True
        return report
    head = repo.head.peel(pygit2.Commit)
    report.head = str(head.id)
    state = store.git_state(library_id)
    if state is not None and state[:2] != (str(workdir), prefix):
        store.forget_git_history(library_id)  # the library now lives elsewhere
        state = None
    walker = repo.walk(head.id, SortMode.TOPOLOGICAL | SortMode.TIME)
    if state is not None:
        old = state[2]
        if old == report.head:
            report.up_to_date = True
            report.source_revs_updated = store.refresh_source_revs(library_id, lib.name)
            return report
        # commits never change: after a branch switch or a rewrite, the commits imported
        # before are kept and skipped; only those the old HEAD does not reach are walked
        try:
            old_id = pygit2.Oid(hex=old)
            report.diverged = not repo.descendant_of(head.id, old_id)
            walker.hide(old_id)
        except (KeyError, ValueError, pygit2.GitError):
            report.diverged = True  # the old HEAD is gone (gc'd after a rewrite)
    wanted = _library_files(lib)
    batch: list[pygit2.Commit] = []
    for commit in walker:
        batch.append(commit)
        if len(batch) >= BATCH_COMMITS:
            _import_batch(store, lib.name, library_id, batch, prefix, wanted, report)
            batch = []
            if progress:
                progress("git", report.commits, None)
    _import_batch(store, lib.name, library_id, batch, prefix, wanted, report)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.mark_git_import(library_id, str(workdir), prefix, report.head, now)
    report.source_revs_updated = store.refresh_source_revs(library_id, lib.name)
    store.checkpoint()
    report.seconds = time.monotonic() - started
    return report


def _library_files(lib: LibraryConfig) -> Callable[[str], bool]:
    """Which paths' history matters: the files the library indexes or reads breadcrumbs from."""
    paths, code = lib.paths, lib.code_paths
    return lambda rel: paths.wants(rel) or (code is not None and code.wants(rel))


def _import_batch(
    store: Store,
    library: str,
    library_id: int,
    commits: list[pygit2.Commit],
    prefix: str,
    wanted: Callable[[str], bool],
    report: GitImportReport,
) -> None:
    if not commits:
        return
    done = store.imported_commits(library_id, [commit_key(str(c.id)) for c in commits])
    graph = Graph()
    nodes: dict[str, NodeRecord] = {}
    for commit in commits:
        key = commit_key(str(commit.id))
        if key in done:
            continue
        if len(commit.parents) > 1:
            report.skipped_merges += 1  # its changes are in the commits it merges
            continue
        changed = [(rel, blob) for rel, blob in _changed_files(commit, prefix) if wanted(rel)]
        if not changed:
            continue
        when = dt.datetime.fromtimestamp(commit.commit_time, dt.UTC).isoformat(timespec="seconds")
        author = commit.author
        person = person_key(author.email or "", author.name or "")
        message = commit.message.strip()
        nodes.setdefault(
            person,
            NodeRecord(person, "person", author.name or author.email,
                       {"name": author.name, "email": author.email}),
        )  # fmt: skip
        nodes[key] = NodeRecord(
            key, "commit", message.split("\n", 1)[0][:200],
            {"sha": str(commit.id), "time": when, "author": author.name,
             "message": message[:MAX_MESSAGE]},
        )  # fmt: skip
        sha = str(commit.id)
        graph.edges.append(EdgeRecord(key, AUTHORED_BY, person, None, None, when, sha))
        for rel, blob in changed:
            node = file_node(library, rel)
            nodes.setdefault(node.key, node)
            graph.edges.append(
                EdgeRecord(node.key, HAS_VERSION, key, rel, None, when, sha, {"blob": blob})
            )
            report.versions += 1
        report.commits += 1
    graph.nodes = list(nodes.values())
    store.put_git_history(library_id, graph)


def _changed_files(commit: pygit2.Commit, prefix: str) -> list[tuple[str, str]]:
    """(library-relative path, blob id) of the files a commit added or modified under
    ``prefix``; deletions are not versions."""
    from pygit2.enums import DeltaStatus

    tree = _subtree(commit.tree, prefix)
    if tree is None:
        return []
    if commit.parents:
        before = _subtree(commit.parents[0].tree, prefix)
        if before is not None and before.id == tree.id:
            return []  # nothing changed inside the library folder
        diff = before.diff_to_tree(tree) if before is not None else tree.diff_to_tree(swap=True)
    else:
        diff = tree.diff_to_tree(swap=True)
    return [
        (d.new_file.path, str(d.new_file.id))
        for d in diff.deltas
        if d.status != DeltaStatus.DELETED
    ]


def _subtree(tree: pygit2.Tree, prefix: str) -> pygit2.Tree | None:
    import pygit2

    if not prefix:
        return tree
    try:
        sub = tree[prefix]
    except KeyError:
        return None
    return sub if isinstance(sub, pygit2.Tree) else None
