"""CLI command of the git sync of a library: ``brainmap sync [LIBRARY]``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys

import click

from brainmap.cli.app import cli
from brainmap.cli.common import json_option, open_brain, print_json, validate


@cli.command()
@click.argument("library", required=False)
@click.option("--no-embed", is_flag=True, help="Reindex text only; skip embeddings.")
@json_option
def sync(library: str | None, no_embed: bool, json_out: bool) -> None:
    """Commit LIBRARY's changes, pull its remote (the diary merges by union), push, reindex.

    LIBRARY defaults to the global brain ([save] library). Its folder must be a git
    repository with a remote. Offline, the commit stays local and the next sync pushes it
    (exit 0, with a warning). A note changed on both sides stops the sync (exit 1): the
    library stays as it was here, the remote's version is kept in the home, and `brainmap
    doctor` names the fix.

    \b
    Examples:
      brainmap sync
      brainmap sync notes --json
      git -C ~/.brainmap/brain remote add origin git@example.org:me/brain.git && brainmap sync
    """
    from brainmap import ops
    from brainmap.termsafe import one_line

    inp = validate(ops.SyncInput, library=library, embed=not no_embed)
    result = ops.sync(open_brain(), inp)
    if json_out:
        print_json(result)
    else:
        where = f"{result.library} ({result.backend}, {result.remote}/{result.branch})"
        if result.offline:
            click.echo(f"warning: {where}: {one_line(result.message)}", err=True)
        else:
            click.echo(f"{where}: {one_line(result.message)}")
        if result.commit:
            click.echo(f"  committed {result.commit[:10]}: {len(result.committed)} file(s)")
        for conflict in result.conflicts:
            click.echo(f"  conflict: {one_line(conflict.path)}", err=True)
            click.echo(f"    remote's version: {one_line(conflict.copy)}", err=True)
            click.echo(f"    fix: {one_line(conflict.fix)}", err=True)
        if result.index is not None and (
            result.index.added or result.index.updated or result.index.deleted
        ):
            idx = result.index
            click.echo(
                f"  reindexed: {idx.added} added, {idx.updated} updated, {idx.deleted} deleted"
            )
    if result.conflicts:
        sys.exit(1)
