"""CLI commands of the setup: ``brainmap init`` and ``brainmap library add|list|remove``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from brainmap.cli.app import CONTEXT, cli
from brainmap.cli.common import console, json_option, open_brain, print_json, validate


@cli.command()
@json_option
def init(json_out: bool) -> None:
    """Create the home: config.toml, brain.db and the global library brain/.

    \b
    Example:
      brainmap --home ~/.brainmap init
    """
    from brainmap import ops

    report = ops.init(open_brain(), ops.NoInput())
    if json_out:
        return print_json(report)
    state = "created" if report.created else "already set up"
    click.echo(f"{report.home}: {state}")
    click.echo(f"  config: {report.config}\n  global library: {report.global_library}")


@cli.group(context_settings=CONTEXT)
def library() -> None:
    """Add, list and remove libraries (folders of markdown).

    \b
    Examples:
      brainmap library add docs ./documentation
      brainmap library list
      brainmap library remove docs
    """


@library.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--scope", type=click.Choice(["project", "global"]), default="project", show_default=True
)
@click.option(
    "--include",
    multiple=True,
    help="Glob of files to index (repeatable). Default: **/*.md, **/*.markdown. Files the "
    "--code globs match stay code files (read for `Brain:` comments, not indexed as text).",
)
@click.option(
    "--exclude",
    multiple=True,
    help="Glob of files to skip (repeatable). Default: hidden folders, node_modules.",
)
@click.option(
    "--code",
    multiple=True,
    help="Glob of code files read for `Brain: slug` comments (repeatable; 'none' for none). "
    "Default: common source, script and config extensions.",
)
@json_option
def library_add(
    name: str, path: Path, scope: str, include: tuple[str, ...], exclude: tuple[str, ...],
    code: tuple[str, ...], json_out: bool,
) -> None:  # fmt: skip
    """Register the folder PATH as library NAME. Indexing only reads its files; brainmap
    writes there only when you save or merge into this library.

    \b
    Example:
      brainmap library add docs ./documentation --exclude 'drafts/**'
      brainmap library add app ./repo --include 'docs/**/*.md' --code 'src/**/*.py'
    """
    from brainmap import ops

    inp = validate(
        ops.LibraryAddInput, name=name, path=str(path), scope=scope,
        include=list(include) or None, exclude=list(exclude) or None,
        code=None if not code else [] if code == ("none",) else list(code),
    )  # fmt: skip
    info = ops.library_add(open_brain(), inp)
    if json_out:
        return print_json(info)
    click.echo(f"added library {info.name} ({info.scope}) at {info.path}")
    for note in info.notes:
        click.echo(f"note: {note}")
    for warning in info.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"next: brainmap reindex {info.name}")


@library.command("list")
@json_option
def library_list(json_out: bool) -> None:
    """List libraries with their entry and chunk counts, when they were last indexed (by a
    reindex or a save) and their folders.

    \b
    Examples:
      brainmap library list
      brainmap library list --json
    """
    from rich.table import Table

    from brainmap import ops

    libs = ops.library_list(open_brain(), ops.NoInput()).libraries
    if json_out:
        return print_json(libs)
    table = Table("name", "scope", "entries", "chunks", "indexed", "path", box=None,
                  pad_edge=False)  # fmt: skip
    for lib in libs:
        path = lib.path if lib.exists else f"{lib.path} (missing)"
        table.add_row(
            lib.name, lib.scope, str(lib.entries), str(lib.chunks), lib.indexed_at or "never", path
        )
    _print_table(table)


def _print_table(table: Any) -> None:
    """A Rich table fitted to the terminal; into a pipe or a file whole, never cut."""
    terminal = console()
    if terminal.is_terminal:
        return terminal.print(table)
    from io import StringIO

    from rich.console import Console

    text = StringIO()
    Console(file=text, width=100_000, highlight=False).print(table)
    for line in text.getvalue().splitlines():
        click.echo(line.rstrip())


@library.command("remove")
@click.argument("name")
@json_option
def library_remove(name: str, json_out: bool) -> None:
    """Forget library NAME: its index rows go, its files are left alone.

    To follow a folder that moved: remove the library, then add it again at the new path.

    \b
    Examples:
      brainmap library remove docs
      brainmap library remove docs && brainmap library add docs ~/new/place/documentation
    """
    from brainmap import ops

    report = ops.library_remove(open_brain(), ops.LibraryNameInput(name=name))
    if json_out:
        return print_json(report)
    click.echo(
        f"removed library {report.name}: {report.entries_removed} entries unindexed, files untouched"
    )
