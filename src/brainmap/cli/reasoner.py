"""CLI commands of the optional reasoner: ``brainmap reasoner status`` and ``bakeoff``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from brainmap.cli.app import CONTEXT, cli
from brainmap.cli.common import Progress, echo_json, json_option, open_brain, validate

TASKS = ("tags", "expand", "summary", "answer")


def _print_line(value: Any) -> None:
    """One line of JSON (for `jq` and logs)."""
    from brainmap.ops import to_jsonable

    echo_json(to_jsonable(value), indent=None, separators=(",", ":"))


@cli.group(context_settings=CONTEXT)
def reasoner() -> None:
    """The optional LLM of [reasoner] in config.toml: whether it answers, and which model
    does the work best (the bake-off).

    \b
    Examples:
      brainmap reasoner status
      brainmap reasoner bakeoff --model qwen2.5:1.5b --model llama3.2:3b --task tags
    """


@reasoner.command("status")
@json_option
def reasoner_status(json_out: bool) -> None:
    """Whether the reasoner answers, its models, the latency of one request, the tokens
    spent today and the budget left. Exits with status 1 when it does not answer.

    \b
    Examples:
      brainmap reasoner status
      brainmap reasoner status --json | jq .left
    """
    from brainmap import ops

    brain = open_brain()
    r = ops.reasoner_status(brain, ops.NoInput())
    if json_out:
        _print_line(r)
    else:
        latency = f" in {r.latency_ms:g} ms" if r.latency_ms is not None else ""
        from brainmap.reasoner import USES

        uses = {use: getattr(brain.cfg.reasoner, use) for use in USES}
        rows = [
            ("url", r.url),
            ("model", r.model or "(none set: the server's default)"),
            ("answers", f"yes{latency}" if r.answers else f"no: {r.error}"),
            ("models", ", ".join(r.models) or "-"),
            ("today", f"{r.tokens_today:,} tokens in {r.calls_today} calls (UTC day)"),
            ("budget left", f"{r.budget_left:,} of {r.budget:,}"),
            ("uses", ", ".join(f"{use} {'on' if on else 'off'}" for use, on in uses.items())),
        ]
        for key, value in rows:
            click.echo(f"{key:<13}{value}")
    if not r.answers:
        sys.exit(1)


@reasoner.command("bakeoff")
@click.option("--model", "-m", "models", multiple=True,
              help="A model name the endpoint serves (repeatable). Default: [reasoner] model.")  # fmt: skip
@click.option("--task", "-t", "tasks", multiple=True, type=click.Choice(TASKS),
              help="Only this task (repeatable). Default: all four.")  # fmt: skip
@click.option("--limit", "-n", type=click.IntRange(1, 1000),
              help="Only the first N items of each task.")  # fmt: skip
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path),
              help="A labelled set of the packaged one's shape (brainmap/bakeoff.json).")  # fmt: skip
@json_option
def reasoner_bakeoff(
    models: tuple[str, ...], tasks: tuple[str, ...], limit: int | None, data: Path | None,
    json_out: bool,
) -> None:  # fmt: skip
    """Compare models on the reasoner's tasks over a small labelled set: per model and task,
    latency p50/p95, JSON validity (first answers that matched the schema), agreement with
    the labels (0..1) and tokens. Spends tokens of the daily budget. Exits with status 1
    when a model could not be asked.

    \b
    Tasks (agreement):
      tags     a note and a vocabulary -> tags (Jaccard with the expected tags)
      expand   a query -> rewrites (share of the expected key terms they contain)
      summary  diary lines -> a summary (share of the expected key terms)
      answer   numbered evidence -> cited claims, as ask writes them (the right one cited)

    \b
    Examples:
      brainmap reasoner bakeoff --model qwen2.5:1.5b --model llama3.2:3b
      brainmap reasoner bakeoff -m qwen2.5:1.5b --task tags --json
    """
    from brainmap import ops

    inp = validate(
        ops.BakeoffInput, models=list(models) or None, tasks=list(tasks) or None,
        data=str(data) if data else None, limit=limit,
    )  # fmt: skip
    with Progress() as progress:
        report = ops.reasoner_bakeoff(open_brain(), inp, progress=progress.update)
    if json_out:
        _print_line(report)
    else:
        _print_scores(report)
    errors = [s for s in report.scores if s.error]
    for s in errors:
        click.echo(f"error: {s.model} {s.task}: {s.error}", err=True)
    if errors:
        sys.exit(1)


def _print_scores(report: Any) -> None:
    """The bake-off as a plain table: every column whole, whatever the terminal's width."""
    head = ("model", "task", "items", "p50 ms", "p95 ms", "valid", "repaired", "failed",
            "agreement", "tokens")  # fmt: skip
    rows = [
        (s.model, s.task, str(s.items), f"{s.p50_ms:.0f}", f"{s.p95_ms:.0f}",
         f"{s.validity:.0%}", str(s.repaired), str(s.failed), f"{s.agreement:.2f}",
         f"{s.prompt_tokens + s.completion_tokens:,}")
        for s in report.scores
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        # names and tasks to the left, numbers to the right
        cells = [
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        click.echo("  ".join(cells).rstrip())
    click.echo(f"labelled set: {report.data}")
