"""Pruning: the entries nobody uses any more, found from usage telemetry, and moved out of
the way into their library's ``archive/`` folder, never deleted.

An entry is listed when, within the period (six months by default), it was neither served
(a search hit, a hook's injection) nor opened (``get``): *unused*; when it drew more
not-useful than useful feedback: *not useful*; or when its ``last_verified`` is older than
``[graph] verify_days`` (the rule of ``brainmap audit stale``): *stale*. An entry newer than
the period is never unused, and no entry is while usage has been recorded for less than the
period. Archiving moves the unused and not-useful ones (a stale entry still in use wants a
re-check, not the archive) to ``archive/<its path>``: a rename that git sees as one, under the
library's lock, then a reindex of the library so that the index follows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from brainmap import derive
from brainmap.config import Config
from brainmap.errors import UserError
from brainmap.indexer import reindex
from brainmap.safefile import library_lock, move
from brainmap.store import Store, indexed_entries
from brainmap.usage import counted, open_usage

ARCHIVE = "archive"  # the folder of a library that archived entries go to
UNUSED, NOT_USEFUL, STALE = "unused", "not_useful", "stale"


@dataclass
class PruneItem:
    """One entry to prune, with why."""

    id: str
    library: str
    path: str
    title: str
    type: str
    kinds: list[str]  # unused | not_useful | stale
    reasons: list[str]
    archive: bool  # what --archive moves: unused or not useful (stale alone: verify it)
    hits: int = 0  # all time
    gets: int = 0
    useful: int = 0  # within the period
    not_useful: int = 0
    last_used: str | None = None
    moved_to: str | None = None  # library-relative, once archived


@dataclass
class PruneReport:
    months: int
    since: str  # the start of the period (a date)
    usage_since: str | None  # since when usage is recorded
    libraries: list[str]
    items: list[PruneItem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    archived: int = 0
    warnings: list[str] = field(default_factory=list)


def months_before(day: dt.date, months: int) -> dt.date:
    """The same day ``months`` calendar months earlier (the month's last day if shorter)."""
    index = day.year * 12 + day.month - 1 - months
    year, month = divmod(index, 12)
    for last in (31, 30, 29, 28):
        try:
            return dt.date(year, month + 1, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def plan(
    cfg: Config, store: Store, names: list[str] | None, months: int, today: dt.date
) -> PruneReport:
    """What to prune in the libraries named (all when None), each entry with its reasons."""
    libs = cfg.select(names)
    since = months_before(today, months).isoformat()
    report = PruneReport(months, since, None, [lib.name for lib in libs])
    ids = store.entries.library_ids(lib.name for lib in libs)
    entries = [e for e in indexed_entries(store, ids.values()) if counted(e.type, e.path)]
    used: set[str] | None = None
    feedback: dict[str, tuple[int, int]] = {}
    sums = {}
    if not cfg.usage.enabled:
        report.warnings.append(
            "usage telemetry is off ([usage] enabled = false): no entry is called unused or "
            "not useful, only stale ones are listed"
        )
    else:
        usage = open_usage(cfg)
        if usage is not None:
            try:
                report.usage_since = usage.started()
                used = usage.used_since(since)
                feedback = usage.feedback_since(since)
                sums = usage.usage([e.id for e in entries])
            finally:
                usage.close()
        covered = report.usage_since is not None and report.usage_since[:10] <= since
        if not covered:
            started = (report.usage_since or "now")[:10]
            report.warnings.append(
                f"usage is recorded since {started}, less than the {months} months asked: no "
                "entry is called unused until the record covers the period (ask for fewer "
                "--months)"
            )
            used = None
    due: dict[str, str] = {}
    if cfg.graph.verify_days:
        before = (today - dt.timedelta(days=cfg.graph.verify_days)).isoformat()
        due = {row[0]: row[3] for row in store.entries.reverify_due(before, list(ids.values()))}
    for e in entries:
        kinds, reasons = [], []
        u = sums.get(e.id)
        age = (e.created or e.updated or "")[:10]
        if used is not None and e.id not in used and age < since:
            kinds.append(UNUSED)
            last = f"last used {u.last_used[:10]}" if u and u.last_used else "never used"
            reasons.append(f"not served nor opened since {since} ({last})")
        good, bad = feedback.get(e.id, (0, 0))
        if bad > good:
            kinds.append(NOT_USEFUL)
            reasons.append(f"{bad} not-useful against {good} useful feedback since {since}")
        if e.id in due:
            kinds.append(STALE)
            reasons.append(
                f"last verified {due[e.id][:10]}, more than {cfg.graph.verify_days} days ago"
                + ("" if kinds != [STALE] else ": still used, verify it (brainmap verify "
                   f"{e.library}:{e.path}) rather than archive it")
            )  # fmt: skip
        if not kinds:
            continue
        report.items.append(
            PruneItem(
                e.id, e.library, e.path, e.title, e.type, kinds, reasons,
                archive=UNUSED in kinds or NOT_USEFUL in kinds,
                hits=u.hits if u else 0, gets=u.gets if u else 0, useful=good, not_useful=bad,
                last_used=u.last_used if u else None,
            )
        )  # fmt: skip
    for item in report.items:
        for kind in item.kinds:
            report.counts[kind] = report.counts.get(kind, 0) + 1
    return report


def _candidates(rel: str) -> list[PurePosixPath]:
    """``archive/<rel>``, then ``archive/<stem>-2<suffix>`` ... when an older one is there."""
    first = PurePosixPath(ARCHIVE, rel)
    return [first] + [first.with_name(f"{first.stem}-{n}{first.suffix}") for n in range(2, 100)]


def archive(cfg: Config, store: Store, report: PruneReport) -> None:
    """Move the report's unused and not-useful entries into ``archive/`` of their library
    (their path kept below it), then reindex those libraries. Nothing is deleted: a file
    that cannot be moved stays where it is, with a warning."""
    moving: dict[str, list[PruneItem]] = {}
    for item in report.items:
        if item.archive:
            moving.setdefault(item.library, []).append(item)
    names = [name for name in moving if cfg.library(name).path.is_dir()]
    for name in moving:
        if name not in names:
            report.warnings.append(f"library {name!r}: its folder is missing, nothing moved")
    if not names:
        return
    # the home's write lock (no reindex meanwhile), then each library's (no save meanwhile)
    with derive.changing(cfg, store, names):
        for name in names:
            lib = cfg.library(name)
            with library_lock(cfg.home, lib.name):
                for item in moving[name]:
                    targets = [lib.path / rel for rel in _candidates(item.path)]
                    try:
                        moved = move(lib.path, lib.path / item.path, targets)
                    except (UserError, OSError) as exc:  # gone, a symlink, a name taken
                        detail = exc.message if isinstance(exc, UserError) else exc.strerror
                        detail = detail or str(exc)
                        report.warnings.append(f"{name}:{item.path} not moved: {detail}")
                        continue
                    item.moved_to = moved.relative_to(lib.path).as_posix()
                    report.archived += 1
        # the same bytes under a new path: their vectors come from the cache
        reindex(cfg, store, names, embed=True)
