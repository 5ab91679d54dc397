"""CLI commands that keep the index current: ``brainmap reindex`` and ``brainmap watch``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import Progress, json_option, open_brain, print_json, validate


@cli.command()
@click.argument("libraries", nargs=-1)
@click.option("--full", is_flag=True, help="Re-read every file, not only changed ones.")
@click.option("--no-embed", is_flag=True, help="Text only; skip embeddings.")
@json_option
def reindex(libraries: tuple[str, ...], full: bool, no_embed: bool, json_out: bool) -> None:
    """Update the index from the files of LIBRARIES (default: all).

    Only changed files are read; text is committed first (searchable at once), then vectors
    are computed. Safe to interrupt at any moment: the next run completes the work.

    \b
    Examples:
      brainmap reindex
      brainmap reindex docs --no-embed
    """
    from brainmap import ops

    inp = validate(
        ops.ReindexInput, libraries=list(libraries) or None, full=full, embed=not no_embed
    )
    with Progress() as progress:
        report = ops.reindex(open_brain(), inp, progress=progress.update)
    if json_out:
        print_json(report)
    else:
        _print_reindex(report)
    if report.problems:  # the others are indexed; a script still learns that one was not
        sys.exit(1)


def _print_reindex(report: Any) -> None:
    for problem in report.problems:
        click.echo(f"error: {problem}", err=True)
    for lib in report.libraries:
        click.echo(
            f"{lib.library}: {lib.files} files: {lib.added} added, {lib.updated} updated, "
            f"{lib.deleted} deleted, {lib.unchanged} unchanged, {lib.skipped} skipped "
            f"({lib.chunks} chunks written, {lib.seconds:.2f}s)"
        )
        if lib.skipped:
            click.echo("  skipped files and the reasons: brainmap doctor")
    emb = report.embedding
    if emb is None:
        return
    if emb.error:
        click.echo(f"embeddings unavailable ({emb.error}); {emb.pending} chunks wait; BM25 works")
    elif emb.embedded or emb.cached:
        rate = f" ({emb.embedded / emb.seconds:.0f}/s)" if emb.seconds and emb.embedded else ""
        click.echo(
            f"embeddings: {emb.embedded} computed{rate}, {emb.cached} from cache, "
            f"{emb.pending} pending"
        )


@cli.command()
@click.argument("libraries", nargs=-1)
def watch(libraries: tuple[str, ...]) -> None:
    """Keep the index of LIBRARIES (default: all) current as files change. Ctrl-C stops.

    \b
    Example:
      brainmap watch docs
    """
    from brainmap import ops
    from brainmap.watcher import watch as watch_libraries

    brain = open_brain()
    names = [lib.name for lib in brain.cfg.select(list(libraries))]
    click.echo(f"watching {', '.join(names) or 'nothing'} (Ctrl-C to stop)")

    def reindex(changed: list[str]) -> None:
        _print_reindex(
            ops.reindex(brain, ops.ReindexInput(libraries=changed, full=False, embed=True))
        )

    try:
        watch_libraries(brain.cfg, names, reindex, read_with=lambda: ops.read_with(brain, names))
    except KeyboardInterrupt:
        click.echo("stopped")
