"""CLI command of the library map: ``brainmap map [LIBRARY]`` and ``brainmap map recompute``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

from typing import Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import fail, json_option, open_brain, print_json, validate


@cli.command("map")
@click.argument("args", nargs=-1, metavar="[recompute] [LIBRARY]")
@click.option("--library", "-l", help="The library to show (also when it is called 'recompute').")
@json_option
def map_cmd(args: tuple[str, ...], library: str | None, json_out: bool) -> None:
    """The library map: what each library is about, its core entities, and the entities it
    shares with other libraries (bridges).

    Without LIBRARY every library gets one line; with it, its whole block (narrative, top
    entities by degree, relation profile, bridges, size, git commit). Blocks are recomputed
    by reindex, save, ingest, collect and git-import for the libraries that changed;
    `recompute` does it now (all libraries, or LIBRARY) and writes a new block only where
    the content changed.

    \b
    Examples:
      brainmap map
      brainmap map docs --json
      brainmap map recompute
      brainmap map recompute docs
    """
    from brainmap import ops

    words = list(args)
    if words[:1] == ["recompute"]:
        if len(words) > 2 or (library and len(words) > 1):
            fail("map recompute takes at most one LIBRARY", code=2)
        name = library or (words[1] if len(words) > 1 else None)
        inp = validate(ops.MapRecomputeInput, library=name)
        report = ops.map_recompute(open_brain(), inp)
        if json_out:
            return print_json(report)
        click.echo(f"recomputed: {', '.join(report.recomputed) or 'none'}")
        if report.unchanged:
            click.echo(f"unchanged: {', '.join(report.unchanged)}")
        if report.not_indexed:
            click.echo(f"not indexed yet: {', '.join(report.not_indexed)} (brainmap reindex)")
        return None
    if len(words) > 1 or (library and words):
        fail("give at most one LIBRARY", "brainmap map [LIBRARY] or brainmap map recompute", 2)
    name = library or (words[0] if words else None)
    brain = open_brain()
    if name is not None:
        block = ops.get_map(brain, validate(ops.MapLibraryInput, library=name))
        return print_json(block) if json_out else _print_block(block)
    result = ops.map_(brain, validate(ops.MapInput))
    if json_out:
        return print_json(result)
    for line in result.libraries:
        _print_line(line)
    return None


def _print_line(line: Any) -> None:
    if line.created_at is None:
        click.echo(f"{click.style(line.library, bold=True)}  not indexed yet (brainmap reindex)")
        return
    size = f"{line.entries} entries, {line.triplet_count} triplets"
    changed = f", changed {line.last_change[:10]}" if line.last_change else ""
    click.echo(f"{click.style(line.library, bold=True)}  {click.style(size + changed, dim=True)}")
    if line.narrative:
        click.echo(f"  {line.narrative}")
    if line.top_entities:
        click.echo(f"  core: {', '.join(line.top_entities)}")
    if line.bridged_libraries:
        click.echo(f"  bridges to: {', '.join(line.bridged_libraries)}")


def _print_block(block: Any) -> None:
    click.echo(click.style(block.library, bold=True))
    if block.narrative:
        source = f"  ({block.narrative_source})" if block.narrative_source else ""
        click.echo(f"  {block.narrative}{click.style(source, dim=True)}")
    click.echo(
        f"  {block.entries} entries, {block.chunks} chunks, {block.triplet_count} triplets"
        + (f"; last change {block.last_change}" if block.last_change else "")
        + (f"; commit {block.commit_hash[:12]}" if block.commit_hash else "")
    )
    if block.top_entities:
        click.echo(
            "  top entities: " + ", ".join(f"{e.name} ({e.degree})" for e in block.top_entities)
        )
    if block.relation_profile:
        click.echo(
            "  relations: " + ", ".join(f"{p} {n}" for p, n in block.relation_profile.items())
        )
    for bridge in block.bridges:
        click.echo(f"  bridge: {bridge.name} -> {', '.join(bridge.libraries)}")
    if block.bridged_libraries:
        shared = ", ".join(f"{name} ({n})" for name, n in block.bridged_libraries.items())
        click.echo(f"  entities shared with: {shared}")
    click.echo(click.style(f"  block {block.id}, computed {block.created_at}", dim=True))
