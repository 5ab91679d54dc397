"""CLI commands of the agent loop: ``brainmap hook EVENT`` (what Claude Code runs),
``brainmap hooks install|uninstall|status|plugin`` and ``brainmap diary rollup``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from brainmap.cli.app import cli, state
from brainmap.cli.common import json_option, open_brain, print_json, validate


@cli.command("hook")
@click.argument("event", metavar="EVENT")  # any text: an unknown one is logged, never exit 2
def hook_cmd(event: str) -> None:
    """Run one Claude Code hook: read its JSON on stdin, print the reply it expects.

    EVENT is the hook's event: SessionStart (the project, its gotchas and decisions, what is
    due for re-verification, the last diary lines, the library map), PreToolUse (notes about
    the file a Read or a write is about to touch), UserPromptSubmit (a few hits, when turned
    on), Stop and SessionEnd (append the session to the diary). It never breaks the agent:
    any problem gives exit 0, no output and a line in the home's logs/hooks.log.

    \b
    Example (what `brainmap hooks install` writes into .claude/settings.json):
      echo '{"hook_event_name":"SessionStart","session_id":"s1","cwd":"'$PWD'"}' \\
        | brainmap hook SessionStart
    """
    from brainmap.claude import run_hook

    sys.exit(run_hook(event, state.home, sys.stdin.buffer, sys.stdout))


@cli.group(context_settings={"help_option_names": ["-h", "--help"]})
def hooks() -> None:
    """Install brainmap's hooks into Claude Code, remove them, check them.

    \b
    Examples:
      brainmap hooks install --mcp
      brainmap hooks status
      brainmap hooks uninstall
    """


def _print_change(change: Any, json_out: bool) -> None:
    if json_out:
        return print_json(change)
    if not change.files:
        click.echo(f"nothing of brainmap's in {change.settings}")
    for file in change.files:
        verb = (
            f"would be {file.action}"
            if change.dry_run and file.action != "unchanged"
            else file.action
        )
        click.echo(f"{file.path}: {verb}")
        if change.dry_run and file.action != "unchanged":
            import difflib

            diff = difflib.unified_diff(
                file.before.splitlines(), file.after.splitlines(), "before", "after", lineterm=""
            )
            for line in diff:
                click.echo(f"  {line}")
    for hook in change.hooks:
        click.echo(f"  hook: {hook}")
    if change.command:
        click.echo(f"  runs: {change.command} hook EVENT")


_scope_options = [
    click.option("--project", "project_dir", type=click.Path(file_okay=False, path_type=Path),
                 help="The project folder (default: the current one): DIR/.claude/settings.json."),
    click.option("--user", "user", is_flag=True,
                 help="~/.claude/settings.json: every project of this user."),
    click.option("--local", "local", is_flag=True,
                 help="DIR/.claude/settings.local.json: this machine only (not committed)."),
    click.option("--dry-run", is_flag=True, help="Print the change; write nothing."),
    json_option,
]  # fmt: skip


def _scoped(func: Any) -> Any:
    for option in reversed(_scope_options):
        func = option(func)
    return func


@hooks.command("install")
@_scoped
@click.option("--prompt", is_flag=True, help="Also UserPromptSubmit: a few hits per prompt.")
@click.option("--mcp", is_flag=True, help="Also register the MCP server in DIR/.mcp.json.")
def hooks_install(
    project_dir: Path | None, user: bool, local: bool, dry_run: bool, json_out: bool,
    prompt: bool, mcp: bool,
) -> None:  # fmt: skip
    """Add brainmap's hooks to Claude Code's settings, keeping every other key and hook.

    Installs SessionStart, PreToolUse (Read; Write, Edit, MultiEdit, NotebookEdit), Stop and
    SessionEnd; --prompt adds UserPromptSubmit. Running it again changes nothing. The hooks
    run this installation of brainmap with this home: machine-specific paths, so in a
    settings.json you commit prefer --local (settings.local.json), and let each teammate
    install for themselves.

    \b
    Examples:
      brainmap hooks install --mcp              # this project, with the MCP server
      brainmap hooks install --user --dry-run   # every project; show the change only
    """
    from brainmap import ops

    inp = validate(
        ops.HooksInput, scope="user" if user else "project",
        project_dir=str(project_dir) if project_dir else None, prompt=prompt, mcp=mcp,
        local=local, dry_run=dry_run,
    )  # fmt: skip
    _print_change(ops.hooks_install(open_brain(), inp), json_out)


@hooks.command("uninstall")
@_scoped
def hooks_uninstall(
    project_dir: Path | None, user: bool, local: bool, dry_run: bool, json_out: bool
) -> None:
    """Remove brainmap's hooks (and its MCP server of the project), nothing else. A file
    brainmap changed gets its original bytes back when nothing else changed in it.

    \b
    Example:
      brainmap hooks uninstall
    """
    from brainmap import ops

    inp = validate(
        ops.HooksRemoveInput, scope="user" if user else "project",
        project_dir=str(project_dir) if project_dir else None, local=local, dry_run=dry_run,
    )  # fmt: skip
    _print_change(ops.hooks_uninstall(open_brain(), inp), json_out)


@hooks.command("status")
@click.option("--project", "project_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The project folder (default: the current one).")  # fmt: skip
@click.option("--no-run", is_flag=True, help="Do not start the hooks to check them.")
@json_option
def hooks_status(project_dir: Path | None, no_run: bool, json_out: bool) -> None:
    """Show which brainmap hooks are installed (project, local and user settings) and
    whether each runs (each is started once with an empty input, which it ignores).

    \b
    Example:
      brainmap hooks status
    """
    from brainmap import ops

    inp = validate(ops.HooksStatusInput, project_dir=str(project_dir) if project_dir else None,
                    run=not no_run)  # fmt: skip
    status = ops.hooks_status(open_brain(), inp)
    if json_out:
        return print_json(status)
    if not status.hooks:
        click.echo("no brainmap hooks installed (looked in: " + ", ".join(status.settings) + ")")
        click.echo("hint: brainmap hooks install")
    for hook in status.hooks:
        state = {True: "runs", False: "FAILS", None: "not checked"}[hook.runs]
        timing = f" in {hook.seconds:.2f} s" if hook.seconds is not None else ""
        where = f"{hook.event} {hook.matcher or ''}".strip()
        click.echo(f"{where:48} {state}{timing}  ({hook.settings})")
        if hook.problem:
            click.echo(f"  problem: {hook.problem}")
    for path in status.mcp:
        click.echo(f"MCP server registered in {path}")


@hooks.command("plugin")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--command", "command", default="brainmap", show_default=True,
              help="How the plugin's hooks run brainmap.")  # fmt: skip
def hooks_plugin(folder: Path, command: str) -> None:
    """Write brainmap as a Claude Code plugin (a marketplace with one plugin: manifest,
    hooks, MCP server) into FOLDER.

    \b
    Example:
      brainmap hooks plugin ~/brainmap-plugin
      claude plugin marketplace add ~/brainmap-plugin && claude plugin install brainmap@brainmap
    """
    from brainmap.ops.agent import plugin_files
    from brainmap.safefile import atomic_write

    folder = folder.expanduser().absolute()
    for rel, text in plugin_files(command).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(folder, target, text.encode("utf-8"))
        click.echo(f"wrote {target}")


@cli.group(context_settings={"help_option_names": ["-h", "--help"]})
def diary() -> None:
    """The diary of agent sessions (written by the Stop hook) and its rollups.

    \b
    Example:
      brainmap diary rollup --completed
    """


@diary.command("rollup")
@click.option("--week", "period", flag_value="week", help="Weekly rollups only.")
@click.option("--month", "period", flag_value="month", help="Monthly rollups only.")
@click.option("--project", help="One project (default: every project in the diary).")
@click.option("--completed", is_flag=True, help="Only periods that have ended.")
@json_option
def diary_rollup(period: str | None, project: str | None, completed: bool, json_out: bool) -> None:
    """Write the weekly (YYYY-Www.md) and monthly (YYYY-MM.md) rollups of the diary:
    sessions, most-touched files, notes and decisions saved, errors that recurred, links to
    the days. A rollup is rewritten only when its days changed. Reindex and SessionStart
    roll up completed periods by themselves.

    \b
    Examples:
      brainmap diary rollup
      brainmap diary rollup --week --project web
    """
    from brainmap import ops

    inp = validate(ops.DiaryRollupInput, period=period or "both", project=project,
                    completed=completed)  # fmt: skip
    report = ops.diary_rollup(open_brain(), inp)
    if json_out:
        return print_json(report)
    for path in report.written:
        click.echo(f"wrote {path}")
    if not report.written:
        click.echo("every rollup is up to date" if report.projects else "the diary is empty")
    _echo_spent(report.reasoner)


def _echo_spent(spent: Any) -> None:
    """What the reasoner cost, and each thing it was skipped for (nothing without one)."""
    if spent is None:
        return
    if spent.calls:
        click.echo(f"reasoner {spent.model}: {spent.calls} call(s), "
                   f"{spent.prompt_tokens + spent.completion_tokens:,} tokens")  # fmt: skip
    for why in spent.skipped:
        click.echo(f"reasoner skipped: {why}")


@diary.command("summarize")
@click.option("--project", required=True, help="The project (as the diary names it).")
@click.option("--session", help="One session's sections (default: every session's).")
@click.option("--day", help="One day, YYYY-MM-DD (default: the project's last days).")
@click.option("--no-rollups", is_flag=True, help="Leave the rollups' paragraphs alone.")
@click.option("--after-stop", is_flag=True, hidden=True, help="As the Stop hook's background run.")
@json_option
def diary_summarize(project: str, session: str | None, day: str | None, no_rollups: bool,
                    after_stop: bool, json_out: bool) -> None:  # fmt: skip
    """Write the reasoner's summaries the diary lacks: a 2-4 sentence `- Summary:` line at
    the end of each section of the project's days, and the paragraph of its completed
    rollups. What has one is left alone. The Stop hook runs this in the background after
    each turn when [reasoner] url is set and diary = true.

    \b
    Example:
      brainmap diary summarize --project web --day 2026-11-30
    """
    from brainmap import ops

    inp = validate(ops.DiarySummarizeInput, project=project, session=session, day=day,
                    rollups=not no_rollups, after_stop=after_stop)  # fmt: skip
    report = ops.diary_summarize(open_brain(), inp)
    if json_out:
        return print_json(report)
    for path in report.written:
        click.echo(f"wrote {path}")
    if report.reasoner is None:
        click.echo("no reasoner for the diary ([reasoner] url is empty or diary = false): "
                   "nothing written")  # fmt: skip
    elif not report.written and not report.reasoner.skipped:
        click.echo("every summary is written")
    _echo_spent(report.reasoner)
