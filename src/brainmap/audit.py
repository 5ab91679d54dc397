"""Audits of what the brain knows. ``stale``: leaves whose source changed after they were
observed (on disk, or in git history), and entries due for re-verification. ``contradict``:
facts on which sources disagree, with both sides' evidence."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from brainmap.config import Config
from brainmap.facts.models import Conflict, contradictions
from brainmap.indexer import diff_library, entry_id
from brainmap.store import Store


@dataclass
class AuditItem:
    """One finding, with the command that refreshes it."""

    kind: str  # changed_on_disk | deleted_on_disk | changed_in_git | reverify | code_changed
    # | code_new | code_deleted
    library: str
    path: str
    entry: str | None
    detail: str
    observed_rev: str | None
    current_rev: str | None
    refresh: str


@dataclass
class AuditReport:
    kind: str
    libraries: list[str]
    items: list[AuditItem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)  # kind=contradict


def contradict(cfg: Config, store: Store, names: list[str] | None) -> AuditReport:
    """Conflicts between sources (a README that says 8080 where the compose file says 8000),
    each with both sides' evidence and the rule that resolved it, if any."""
    libs = cfg.select(names)
    report = AuditReport("contradict", [lib.name for lib in libs])
    ids = list(store.entries.library_ids(lib.name for lib in libs).values())
    report.conflicts = contradictions(store.facts.assertions(ids))
    for conflict in report.conflicts:
        key = f"resolved_by_{conflict.resolved_by}" if conflict.resolved_by else "unresolved"
        report.counts[key] = report.counts.get(key, 0) + 1
    return report


def _head_check(path: Path) -> Callable[[str, str], bool]:
    """``newer(sha, indexed)``: whether commit ``sha`` comes after the indexed commit on the
    history of HEAD (it descends from it, and HEAD has it). A version on another branch, or
    one that a merge replaced, is not newer. True when the repository cannot be read."""
    from brainmap.gitlog import open_repository

    repo = open_repository(path)
    if repo is None or repo.head_is_unborn:
        return lambda sha, indexed: True

    def newer(sha: str, indexed: str) -> bool:
        import pygit2

        try:
            new, old, head = pygit2.Oid(hex=sha), pygit2.Oid(hex=indexed), repo.head.target
            on_head = head == new or repo.descendant_of(head, new)
            return bool(on_head and repo.descendant_of(new, old))
        except (ValueError, KeyError, pygit2.GitError):
            return True

    return newer


def stale(cfg: Config, store: Store, names: list[str] | None, today: dt.date) -> AuditReport:
    """Entries whose file changed on disk or in the imported git history after the revision
    they were indexed at, and entries whose ``last_verified`` is older than ``verify_days``."""
    libs = [lib for lib in cfg.select(names) if lib.path.is_dir()]
    report = AuditReport("stale", [lib.name for lib in libs])
    ids = store.entries.library_ids(lib.name for lib in libs)
    on_disk: set[tuple[str, str]] = set()
    for lib in libs:
        if lib.name not in ids:
            continue
        diff = diff_library(cfg, store, lib)
        for kind, rels in (("changed_on_disk", diff.changed), ("deleted_on_disk", diff.gone)):
            for rel in rels:
                eid = entry_id(lib.name, rel)
                row = store.entries.entry(eid)
                on_disk.add((lib.name, rel))
                report.items.append(
                    AuditItem(
                        kind, lib.name, rel, eid,
                        "the file changed after it was indexed" if kind == "changed_on_disk"
                        else "the file was deleted after it was indexed",
                        row["source_rev"] if row else None, None,
                        f"brainmap reindex {lib.name}",
                    )
                )  # fmt: skip
        # code files are leaves too: their breadcrumbs may point elsewhere now
        for kind, rels in (("code_changed", diff.code_changed), ("code_new", diff.code_new),
                           ("code_deleted", diff.code_gone)):  # fmt: skip
            for rel in rels:
                report.items.append(
                    AuditItem(
                        kind, lib.name, rel, None,
                        f"code file {kind.removeprefix('code_')} since the last reindex: its "
                        "Brain: comments are not read yet",
                        None, None, f"brainmap reindex {lib.name}",
                    )
                )  # fmt: skip
    heads = {lib.name: _head_check(lib.path) for lib in libs}
    for eid, library, rel, blob, rev, commit, when, new_blob in store.graph.latest_versions(
        list(ids.values())
    ):
        sha = commit.removeprefix("commit:")
        # only content git had is compared: a local edit (source_rev mtime:...) is newer
        # than any commit, and checking out the newer version would throw it away
        if new_blob == blob or (library, rel) in on_disk or not rev or rev.startswith("mtime:"):
            continue
        if rev == sha or not heads[library](sha, rev):
            continue  # another branch's version, or one a merge replaced, is not newer
        report.items.append(
            AuditItem(
                "changed_in_git", library, rel, eid,
                f"commit {sha[:10]} ({when}) changed the file after the indexed version",
                rev, sha,
                f"update the work tree (git pull / checkout), then brainmap reindex {library}",
            )
        )  # fmt: skip
    if cfg.graph.verify_days:
        before = (today - dt.timedelta(days=cfg.graph.verify_days)).isoformat()
        for eid, library, rel, verified in store.entries.reverify_due(before, list(ids.values())):
            report.items.append(
                AuditItem(
                    "reverify", library, rel, eid,
                    f"last verified {verified[:10]}, more than {cfg.graph.verify_days} days ago",
                    verified, None, f"check it, then: brainmap verify {library}:{rel}",
                )
            )  # fmt: skip
    for item in report.items:
        report.counts[item.kind] = report.counts.get(item.kind, 0) + 1
    return report
