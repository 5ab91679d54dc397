"""CLI commands that write knowledge: ``brainmap save``, ``supersede`` and ``ingest``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from brainmap.cli.app import cli
from brainmap.cli.common import echo_json, fail, json_option, open_brain, print_json, validate
from brainmap.termsafe import one_line


def _read_body(body: str | None, file: Path | None) -> str:
    if body is not None:
        return body
    if file is not None:
        try:
            return sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {file}: {exc}")
    if not sys.stdin.isatty():
        return sys.stdin.read()
    return ""


def _print_saved(result: Any, json_out: bool, next_step: str, usage: str = "") -> None:
    """The outcome of save/ingest; a duplicate (nothing written) exits with status 3.

    The op's messages name its HTTP/MCP fields; here ``next_step`` (after a duplicate) and
    ``usage`` name the command's flags instead, in text and JSON alike."""
    from brainmap.notes import DUPLICATE

    if result.status == "duplicate":
        result.message = f"{DUPLICATE}; {next_step}"
    elif result.status == "hint" and usage:
        result.message = usage
    if json_out:
        print_json(result)
        if result.status == "duplicate":
            sys.exit(3)
        return
    for skipped in result.reasoner.skipped if result.reasoner else []:
        click.echo(f"reasoner skipped: {skipped}", err=True)
    if result.status == "duplicate":
        click.echo(f"not saved: {DUPLICATE}", err=True)
        for c in result.candidates:
            similarity = f"{c.similarity:.3f}" if c.similarity is not None else "-"
            click.echo(f"  {c.id}  [{c.library}] {c.path}  {c.title}  ({c.reason}, {similarity})")
        click.echo(f"hint: {next_step}", err=True)
        sys.exit(3)
    if result.status == "hint":
        click.echo(result.message)
        return
    tags = f" tags: {', '.join(result.tags)}" + (" (suggested)" if result.tags_suggested else "")
    click.echo(
        f"{result.status}: [{result.library}] {result.path} (id {result.id}){tags if result.tags else ''}"
    )


@cli.command()
@click.argument("title")
@click.option("--body", "-b", help="Markdown text (default: --file, else stdin).")
@click.option(
    "--file",
    "-f",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Read the body from a file ('-' = stdin).",
)
@click.option(
    "--type",
    "-t",
    "type_",
    help="gotcha, pattern, bug, decision, guide, diary, note, ... (default: note, or the "
    "reasoner's choice when it suggests the tags).",
)
@click.option(
    "--tag",
    multiple=True,
    help="Tag (repeatable); when none, suggested by the reasoner from the library's tags, "
    "else from similar entries.",
)
@click.option(
    "--library", "-l", help="Target library (default: [save] library in config, 'brain')."
)
@click.option(
    "--project",
    help="Project the entry belongs to (default: the git repository or library of the "
    "current directory; '' for none).",
)
@click.option("--folder", help="Sub-folder inside the library.")
@click.option("--force", is_flag=True, help="Save even when a near-duplicate exists.")
@click.option("--merge-into", help="Append as a dated section of this entry id instead.")
@click.option(
    "--supersedes", metavar="OLD",
    help="The entry (id or LIB:PATH) this one replaces: it leaves default search.",
)  # fmt: skip
@json_option
def save(
    title: str, body: str | None, file: Path | None, type_: str | None, tag: tuple[str, ...],
    library: str | None, project: str | None, folder: str | None, force: bool,
    merge_into: str | None, supersedes: str | None, json_out: bool,
) -> None:  # fmt: skip
    """Save a knowledge entry titled TITLE as a markdown file, indexed at once.

    A near-duplicate of an existing entry is not written (exit status 3): the candidates are
    listed; use --merge-into ID or --force.

    \b
    Examples:
      brainmap save "Compose ports are HOST:CONTAINER" -t gotcha --tag docker -b "..."
      git log -1 --format=%B | brainmap save "Why we pinned numpy" -t decision -l docs
    """
    from brainmap import ops

    if project is None and not merge_into:
        from brainmap.project import identify

        here = identify(open_brain().cfg, Path.cwd())
        project = here.name if here.known else None
    inp = validate(
        ops.SaveInput, title=title, body=_read_body(body, file), type=type_, tags=list(tag) or None,
        library=library, project=project or None, folder=folder, force=force,
        merge_into=merge_into, supersedes=supersedes,
    )  # fmt: skip
    _print_saved(ops.save(open_brain(), inp), json_out,
                 "--merge-into ID appends to one of them; --force saves anyway")  # fmt: skip


@cli.command()
@click.argument("old")
@click.argument("new")
@json_option
def supersede(old: str, new: str, json_out: bool) -> None:
    """Mark entry OLD as replaced by entry NEW (ids, LIB:PATH or paths).

    NEW's frontmatter gets `supersedes: [OLD]`, OLD's `superseded_by: NEW` (both files, or
    neither). OLD then leaves default search, hooks and facts evidence; `search --all`
    still finds it, and `get` shows what replaced it.

    \b
    Example:
      brainmap supersede docs:gotchas/pool-old.md docs:gotchas/pool.md
    """
    from dataclasses import asdict

    from brainmap import ops

    inp = validate(ops.SupersedeInput, old=old, new=new)
    result = ops.supersede(open_brain(), inp)
    if json_out:
        return echo_json(asdict(result))
    click.echo(f"{result.status}: {one_line(result.message)}")


@cli.command()
@click.argument("text", required=False)
@click.option("--uri", help="Where the text came from.")
@click.option("--observed-at", help="When it was seen (ISO 8601; default: now).")
@click.option(
    "--title", help="Default: written by the reasoner when one is set, else the text's first line."
)
@click.option("--tag", multiple=True, help="Tag (repeatable).")
@click.option("--library", "-l", help="Target library (default: [save] library in config).")
@click.option("--force", is_flag=True, help="Keep it even when a near-duplicate exists.")
@json_option
def ingest(
    text: str | None, uri: str | None, observed_at: str | None, title: str | None,
    tag: tuple[str, ...], library: str | None, force: bool, json_out: bool,
) -> None:  # fmt: skip
    """Keep a raw piece of TEXT ('-' = stdin) with its source as a note in inbox/.

    Without TEXT (and nothing on stdin) it prints how to use it.

    \b
    Example:
      curl -s https://example.com/changelog | brainmap ingest - --uri https://example.com/changelog
    """
    from brainmap import ops

    if text == "-" or (text is None and not sys.stdin.isatty()):
        text = sys.stdin.read()
    inp = validate(
        ops.IngestInput, text=text, uri=uri, observed_at=observed_at, title=title,
        tags=list(tag) or None, library=library, force=force,
    )  # fmt: skip
    _print_saved(ops.ingest(open_brain(), inp), json_out, "--force keeps it anyway", _INGEST_USAGE)


_INGEST_USAGE = (
    "ingest keeps a raw piece of text as a note in the inbox/ of a library and indexes it:\n"
    "  brainmap ingest TEXT|- [--uri URI] [--observed-at ISO-8601] [--title TITLE] [--tag TAG] "
    "[-l LIBRARY]\n"
    "For a typed entry you wrote (gotcha, pattern, decision...) use brainmap save."
)
