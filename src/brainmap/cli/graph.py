"""CLI commands of the knowledge graph: neighbors, backlinks, refs, git-import, audit, verify.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

from typing import Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import (
    Progress,
    json_option,
    open_brain,
    print_conflicts,
    print_json,
    validate,
)


@cli.command()
@click.argument("node")
@click.option("--depth", "-d", type=click.IntRange(1, 3), default=1, show_default=True)
@click.option("--predicate", "-p", multiple=True, help="Only edges with this predicate.")
@click.option("--limit", "-n", type=click.IntRange(1, 5000), default=200, show_default=True)
@json_option
def neighbors(
    node: str, depth: int, predicate: tuple[str, ...], limit: int, json_out: bool
) -> None:
    """Walk the knowledge graph from NODE.

    NODE is an entry (id or library:path), a name as the map shows it (Postgres, nas), or a
    node key: entity:NAME, file:LIBRARY/PATH, commit:SHA, person:EMAIL, tag:TAG, host:NAME,
    service:PROJECT/NAME. Aliases are merged; edges that collectors observed are marked.

    \b
    Examples:
      brainmap neighbors Postgres
      brainmap neighbors docs:pool.md --depth 2 -p depends_on
      brainmap neighbors person:ann@example.org --json
    """
    from brainmap import ops

    inp = validate(
        ops.NeighborsInput, node=node, depth=depth, predicate=list(predicate) or None, limit=limit
    )
    result = ops.neighbors(open_brain(), inp)
    if json_out:
        return print_json(result)
    center = result.center
    aliases = f"  (aliases: {', '.join(a[7:] for a in center.aliases)})" if center.aliases else ""
    click.echo(click.style(f"{center.label}", bold=True) + f"  {center.key}{aliases}")
    labels = {n.key: n.label for n in [center, *result.nodes]}
    for edge in result.edges:
        where = edge.library + (f":{edge.path}" if edge.path else "")
        where += f":{edge.line}" if edge.line else ""
        where += "  (observed fact)" if edge.root == "facts" else ""
        click.echo(
            f"  {labels.get(edge.subject, edge.subject)} "
            + click.style(f"-{edge.predicate}->", fg="green")
            + f" {labels.get(edge.object, edge.object)}"
            + click.style(f"  {where}", fg="cyan", dim=True)
        )
    if not result.edges:
        click.echo("  no edges")
    if result.truncated:
        click.echo(f"  (stopped at {limit} nodes; raise --limit)")


def _print_crumbs(crumbs: list[Any], empty: str) -> None:
    for crumb in crumbs:
        target = (
            ", ".join(crumb.entries) if crumb.entries else click.style("no such entry", fg="red")
        )
        click.echo(
            click.style(f"{crumb.library}:{crumb.file}:{crumb.line}", fg="cyan")
            + f"  Brain: {crumb.ref}  -> {target}"
        )
    if not crumbs:
        click.echo(empty)


@cli.command()
@click.argument("slug")
@json_option
def backlinks(slug: str, json_out: bool) -> None:
    """Which code depends on an entry: lines whose comments say `Brain: SLUG`.

    SLUG is the entry's file name without .md (or its id, or library:path). Code files are
    read for breadcrumbs by reindex (globs: `code` of the library in config.toml).

    \b
    Examples:
      brainmap backlinks pool-exhaustion-gotcha
      brainmap backlinks docs:gotchas/pool-exhaustion-gotcha.md --json
    """
    from brainmap import ops

    result = ops.backlinks(open_brain(), validate(ops.BacklinksInput, ref=slug))
    if json_out:
        return print_json(result)
    _print_crumbs(result.breadcrumbs, f"no code references {slug}")


@cli.command()
@click.argument("file")
@json_option
def refs(file: str, json_out: bool) -> None:
    """The entries a code FILE names in `Brain: slug` comments (read them before editing).

    \b
    Examples:
      brainmap refs src/db/pool.py
      brainmap refs myrepo:src/db/pool.py --json
    """
    from brainmap import ops

    result = ops.refs(open_brain(), validate(ops.RefsInput, file=file))
    if json_out:
        return print_json(result)
    _print_crumbs(result.breadcrumbs, f"no breadcrumbs in {result.library}:{result.path}")


@cli.command("git-import")
@click.argument("libraries", nargs=-1)
@json_option
def git_import(libraries: tuple[str, ...], json_out: bool) -> None:
    """Import git history of LIBRARIES (default: every library in a git repository).

    Writes File -has_version-> Commit -authored_by-> Person, from the last imported commit
    on, with pygit2 (no git binary). Then `search --hop 3` shows who changed each hit, when.

    \b
    Examples:
      brainmap git-import
      brainmap git-import docs --json
    """
    from brainmap import ops

    inp = validate(ops.GitImportInput, libraries=list(libraries) or None)
    with Progress() as progress:
        result = ops.git_import(open_brain(), inp, progress=progress.update)
    if json_out:
        return print_json(result)
    for lib in result.libraries:
        if lib.up_to_date:
            click.echo(f"{lib.library}: up to date ({(lib.head or 'no commits')[:10]})")
            continue
        note = " (HEAD moved to another line of history)" if lib.diverged else ""
        click.echo(
            f"{lib.library}: {lib.commits} commits, {lib.versions} file versions, head "
            f"{(lib.head or '')[:10]}, {lib.seconds:.2f}s{note}"
        )
    if result.not_git:
        click.echo(f"not in git: {', '.join(result.not_git)}")
    for failure in result.failed:
        click.echo(f"failed: {failure}", err=True)
    if result.failed:
        raise SystemExit(1)


@cli.command()
@click.argument("kind", type=click.Choice(["stale", "contradict"]), default="stale")
@click.option("--library", "-l", multiple=True, help="Only this library (repeatable).")
@json_option
def audit(kind: str, library: tuple[str, ...], json_out: bool) -> None:
    """Audit the brain. Exit status 1 when something is found.

    KIND `stale`: entries whose file changed on disk or in git after they were indexed, and
    entries due for re-verification ([graph] verify_days), each with the command that
    refreshes it. KIND `contradict`: facts on which sources disagree (a README against its
    compose file), with both sides' evidence and the rule that resolved it (authority:
    runtime over config over narrative; freshness: the newer observation), if any.

    \b
    Examples:
      brainmap audit stale
      brainmap audit stale -l docs --json
      brainmap audit contradict
    """
    from brainmap import ops

    report = ops.audit(
        open_brain(), validate(ops.AuditInput, kind=kind, library=list(library) or None)
    )
    if json_out:
        print_json(report)
    elif kind == "contradict":
        print_conflicts(report)
    else:
        for item in report.items:
            click.echo(
                click.style(f"{item.kind:<16}", fg="yellow")
                + click.style(f"{item.library}:{item.path}", fg="cyan")
                + f"  {item.detail}\n{'':16}refresh: {item.refresh}"
            )
        summary = ", ".join(f"{n} {k}" for k, n in sorted(report.counts.items()))
        click.echo(summary or f"nothing stale in {', '.join(report.libraries) or 'no libraries'}")
    if report.items or report.conflicts:
        raise SystemExit(1)


@cli.command()
@click.argument("ref")
@json_option
def verify(ref: str, json_out: bool) -> None:
    """Mark entry REF (id or library:path) as checked today: sets `last_verified` in its
    frontmatter, leaving every other line as it is.

    \b
    Example:
      brainmap verify docs:gotchas/pool.md
    """
    from brainmap import ops

    result = ops.verify(open_brain(), validate(ops.VerifyInput, ref=ref))
    if json_out:
        return print_json(result)
    click.echo(result.message)
