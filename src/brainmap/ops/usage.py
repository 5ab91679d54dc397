"""Ops on usage telemetry: feedback on an entry, and pruning what nobody uses."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pydantic import Field

from brainmap import usage
from brainmap.errors import UserError
from brainmap.ops.core import Brain, Caller, _Input, op
from brainmap.prune import PruneReport


class FeedbackInput(_Input):
    ref: str = Field(description="The entry: the id of a search hit, or 'library:path'.")
    useful: bool = Field(
        description="true: the entry helped; false: it did not (wrong, outdated, off-topic)."
    )


@dataclass
class FeedbackResult:
    id: str
    library: str
    path: str
    useful: bool
    recorded: bool  # false: usage telemetry is off ([usage] enabled = false)


@op("feedback", FeedbackInput, FeedbackResult, methods=("POST",))
def feedback(brain: Brain, inp: FeedbackInput, caller: Caller = "cli") -> FeedbackResult:
    """Say whether an entry (a search hit, or one fetched with get) helped: useful true or
    false. Give it when a hit clearly answered the question, or clearly misled: entries
    judged not useful more often than useful are proposed for pruning. Recorded as usage
    telemetry, outside the notes; nothing in the entry changes."""
    from brainmap.ops.knowledge import locate_entry

    found = locate_entry(brain, inp.ref)
    row = brain.store.entries.entry(found[0]) if found else None
    if row is None:
        raise UserError(
            f"no entry {inp.ref!r}", hint="use an id or path from `brainmap search`", status=404
        )
    recorded = usage.judged(brain.cfg, row["id"], row["library"], row["path"], inp.useful, caller)
    return FeedbackResult(row["id"], row["library"], row["path"], inp.useful, recorded)


class PruneInput(_Input):
    months: int = Field(6, ge=1, le=1200, description="The period: entries unused within it.")
    library: list[str] | None = Field(None, description="Only these libraries.")
    archive: bool = Field(
        False, description="Move the unused and not-useful entries into archive/ of their library."
    )


@op("prune", PruneInput, PruneReport, writes=True)
def prune(brain: Brain, inp: PruneInput) -> PruneReport:
    """The entries not served nor opened within the period, judged not useful more often
    than useful, or stale (last_verified too old), each with why; with archive, move the
    unused and not-useful ones into their library's archive/ folder (never deleted)."""
    from brainmap import prune as prune_mod

    for name in inp.library or []:
        brain.cfg.library(name)  # an unknown name is an error, not an empty report
    report = prune_mod.plan(brain.cfg, brain.store, inp.library, inp.months, dt.date.today())
    if inp.archive:
        prune_mod.archive(brain.cfg, brain.store, report)
    return report


class UsageReportInput(_Input):
    limit: int = Field(20, ge=1, le=200, description="Entries listed as most and as least used.")


@op("usage_report", UsageReportInput, usage.UsageSummary)
def usage_report(brain: Brain, inp: UsageReportInput) -> usage.UsageSummary:
    """Usage telemetry since it started: how many events, how many entries were used or
    never used, and the most and least used entries (hits served, opened, judged)."""
    return usage.summary(brain.cfg, brain.store, inp.limit)
