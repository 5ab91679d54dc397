"""CLI commands of the facts root: collect and ask.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
``audit contradict`` is in :mod:`brainmap.cli.graph`; both print facts with
:func:`brainmap.cli.common.print_evidence`.
"""

from __future__ import annotations

from typing import Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import (
    Progress,
    json_option,
    open_brain,
    print_evidence,
    print_json,
    validate,
)

_CONFIDENCE_COLOURS = {"confirmed": "green", "partial": "yellow", "hypothesis": "magenta",
                       "contradicted": "red"}  # fmt: skip


@cli.command()
@click.argument("library", required=False)
@click.option(
    "--source", "-s", "sources", multiple=True,
    type=click.Choice(["compose", "ssh", "yaml", "runtime", "narrative"]),
    help="What to collect (repeatable). Default: compose, ssh, yaml and narrative from the "
    "library's files; runtime (docker ps and listening sockets) only when named.",
)  # fmt: skip
@click.option(
    "--from", "from_file", type=click.Path(dir_okay=False),
    help="Read this file instead: `docker ps --format '{{json .}}'` output for --source "
    "runtime, or an outside compose / ssh config / YAML file (e.g. ~/.ssh/config); it goes "
    "into LIBRARY, else the global library.",
)  # fmt: skip
@click.option("--no-embed", is_flag=True, help="Re-read notes get no vectors yet (text only).")
@json_option
def collect(
    library: str | None,
    sources: tuple[str, ...],
    from_file: str | None,
    no_embed: bool,
    json_out: bool,
) -> None:
    """Collect observations into LIBRARY (default: every library) and pair them into facts.

    Observations come from what runs (runtime), what is declared (compose files, ssh config,
    YAML configs) and what the docs say (narrative). A fact is confirmed when two kinds of
    source agree, partial when they agree on part of it, hypothesis with one source, and
    contradicted when it lost a conflict (see `brainmap audit contradict`). Values of
    environment variables, passwords, tokens and keys are never stored. Re-collecting is
    idempotent; a source that disappears takes its confirmations with it.

    \b
    Examples:
      brainmap collect
      brainmap collect homelab --source runtime
      brainmap collect homelab --source runtime --from ps.json
      brainmap collect homelab --source ssh --from ~/.ssh/config
    """
    from brainmap import ops

    inp = validate(
        ops.CollectInput,
        libraries=[library] if library else None,
        source=list(sources) or None,
        from_file=from_file,
        embed=not no_embed,
    )
    with Progress() as progress:
        report = ops.collect(open_brain(), inp, progress=progress.update)
    if json_out:
        return print_json(report)
    for lib in report.libraries:
        counts = ", ".join(
            click.style(f"{lib.assertions.get(c, 0)} {c}", fg=colour)
            for c, colour in _CONFIDENCE_COLOURS.items()
        )
        total = sum(lib.observations.values())
        click.echo(f"{lib.library}: {counts}  ({total} observations; ran {', '.join(lib.ran)})")
        for note in lib.notes:
            click.echo(f"  note: {note}")
    for note in report.notes:
        click.echo(f"note: {note}")


@cli.command()
@click.argument("question")
@click.option("--root", type=click.Choice(["facts", "info"]), help="Only facts, or only info.")
@click.option("--no-web", is_flag=True, help="Never ask the web search.")
@click.option("--library", "-l", multiple=True, help="Only this library (repeatable).")
@click.option("--limit", "-n", type=click.IntRange(1, 50), default=5, show_default=True)
@json_option
def ask(
    question: str,
    root: str | None,
    no_web: bool,
    library: tuple[str, ...],
    limit: int,
    json_out: bool,
) -> None:
    """Answer QUESTION from facts first, each with its confidence and evidence (path:line);
    then notes that may support it (not confirmed); then, when no fact answers, the web
    search set in [web] url, as a possible second source. With a reasoner ([reasoner]
    answer), a short answer it wrote from those facts and notes follows, each claim citing
    them as [n]; the answer above stays the authoritative one.

    \b
    Examples:
      brainmap ask "which port does the web service of flask-redis publish"
      brainmap ask "which host runs the backups" --no-web --json
    """
    from brainmap import ops

    inp = validate(
        ops.AskInput, question=question, root=root, web=not no_web,
        library=list(library) or None, limit=limit,
    )  # fmt: skip
    result = ops.ask(open_brain(), inp)
    if json_out:
        return print_json(result)
    _print_answer(result)


def _print_answer(result: Any) -> None:
    if result.answer:
        # an answer settled by authority, or a declared absence, is not two sources agreeing
        tag = "confirmed" if result.confirmed else "not confirmed by a second kind of source"
        click.echo(click.style(f"answer: {result.answer}", bold=True) + f"  ({tag})")
    elif result.facts:
        click.echo(click.style("no confirmed answer", bold=True) + "; what the sources say:")
    for fact in result.facts:
        colour = _CONFIDENCE_COLOURS.get(fact.confidence, "white")
        click.echo(click.style(f"[{fact.confidence}] ", fg=colour) + fact.what)
        if fact.views:
            click.echo(f"    only {fact.views}")
        print_evidence(fact.evidence, fact.against, "    ", library=True)
        if fact.resolved_by:
            click.echo(f"    conflict resolved by {fact.resolved_by}")
    if result.more_facts:
        click.echo(
            f"... and {result.more_facts} more (--limit {len(result.facts) + result.more_facts})"
        )
    if result.info:
        click.echo(click.style("info (not confirmed):", bold=True))
        for hit in result.info:
            click.echo(click.style(f"  {hit.library}:{hit.path}:{hit.line_start}", fg="cyan")
                       + f"  {hit.title}")  # fmt: skip
    web = result.web
    if web.status == "ok":
        click.echo(click.style("web (possible second source):", bold=True))
        for hit in web.results:
            click.echo(f"  {hit.title}  {hit.url}")
        if not web.results:
            click.echo("  no results")
    elif web.status in ("throttled", "unavailable"):
        click.echo(f"web: {web.status} ({web.detail}); this says nothing about the answer")
    if not (result.answer or result.facts or result.info or web.results):
        click.echo("nothing known about this")
    _print_written(result)


def _print_written(result: Any) -> None:
    """The reasoner's written answer, each citation mapped to its source; or why not."""
    if result.written:
        click.echo(click.style("written by the reasoner from the sources above:", bold=True)
                   + f" {result.written}")  # fmt: skip
        facts = len(result.facts)
        for n in sorted({n for claim in result.claims for n in claim.sources}):
            if n <= facts:  # [n] is the n-th fact, then the info snippets follow
                fact = result.facts[n - 1]
                where = ""
                if fact.evidence:
                    first = fact.evidence[0]
                    where = f"  {first.library}:{first.path}"
                    where += f":{first.line}" if first.line else ""
                click.echo(f"  [{n}] [{fact.confidence}] {fact.what}{where}")
            elif n - facts <= len(result.info):
                hit = result.info[n - facts - 1]
                click.echo(f"  [{n}] {hit.library}:{hit.path}:{hit.line_start}  {hit.title} "
                           "(not confirmed)")  # fmt: skip
    spent = result.reasoner
    for why in spent.skipped if spent is not None else ():
        click.echo(f"written answer skipped: {why}")
