"""The ``brainmap`` command: a thin click layer over the operations in ``ops.py``.

Heavy modules (numpy, pydantic, the model, Rich) load inside commands, so that ``--help`` and
light commands start fast. (Typer, the first choice, builds a pydantic TypeAdapter for every
parameter on every run: 150 ms of a 500 ms cold-start budget. click needs 25 ms.)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from brainmap import __version__
from brainmap.errors import UserError
from brainmap.termsafe import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from brainmap.ops import Brain

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _State:
    home: Path | None = None
    brain: Brain | None = None


_state = _State()


def _brain() -> Brain:
    if _state.brain is None:
        from brainmap.ops import Brain

        _state.brain = Brain(_state.home)
    return _state.brain


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _print_json(value: Any) -> None:
    from brainmap.ops import to_jsonable

    click.echo(json.dumps(to_jsonable(value), ensure_ascii=False, indent=2))


def _fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def _validate(model: Any, **values: Any) -> Any:
    from pydantic import ValidationError

    from brainmap.ops import describe_errors

    try:
        return model(**values)
    except ValidationError as exc:
        _fail(describe_errors(exc.errors()), code=2)


json_option = click.option("--json", "json_out", is_flag=True, help="Print machine-readable JSON.")


@click.group(context_settings=CONTEXT)
@click.option(
    "--home",
    # the home checks itself (config.ensure_home): one message for --home and $BRAINMAP_HOME
    type=click.Path(path_type=Path),
    help="Home folder (config.toml, brain.db). Default: $BRAINMAP_HOME or ~/.brainmap.",
)
@click.version_option(__version__, prog_name="brainmap")
def cli(home: Path | None) -> None:
    """brainmap: markdown libraries -> one SQLite index -> hybrid search, fully offline.

    \b
    Start:
      brainmap library add docs ./documentation
      brainmap reindex
      brainmap search "how do I rotate the keys"
    """
    _state.home = home


# --- setup ----------------------------------------------------------------------------------


@cli.command()
@json_option
def init(json_out: bool) -> None:
    """Create the home: config.toml, brain.db and the global library brain/.

    \b
    Example:
      brainmap --home ~/.brainmap init
    """
    from brainmap import ops

    report = ops.init(_brain(), ops.NoInput())
    if json_out:
        return _print_json(report)
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

    inp = _validate(
        ops.LibraryAddInput, name=name, path=str(path), scope=scope,
        include=list(include) or None, exclude=list(exclude) or None,
        code=None if not code else [] if code == ("none",) else list(code),
    )  # fmt: skip
    info = ops.library_add(_brain(), inp)
    if json_out:
        return _print_json(info)
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

    libs = ops.library_list(_brain(), ops.NoInput()).libraries
    if json_out:
        return _print_json(libs)
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
    console = _console()
    if console.is_terminal:
        return console.print(table)
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

    report = ops.library_remove(_brain(), ops.LibraryNameInput(name=name))
    if json_out:
        return _print_json(report)
    click.echo(
        f"removed library {report.name}: {report.entries_removed} entries unindexed, files untouched"
    )


# --- indexing -------------------------------------------------------------------------------


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

    inp = _validate(
        ops.ReindexInput, libraries=list(libraries) or None, full=full, embed=not no_embed
    )
    with _Progress() as progress:
        report = ops.reindex(_brain(), inp, progress=progress.update)
    if json_out:
        _print_json(report)
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


class _Progress:
    """Rich progress bars on stderr (only on a terminal) for the scan and embedding phases."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            from brainmap.termsafe import raw

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                # the bar redraws itself with cursor controls, and shows only our own labels
                console=Console(file=raw(sys.stderr), highlight=False),
                transient=True,
                # while it runs, other output still goes through the cleaning sys streams
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._bar.__enter__()
        return self

    def update(self, phase: str, done: int, total: int | None) -> None:
        if self._bar is None:
            return
        if phase not in self._tasks:
            label = {"scan": "scanning files", "embed": "embedding chunks",
                     "git": "importing commits"}.get(phase, phase)  # fmt: skip
            self._tasks[phase] = self._bar.add_task(label, total=total, rate="")
        task = self._tasks[phase]
        elapsed = self._bar.tasks[task].elapsed or 0.0
        rate = f"{done / elapsed:.0f} chunks/s" if phase == "embed" and elapsed > 0.5 else ""
        self._bar.update(task, completed=done, total=total, rate=rate)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


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

    brain = _brain()
    names = [lib.name for lib in brain.cfg.select(list(libraries))]
    click.echo(f"watching {', '.join(names) or 'nothing'} (Ctrl-C to stop)")

    def reindex(changed: list[str]) -> None:
        _print_reindex(
            ops.reindex(brain, ops.ReindexInput(libraries=changed, full=False, embed=True))
        )

    try:
        watch_libraries(brain.cfg, names, reindex)
    except KeyboardInterrupt:
        click.echo("stopped")


