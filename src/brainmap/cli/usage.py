"""CLI commands on usage telemetry: feedback on an entry, and prune.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import click

from brainmap.cli.app import cli
from brainmap.cli.common import fail, json_option, open_brain, print_json, validate


@cli.command()
@click.argument("ref")
@click.option("--useful/--not-useful", default=None, help="Whether the entry helped.")
@json_option
def feedback(ref: str, useful: bool | None, json_out: bool) -> None:
    """Record whether an entry (REF: id, library:path, or a file path) helped.

    Entries judged not useful more often than useful within the period are listed by
    `brainmap prune`. Recorded in usage.db, outside the notes.

    \b
    Examples:
      brainmap feedback 3f2a9c0d1e2b4a5f --useful
      brainmap feedback docs:setup.md --not-useful
    """
    from brainmap import ops

    if useful is None:
        fail("say --useful or --not-useful", f"brainmap feedback {ref} --useful", code=2)
    result = ops.feedback(open_brain(), validate(ops.FeedbackInput, ref=ref, useful=useful))
    if json_out:
        return print_json(result)
    if not result.recorded:
        click.echo("not recorded: usage telemetry is off ([usage] enabled = false)")
        return
    verdict = "useful" if result.useful else "not useful"
    click.echo(f"recorded: {result.library}:{result.path} was {verdict}")


@cli.command()
@click.option("--months", default=6, show_default=True, help="The period, in months.")
@click.option("--library", "-l", multiple=True, help="Only this library (repeatable).")
@click.option(
    "--archive", is_flag=True, help="Move the unused and not-useful entries into archive/."
)
@json_option
def prune(months: int, library: tuple[str, ...], archive: bool, json_out: bool) -> None:
    """List the entries nobody used in the period, each with why; --archive moves them.

    Listed: entries neither served (search hits, hook injections) nor opened (get) within
    the period, those judged not useful more often than useful, and stale ones (last
    verified more than [graph] verify_days ago). Entries newer than the period are never
    unused. --archive moves the unused and not-useful ones into their library's archive/
    folder, keeping their path below it (git sees a rename), and reindexes; nothing is
    deleted. A stale entry that is still used is listed only: verify it.

    \b
    Examples:
      brainmap prune
      brainmap prune --months 12 -l docs --json
      brainmap prune --archive
    """
    from brainmap import ops
    from brainmap.termsafe import one_line

    inp = validate(ops.PruneInput, months=months, library=list(library) or None, archive=archive)
    report = ops.prune(open_brain(), inp)
    if json_out:
        return print_json(report)
    for warning in report.warnings:
        click.echo(f"warning: {one_line(warning)}", err=True)
    if not report.items:
        click.echo(f"nothing to prune since {report.since}")
        return
    for item in report.items:
        mark = click.style(", ".join(item.kinds), fg="yellow")
        where = click.style(one_line(f"{item.library}:{item.path}"), fg="cyan")
        moved = f" -> {one_line(item.moved_to)}" if item.moved_to else ""
        click.echo(f"{mark}  {where}{moved}  {one_line(item.title)}")
        for reason in item.reasons:
            click.echo(f"    {one_line(reason)}")
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(report.counts.items()))
    click.echo(f"\n{len(report.items)} entries since {report.since}: {counts}")
    if archive:
        click.echo(f"archived {report.archived} (into archive/ of their library; reindexed)")
    elif any(item.archive for item in report.items):
        click.echo("brainmap prune --archive moves the unused and not-useful ones into archive/")
