"""What the CLI's commands share: opening the brain, --json, printing, errors, progress.

Heavy modules (pydantic, Rich, the ops, even json) load inside these helpers, when a command
calls them: ``--help`` and each Tab press are fresh processes too.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from brainmap.cli.app import state

if TYPE_CHECKING:
    from rich.console import Console

    from brainmap.ops import Brain


def open_brain() -> Brain:
    """The brain of ``--home`` (or the default home), opened once per process."""
    if state.brain is None:
        from brainmap.ops import Brain

        state.brain = Brain(state.home)
    return state.brain


def console(stderr: bool = False) -> Console:
    """A Rich console on stdout (or stderr), without syntax highlighting."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def echo_json(doc: Any, indent: int | None = 2, separators: tuple[str, str] | None = None) -> None:
    """Print ``doc`` (plain lists, dicts and scalars) as JSON, non-ASCII text as it is."""
    import json

    click.echo(json.dumps(doc, ensure_ascii=False, indent=indent, separators=separators))


def print_json(value: Any) -> None:
    """Print an op's result as indented JSON (what ``--json`` gives)."""
    from brainmap.ops import to_jsonable

    echo_json(to_jsonable(value))


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    """Print ``error: message`` (and a hint) on stderr and exit with ``code``: no traceback."""
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def validate(model: Any, **values: Any) -> Any:
    """An op's input model built from the options; invalid values exit 2 naming the fields."""
    from pydantic import ValidationError

    from brainmap.ops import describe_errors

    try:
        return model(**values)
    except ValidationError as exc:
        fail(describe_errors(exc.errors()), code=2)


json_option = click.option("--json", "json_out", is_flag=True, help="Print machine-readable JSON.")


class Progress:
    """Rich progress bars on stderr (only on a terminal) for the scan and embedding phases."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> Progress:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                SpinnerColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bars

            from brainmap.termsafe import raw

            self._bar = Bars(
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
        """The progress callback of the ops: ``done`` of ``total`` in ``phase``."""
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


def print_evidence(evidence: Any, against: Any, indent: str, *, library: bool) -> None:
    """The sources of an assertion (and those against it), one ``path:line (method)`` each."""
    for items, prefix, colour in ((evidence, "", "cyan"), (against, "against ", "red")):
        for ev in items:
            where = (f"{ev.library}:" if library else "") + ev.path
            where += f":{ev.line}" if ev.line else ""
            click.echo(click.style(f"{indent}{prefix}{where}", fg=colour) + f"  ({ev.method})")


def print_conflicts(report: Any) -> None:
    """``audit contradict`` as text: each slot, its sides and their evidence."""
    for conflict in report.conflicts:
        rule = conflict.resolved_by or "unresolved"
        click.echo(click.style(f"{conflict.library}: {conflict.slot}", bold=True)
                   + click.style(f"  [{rule}]", fg="yellow"))  # fmt: skip
        for side in conflict.sides:
            click.echo(f"  [{side.confidence}] {side.what}")
            print_evidence(side.evidence, side.against, "      ", library=False)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(report.counts.items()))
    click.echo(summary or "no conflicts")