# --- search ---------------------------------------------------------------------------------


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
        _fail("give a QUERY or --batch FILE", "brainmap search 'how do I ...'", code=2)
    # the search op's body, without the table's pydantic models: click has checked the
    # options, the search checks the rest (a cold search is the CLI's most frequent call)
    from brainmap.ops.lookup import find
    from brainmap.search import parse_since

    parse_since(since)  # a clear error for a date that is none
    for text in (query, *library, *type_, *tag, project or ""):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8 reached argv
            _fail("text contains a lone UTF-16 surrogate (not UTF-8)", code=2)
    result = find(
        _brain(), query, library=list(library) or None, type=list(type_) or None,
        tag=list(tag) or None, since=since, limit=limit, mode=mode,  # type: ignore[arg-type]
        route=not no_route, hop=hop, project=project, expand=expand,
        include_inactive=include_inactive,
    )  # fmt: skip
    if json_out:
        from dataclasses import asdict

        return click.echo(json.dumps(asdict(result), ensure_ascii=False, indent=2))
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
    brain = _brain()
    try:
        handle = sys.stdin if str(source) == "-" else source.open(encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot read {source}: {exc.strerror}")
    with handle:
        _answer_batch(brain, handle, defaults)


def _answer_batch(brain: Brain, handle: Any, defaults: dict[str, Any]) -> None:
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
        click.echo(json.dumps(out, ensure_ascii=False))


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

    entry = ops.get(_brain(), ops.GetInput(ref=ref))
    if json_out:
        return _print_json(entry)
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


# --- writing knowledge ----------------------------------------------------------------------


def _read_body(body: str | None, file: Path | None) -> str:
    if body is not None:
        return body
    if file is not None:
        try:
            return sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"cannot read {file}: {exc}")
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
        _print_json(result)
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

        here = identify(_brain().cfg, Path.cwd())
        project = here.name if here.known else None
    inp = _validate(
        ops.SaveInput, title=title, body=_read_body(body, file), type=type_, tags=list(tag) or None,
        library=library, project=project or None, folder=folder, force=force,
        merge_into=merge_into, supersedes=supersedes,
    )  # fmt: skip
    _print_saved(ops.save(_brain(), inp), json_out,
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

    inp = _validate(ops.SupersedeInput, old=old, new=new)
    result = ops.supersede(_brain(), inp)
    if json_out:
        return click.echo(json.dumps(asdict(result), ensure_ascii=False, indent=2))
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
    inp = _validate(
        ops.IngestInput, text=text, uri=uri, observed_at=observed_at, title=title,
        tags=list(tag) or None, library=library, force=force,
    )  # fmt: skip
    _print_saved(ops.ingest(_brain(), inp), json_out, "--force keeps it anyway", _INGEST_USAGE)


_INGEST_USAGE = (
    "ingest keeps a raw piece of text as a note in the inbox/ of a library and indexes it:\n"
    "  brainmap ingest TEXT|- [--uri URI] [--observed-at ISO-8601] [--title TITLE] [--tag TAG] "
    "[-l LIBRARY]\n"
    "For a typed entry you wrote (gotcha, pattern, decision...) use brainmap save."
)


# --- serving --------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback needs --token.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
    help="0: any free port (the first line printed says which).",
)  # fmt: skip
@click.option(
    "--token",
    envvar="BRAINMAP_TOKEN",
    help="Bearer token required on every request ($BRAINMAP_TOKEN): 16 or more printable "
    "ASCII characters, no spaces.",
)
@click.option(
    "--read-only", is_flag=True,
    help="Refuse every operation that writes (HTTP 403) and offer no MCP tool that does: save, "
    "ingest, reindex, git_import, verify, collect, supersede and map_recompute.",
)  # fmt: skip
@click.option("--allow-host", multiple=True, help="Extra Host name clients may use (repeatable).")
@click.option(
    "--max-body-mb",
    type=click.FloatRange(0.001, 1024),
    default=2.0,
    show_default=True,
    help="Largest request body.",
)
def serve(
    host: str, port: int, token: str | None, read_only: bool, allow_host: tuple[str, ...], max_body_mb: float
) -> None:  # fmt: skip
    """Serve the operations over HTTP (OpenAPI at /openapi.json) and MCP at /mcp.

    \b
    Examples:
      brainmap serve
      curl 'http://127.0.0.1:8765/search?query=docker+ports&limit=3'
      export BRAINMAP_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
      brainmap serve --host 0.0.0.0 --read-only
    """
    from brainmap.server import check_token
    from brainmap.server import serve as run_server

    check_token(token)  # before the model loads: a token that cannot work is a quick answer
    brain = _brain()
    brain.searcher.embedder()  # load the model before the first request

    def ready(url: str) -> None:
        mode = " (read-only)" if read_only else ""
        click.echo(
            f"brainmap serving {url}{mode}: REST + {url}/openapi.json, MCP at {url}/mcp", err=True
        )

    run_server(brain, host=host, port=port, token=token, read_only=read_only,
               allow_hosts=list(allow_host), max_body=int(max_body_mb * 1024 * 1024), ready=ready)  # fmt: skip


@cli.command("mcp")
@click.option(
    "--read-only", is_flag=True,
    help="Offer no tool that writes: save, ingest, reindex, git_import, verify, collect, "
    "supersede and map_recompute (the instructions then recommend none of them).",
)  # fmt: skip
def mcp_cmd(read_only: bool) -> None:
    """Serve the tools over MCP on stdin/stdout (for Claude Code and other MCP clients).

    \b
    Example:
      claude mcp add brainmap -- brainmap mcp
    """
    from brainmap.mcp_server import run_stdio

    run_stdio(_brain(), read_only=read_only)


def main() -> None:
    """Console-script entry point: user errors become a message and exit status 1."""
    from brainmap import termsafe

    termsafe.install()  # what files hold is shown on the terminal, never obeyed by it
    try:
        cli.main(prog_name="brainmap")
    except UserError as exc:
        _fail(exc.message, exc.hint)
    finally:
        if _state.brain is not None:
            _state.brain.close()


# more commands live in their own modules; importing them registers them on `cli`
from brainmap import (  # noqa: E402, F401
    cli_complete,
    cli_facts,
    cli_graph,
    cli_health,
    cli_hooks,
    cli_lint,
    cli_map,
    cli_reasoner,
    cli_sync,
    cli_usage,
)
