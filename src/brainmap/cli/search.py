"""CLI commands that read the index: ``brainmap search`` (also ``--batch``) and ``get``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import echo_json, fail, json_option, open_brain, print_json
from brainmap.errors import UserError
from brainmap.termsafe import one_line

if TYPE_CHECKING:
    from brainmap.ops import Brain


@cli.command()
@click.argument("query", required=False)
@click.option("--library", "-l", multiple=True, help="Only this library (repeatable).")
@click.option("--type", "-t", "type_", multiple=True, help="Only this entry type (repeatable).")
@click.option(
    "--tag", multiple=True, help="Only entries with this tag (repeatable; all must match)."
)
@click.option("--since", help="Only entries dated on/after YYYY-MM-DD, or an age: 30d, 6m, 1y.")
@click.option("--limit", "-n", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option(
    "--mode",
    "-m",
    type=click.Choice(["hybrid", "bm25", "vector"]),
    default="hybrid",
    show_default=True,
)
@click.option(
    "--batch",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Read JSON lines of queries ('-' = stdin); write one JSON line of hits per query.",
)
@click.option(
    "--hop",
    type=click.IntRange(0, 3),
    default=0,
    help="Provenance per hit: 1 file, 2 + commits, 3 + authors (commits need git-import).",
)
@click.option(
    "--no-route", is_flag=True,
    help="Search every library even when there are many (see `brainmap map`).",
)  # fmt: skip
@click.option(
    "--project", "-p",
    help="Only this project's entries (`project:` in their frontmatter, or its library); "
    "'.' is the project of the current directory.",
)  # fmt: skip
@click.option(
    "--expand/--no-expand", default=None,
    help="Also search the reasoner's rewrites of the query, fused with it (one model call); "
    "default: [reasoner] expand in config.toml.",
)  # fmt: skip
@click.option(
    "--include-inactive", "--all", "include_inactive", is_flag=True,
    help="Also superseded, retired and archived entries (marked so).",
)  # fmt: skip
@json_option
def search(
    query: str | None, library: tuple[str, ...], type_: tuple[str, ...], tag: tuple[str, ...],
    since: str | None, limit: int, mode: str, batch: Path | None, hop: int, no_route: bool,
    project: str | None, expand: bool | None, include_inactive: bool, json_out: bool,
) -> None:  # fmt: skip
    """Search every library (or some) with hybrid BM25 + semantic ranking.

    Any text is a valid QUERY: keywords, a question, quotes for an exact phrase. With more
    libraries than `[map] route_above`, the library map first picks the libraries nearest
    the query (they are named above the hits); --no-route or --library turns that off.

    \b
    Examples:
      brainmap search "undo the last commit"
      brainmap search docker -l docs --type gotcha --json
      brainmap search "connection pool" --hop 3
      brainmap search "pool size" --project .      # this repository's notes only
      brainmap search "why is the build slow" --expand   # + the reasoner's rewrites
      echo '{"query": "ssh keys", "limit": 3}' | brainmap search --batch -
    """
    if batch is not None:
        # the flags given are every line's defaults; a line's own fields win
        defaults: dict[str, Any] = {"limit": limit, "mode": mode, "hop": hop, "route": not no_route}
        if include_inactive:
            defaults["include_inactive"] = True
        for key, value in (("library", library), ("type", type_), ("tag", tag)):
            if value:
                defaults[key] = list(value)
        for key, given in (("since", since), ("project", project), ("expand", expand)):
            if given is not None:
                defaults[key] = given
        return _search_batch(batch, defaults)
    if query is None:
        fail("give a QUERY or --batch FILE", "brainmap search 'how do I ...'", code=2)
    # the search op's body, without the table's pydantic models: click has checked the
    # options, the search checks the rest (a cold search is the CLI's most frequent call)
    from brainmap.ops.lookup import find
    from brainmap.search import parse_since

    parse_since(since)  # a clear error for a date that is none
    for text in (query, *library, *type_, *tag, project or ""):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8 reached argv
            fail("text contains a lone UTF-16 surrogate (not UTF-8)", code=2)
    result = find(
        open_brain(), query, library=list(library) or None, type=list(type_) or None,
        tag=list(tag) or None, since=since, limit=limit, mode=mode,  # type: ignore[arg-type]
        route=not no_route, hop=hop, project=project, expand=expand,
        include_inactive=include_inactive,
    )  # fmt: skip
    if json_out:
        from dataclasses import asdict

        return echo_json(asdict(result))
    _print_hits(result)


def _print_hits(result: Any) -> None:
    # click.style rather than Rich: this is the hot path of a cold `brainmap search`
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    spent = getattr(result, "reasoner", None)
    for skipped in spent.skipped if spent is not None else ():
        click.echo(f"expansion skipped, plain search: {skipped}", err=True)
    if getattr(result, "expansions", None):
        click.echo(
            click.style(f"expanded by {spent.model if spent else 'the reasoner'}: "
                        f"{len(result.expansions)} rewrites, {spent.tokens if spent else 0} "
                        "tokens", dim=True),
            err=True,
        )  # fmt: skip
    if result.routed is not None:
        click.echo(
            click.style(f"searched {', '.join(result.routed)} (routed by the library map; "
                        "--no-route searches all)", dim=True),
            err=True,
        )  # fmt: skip
    if not result.hits:
        if result.match == "none" and result.query.strip():
            click.echo(f"no close match for {result.query!r}: nothing holds its words or meaning")
        else:
            click.echo("no results")
        return
    words = sorted({re.escape(t) for t in result.terms if len(t) > 1}, key=len, reverse=True)
    pattern = re.compile("|".join(words), re.IGNORECASE) if words else None
    for i, hit in enumerate(result.hits, 1):
        section = one_line(hit.heading.removeprefix(hit.title).removeprefix(" > "))
        click.echo(
            f"{i:>2}. {click.style(one_line(hit.title), bold=True)}"
            + (f" › {section}" if section else "")
            + click.style(f"  [{hit.library}] ", fg="magenta")
            + click.style(f"{one_line(hit.path)}:{hit.line_start}-{hit.line_end}", fg="cyan")
            + click.style(f"  {hit.score:.4f}", dim=True)
            + ("" if hit.match == "strong" else click.style(f"  {hit.match} match", dim=True))
            + ("" if hit.status == "active" else click.style(f"  [{hit.status}]", fg="red"))
        )
        snippet = hit.snippet
        if pattern is not None:
            snippet = pattern.sub(
                lambda m: click.style(m.group(0), fg="yellow", bold=True), snippet
            )
        click.echo(f"    {snippet}")
        if hit.hops is not None:
            _print_hops(hit.hops)


def _print_hops(chain: Any) -> None:
    rev = chain.source_rev or ""
    rev = f" @ {rev if rev.startswith('mtime:') else rev[:10]}" if rev else ""
    click.echo(click.style(f"    file {chain.library}:{chain.path}{rev}", dim=True))
    for commit in chain.commits or []:
        click.echo(
            click.style(
                f"    commit {commit.sha[:10]} {(commit.time or '')[:10]} {commit.author or ''}: "
                f"{commit.message[:60]}",
                dim=True,
            )
        )
    if chain.people:
        people = ", ".join(f"{p.name} <{p.email}>" for p in chain.people)
        click.echo(click.style(f"    people {people}", dim=True))


def _search_batch(source: Path, defaults: dict[str, Any]) -> None:
    brain = open_brain()
    try:
        handle = sys.stdin if str(source) == "-" else source.open(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {source}: {exc.strerror}")
    with handle:
        _answer_batch(brain, handle, defaults)


def _answer_batch(brain: Brain, handle: Any, defaults: dict[str, Any]) -> None:
    import json

    from pydantic import ValidationError

    from brainmap import ops

    for line_no, line in enumerate(handle, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("each line must be a JSON object")
            for key in ("library", "type", "tag"):
                if isinstance(raw.get(key), str):
                    raw[key] = [raw[key]]
            inp = ops.SearchInput.model_validate({**defaults, **raw})
            out: Any = ops.to_jsonable(ops.search(brain, inp))
        except ValidationError as exc:  # before ValueError, its base: name the fields
            out = {"line": line_no, "error": ops.describe_errors(exc.errors())}
        except (ValueError, UserError) as exc:
            message = exc.message if isinstance(exc, UserError) else str(exc).splitlines()[0]
            out = {"line": line_no, "error": message}
        echo_json(out, indent=None)


@cli.command()
@click.argument("ref")
@json_option
def get(ref: str, json_out: bool) -> None:
    """Show one entry (REF: id, library:path, or a file path) with every chunk.

    \b
    Examples:
      brainmap get 3f2a9c0d1e2b4a5f
      brainmap get docs:setup.md
    """
    from brainmap import ops

    entry = ops.get(open_brain(), ops.GetInput(ref=ref))
    if json_out:
        return print_json(entry)
    click.echo(
        click.style(one_line(entry.title), bold=True)
        + click.style(f"  [{entry.library}] ", fg="magenta")
        + click.style(one_line(entry.path), fg="cyan")
    )
    tags = ", ".join(entry.tags) or "-"
    click.echo(f"id {entry.id} · type {entry.type} · tags {tags} · updated {entry.updated}")
    if entry.status != "active":
        click.echo(click.style(f"status: {entry.status}", fg="red"))
    for label, linked in (("superseded by", entry.superseded_by), ("supersedes", entry.supersedes)):
        for other in linked:
            click.echo(f"{label}: {one_line(other['title'])} ({other['library']}:"
                       f"{one_line(other['path'])}, id {other['id']})")  # fmt: skip
    for warning in entry.warnings:
        click.echo(click.style(f"warning: {warning}", fg="yellow"))
    for chunk in entry.chunks:
        where = f"{chunk.heading or '(top)'} · lines {chunk.line_start}-{chunk.line_end}"
        click.echo(click.style(f"\n── {chunk.ord}: {where}", dim=True))
        click.echo(chunk.text)
